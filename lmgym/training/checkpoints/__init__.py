"""Checkpoints: saving, loading and resuming a trainer's state, kill-safe at any moment.

- `folders`: the `<run>/checkpoint-N/` folders (the previous layout's `<run>/checkpoints/iter-N/` still read),
  written atomically and sealed by a manifest, verified,
  pruned, and safe loading of their torch files;
- `layout`: which file of a checkpoint holds which entry of a trainer's state (the Hugging Face Trainer's
  files), and back;
- `sharded`: the same under FSDP, where each rank writes its own shards;
- `state_checks`: every field that resuming reads, checked before anything is applied;
- `hf_state`: the HF Trainer's keys of trainer_state.json (`global_step`, `log_history`, ...);
- `trainer_state`: a `Trainer`'s save, load, resume and start-over, and its final model folder.
"""
from lmgym.training.checkpoints.folders import (
    CHECKPOINTS,
    LEGACY,
    MANIFEST,
    Checkpoint,
    CheckpointError,
    CorruptCheckpointError,
    UnsafeCheckpointError,
    checkpoint_name,
    complete_checkpoints,
    file_entry,
    has_checkpoints,
    iteration_of,
    load_state,
    resume_candidates,
    seal,
    set_aside_corrupt,
    staging_folder,
    unsealed_checkpoints,
    verify,
    write_checkpoint,
    write_files,
)
from lmgym.training.run_logger import archive_history

__all__ = [
    "CHECKPOINTS", "LEGACY", "MANIFEST", "Checkpoint", "CheckpointError", "CorruptCheckpointError",
    "UnsafeCheckpointError", "checkpoint_name", "complete_checkpoints", "has_checkpoints", "iteration_of", "load_state",
    "resume_candidates", "set_aside_corrupt", "unsealed_checkpoints", "verify", "write_checkpoint",
    "archive_history", "file_entry", "staging_folder", "seal", "write_files",
]
