"""A `Trainer`'s checkpoints: save, load, resume, start over; and the final model folder.

What a checkpoint holds comes from the trainer's hooks: `state_dict()` (the core state below plus
whatever a subclass adds, e.g. RLAlgorithm's reference; written as the HF Trainer's files, weights in
safetensors: training/checkpoints/layout.py) and `checkpoint_files()` (other files, e.g. RLAlgorithm's
buffer.jsonl, each with its writer and reader). Reading verifies and reads
everything before anything is applied (`load_state_dict`), so a bad checkpoint changes nothing it
can detect early. The folder layout, manifests and safe loading are training/checkpoints/folders.py's.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any, NamedTuple

import torch

from lmgym.core.atomic_io import give_usual_modes, refuse_symlink, remove_tree
from lmgym.core.messages import first_line
from lmgym.training import distributed as dist
from lmgym.training.checkpoints import folders as ckpt
from lmgym.training.checkpoints import layout, sharded, state_checks
from lmgym.training.checkpoints.hf_state import hf_trainer_state
from lmgym.training.completions_log import COMPLETIONS
from lmgym.training.guards import warn
from lmgym.training.run_logger import DISCARDED, TENSORBOARD, WANDB_ID, archive_history

REQUIRED = ("iteration", "policy", "optimizer", "scheduler", "rng")  # what every checkpoint's state holds
REQUIRED_SHARDED = ("iteration", "scheduler", "rng", "rank_rng")  # ... under FSDP (weights in sharded/)


class CheckpointFile(NamedTuple):
    """A file of a checkpoint besides the trainer's state: `write(path)`, and `read(path)` giving what
    `load_state_dict` finds under the file's name (a ValueError marks the file corrupt)."""

    write: Callable[[Path], None]
    read: Callable[[Path], Any]


def core_state(trainer) -> dict[str, Any]:
    """What every trainer's checkpoint state holds: iteration, weights, optimizer, scheduler, RNG states, guards.
    Under FSDP the weights and optimizer go to the sharded folder instead, and every rank's RNG states
    and the world size are added (training/checkpoints/sharded.py; every rank must call it then)."""
    if sharded.is_sharded(trainer):
        rng = rng_state(trainer)
        return {"iteration": trainer.iteration, "scheduler": trainer.scheduler.state_dict(),
                "extra": trainer.extra_state(), "nonfinite_streak": trainer._nonfinite_streak, "rng": rng,
                **sharded.state_entries(rng)}
    return {
        "iteration": trainer.iteration,
        "policy": trainer.policy.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "scheduler": trainer.scheduler.state_dict(),
        "extra": trainer.extra_state(),
        "nonfinite_streak": trainer._nonfinite_streak,
        "rng": rng_state(trainer),
    }


def rng_state(trainer) -> dict[str, Any]:
    """This process's random states: the trainer's generators, numpy's, Python's, torch's (and CUDA's)."""
    return {"numpy_algorithm": trainer.rng.bit_generator.state, "python": random.getstate(),
            "torch": torch.get_rng_state(), "generator": trainer.generator.get_state(),
            "generator_device": trainer.generator.device.type,
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def load_core_state(trainer, state: dict[str, Any]) -> None:
    """Counterpart of `core_state` (a sharded checkpoint: every rank loads its shards and its RNG states)."""
    if sharded.SHARDED in state:
        sharded.load_shards(trainer, Path(state[sharded.SHARDED]["path"]))
        rng = sharded.rank_rng(state)
    else:
        trainer.policy.load_state_dict(state["policy"])
        trainer.optimizer.load_state_dict(state["optimizer"])
        rng = state["rng"]
    trainer.scheduler.load_state_dict(state["scheduler"])
    trainer.load_extra_state(state.get("extra", {}))
    trainer.rng.bit_generator.state = rng["numpy_algorithm"]
    random.setstate(rng["python"])
    torch.set_rng_state(rng["torch"])
    _load_generator(trainer, rng, int(state["iteration"]))
    if rng["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    trainer.iteration = int(state["iteration"])
    trainer._nonfinite_streak = int(state.get("nonfinite_streak", 0))


def _load_generator(trainer, rng: dict[str, Any], iteration: int) -> None:
    """The trainer's sampling generator from `rng`; a state saved from a generator on another device type (a
    GPU run resumed on the CPU, or the other way) cannot be set on this one, so the generator is seeded from
    the run's seed and the checkpoint's iteration instead, with one warning line."""
    saved = state_checks.generator_device(rng)
    here = trainer.generator.device.type
    if saved == here:
        trainer.generator.set_state(rng["generator"])
        return
    warn(f"the checkpoint's sampling generator was on {saved}, this run's is on {here}: it is seeded from the "
         f"seed and the iteration instead, so sampling from here differs from an uninterrupted run's")
    trainer.generator.manual_seed(int(trainer.config.seed) * 1_000_003 + iteration)


def save_checkpoint(trainer, run_dir: str | Path | None = None) -> Path | None:
    """Write `<run_dir>/checkpoint-<N>` (the state's files and the trainer's other files; with
    `save_only_model` the model's alone, as the HF Trainer does), keeping the newest `keep_checkpoints`. Returns
    the folder (None on non-main processes). Under FSDP every rank must call it, every rank writes its shards,
    and every rank gets the folder."""
    if sharded.is_sharded(trainer):
        return sharded.save(trainer, run_dir if run_dir is not None else trainer.config.output_dir)
    if not dist.is_main():
        return None
    if trainer.config.save_only_model:
        writers = layout.state_files({"iteration": trainer.iteration, "policy": trainer.policy.state_dict()},
                                     hf_trainer_state(trainer), model_only=True)
    else:
        writers = layout.state_files(trainer.state_dict(), hf_trainer_state(trainer))
        writers.update({name: file.write for name, file in trainer.checkpoint_files().items()})
    if "model.safetensors" in writers and hasattr(trainer.policy, "pretrained_files"):  # from_pretrained loads it
        writers.update({n: w for n, w in trainer.policy.pretrained_files().items() if n not in writers})
    return ckpt.write_checkpoint(run_dir if run_dir is not None else trainer.config.output_dir, trainer.iteration,
                                 writers, trainer.config.keep_checkpoints)


def read_checkpoint(trainer, directory: Path) -> dict[str, Any]:
    """Verify a checkpoint folder and read it (nothing applied yet): the state's entries (each field that
    loading reads checked: training/checkpoints/state_checks.py), plus each of the trainer's other files that is
    present, under its name."""
    ckpt.verify(directory)
    if layout.is_model_only(directory):  # not corrupt (never set aside): it was written so
        raise ckpt.CheckpointError(f"{directory}: written with save_only_model (the model's weights alone, no "
                                   f"optimizer, scheduler or RNG states): it cannot be resumed; load it with "
                                   f"from_pretrained, or train with save_only_model off to resume")
    state = layout.read_state(directory)
    where = layout.state_path(directory)
    if sharded.SHARDED in state or sharded.is_sharded(trainer):  # shards fit only an FSDP run of their size
        sharded.check_fits(directory, state, sharded.is_sharded(trainer))
        state[sharded.SHARDED] = {**state[sharded.SHARDED], "path": str(directory / sharded.SHARDED)}
    missing = [k for k in (REQUIRED_SHARDED if sharded.SHARDED in state else REQUIRED) if k not in state]
    if missing:
        raise ckpt.CorruptCheckpointError(f"{where}: not a checkpoint (no {', '.join(missing)})")
    state_checks.check_state(layout.locator(directory), state, ckpt.iteration_of(directory))
    if sharded.SHARDED in state:  # every rank's shards (and, checked above, RNG states) or it is incomplete
        sharded.check_complete(directory, state)
    for name, file in trainer.checkpoint_files().items():
        if (directory / name).is_file():
            try:
                state[name] = file.read(directory / name)
            except ValueError as err:
                raise ckpt.CorruptCheckpointError(str(err)) from None
    return state


def apply_checkpoint(trainer, directory: Path, state: dict[str, Any]) -> None:
    """`trainer.load_state_dict(state)`; anything that does not fit is one CheckpointError line."""
    try:
        trainer.load_state_dict(state)
    except ckpt.CheckpointError as err:
        raise ckpt.CheckpointError(f"{directory}: {err}") from None
    except (RuntimeError, KeyError, ValueError, TypeError) as err:
        first = first_line(err)
        raise ckpt.CheckpointError(f"{directory}: does not fit this model and algorithm ({first[:200]})") from None


def load_checkpoint(trainer, directory: str | Path) -> None:
    """Restore one checkpoint folder written by `save_checkpoint` (or the old `checkpoint/` layout)."""
    directory = Path(directory)
    if not layout.is_state_folder(directory):
        raise FileNotFoundError(f"no checkpoint at {directory} (expected {directory / layout.STATE_JSON})")
    apply_checkpoint(trainer, directory, read_checkpoint(trainer, directory))


def resume_checkpoint(trainer, run_dir: str | Path) -> Path | None:
    """Load the newest checkpoint of `run_dir` that verifies, saying which; corrupt ones are skipped
    with a warning (and renamed `corrupt-*`). Returns its folder, or None when there is none. Under FSDP
    every rank must call it (see `_resume_sharded`)."""
    if sharded.is_sharded(trainer):
        return _resume_sharded(trainer, run_dir)
    for candidate in ckpt.resume_candidates(run_dir):
        try:
            state = read_checkpoint(trainer, candidate.path)
        except ckpt.CorruptCheckpointError as err:
            warn(f"skipping a checkpoint that does not verify: {err}")
            if dist.is_main():
                ckpt.set_aside_corrupt(candidate)
            continue
        apply_checkpoint(trainer, candidate.path, state)
        if dist.is_main():
            warn_passed_over(run_dir, candidate)
        print(f"resuming from {candidate.path} (iteration {trainer.iteration})", flush=True)
        return candidate.path
    if dist.is_main():
        warn_passed_over(run_dir, None)
    return None


def resume_named(trainer, run_dir: Path, which: bool | str | Path) -> Path:
    """`train(resume_from_checkpoint=...)`, as the HF Trainer takes it: True (or "true", as a flag gives it) the
    newest complete checkpoint of `run_dir` (none: one CheckpointError line), a path that checkpoint folder
    (verified, never set aside). Under FSDP every rank must call it. Returns the folder resumed from."""
    if which is True or (isinstance(which, str) and which.strip().lower() in ("true", "latest", "last")):
        with nullcontext() if sharded.is_sharded(trainer) else dist.main_first():
            found = resume_checkpoint(trainer, run_dir)
        if found is None:
            raise ckpt.CheckpointError(f"resume_from_checkpoint=True: no complete checkpoint in {run_dir} "
                                       f"(no {ckpt.PREFIX}N folder with a {ckpt.MANIFEST})")
        return found
    folder = Path(which).expanduser()
    if not layout.is_state_folder(folder):
        raise FileNotFoundError(f"resume_from_checkpoint: no checkpoint at {folder} (expected "
                                f"{folder / layout.STATE_JSON})")
    load_checkpoint(trainer, folder)
    print(f"resuming from {folder} (iteration {trainer.iteration})", flush=True)
    return folder


def warn_passed_over(run_dir: str | Path, resumed: ckpt.Checkpoint | None) -> None:
    """One warning line per `checkpoint-*` (or old `iter-*`) entry newer than the checkpoint resumed from
    (`resumed`; None: none, the run starts over) that resuming passed over because it has no manifest or is a
    link, naming both."""
    since = resumed.iteration if resumed is not None and resumed.iteration is not None else -1
    for path in ckpt.unsealed_checkpoints(run_dir):
        if ckpt.iteration_of(path) > since:
            reason = "a symbolic link, not this run's" if path.is_symlink() else f"no {ckpt.MANIFEST} (incomplete)"
            instead = (f"resuming from {resumed.path} instead (the next save removes {path.name})"
                       if resumed is not None else "no other checkpoint to resume from")
            warn(f"skipping {path}: {reason}; {instead}")


def _resume_sharded(trainer, run_dir: str | Path) -> Path | None:
    """`resume_checkpoint` under FSDP: rank 0 picks the newest checkpoint that verifies (setting corrupt
    ones aside), then every rank reads it and loads its own shards and RNG states."""
    picked: dict[str, Any] = {}

    def pick() -> str | None:
        for candidate in ckpt.resume_candidates(run_dir):
            try:
                picked["state"] = read_checkpoint(trainer, candidate.path)
            except ckpt.CorruptCheckpointError as err:
                warn(f"skipping a checkpoint that does not verify: {err}")
                ckpt.set_aside_corrupt(candidate)
                continue
            warn_passed_over(run_dir, candidate)
            return str(candidate.path)
        warn_passed_over(run_dir, None)
        return None

    found = dist.main_result(pick)  # a checkpoint that does not fit (e.g. another world size) stops every rank
    if found is None:
        return None
    path = Path(found)
    apply_checkpoint(trainer, path, picked["state"] if dist.is_main() else read_checkpoint(trainer, path))
    print(f"resuming from {path} (iteration {trainer.iteration})", flush=True)
    return path


# What a run writes into or replaces in its folder. None may be a symlink: following one would write into
# (or prune, or replace) files outside the run folder, and replacing the link would silently move the
# output away from where it points. Symlink the run folder itself to put a run on another disk.
WRITTEN_ENTRIES = (ckpt.CHECKPOINTS, ckpt.LEGACY, "model", "metrics.jsonl", DISCARDED, COMPLETIONS, "metrics.png",
                   "reward_components.png", "reward_distribution.png", WANDB_ID, TENSORBOARD)


def refuse_symlinked_entries(run_dir: Path) -> None:
    """One-line SymlinkRefusedError naming the first of `WRITTEN_ENTRIES` in `run_dir` that is a symlink,
    checked before training so that no work is lost to it at the end."""
    for name in WRITTEN_ENTRIES:
        refuse_symlink(run_dir / name, f"{name} in the run folder")


def after_restart(run_dir: Path, resume: bool, named: bool | str | Path | None
                  ) -> tuple[bool, bool | str | Path | None, int]:
    """`(resume, resume_from_checkpoint, restart)` for `train(resume, resume_from_checkpoint=named)`, where
    `restart` is torchrun's restart count (TORCHELASTIC_RESTART_COUNT; 0: the first start, or no torchrun: both
    returned as given). A restarted run (a rank was lost, torchrun started every rank again) resumes from the
    newest complete checkpoint of `run_dir`, as `--resume` would, so a lost rank costs at most the work since
    that checkpoint; a checkpoint named by `resume_from_checkpoint` (the launch's, perhaps an older one) is loaded
    again only while `run_dir` has no complete checkpoint. No checkpoint at all: `start_over` warns in one line and
    starts from iteration 0. Every rank must call it (a collective: the largest count of any rank is the run's,
    since torchrun's agents on several nodes count restarts apart; rank 0 looks at the folder)."""
    restart = max(dist.gather_lists([dist.restart_count()]))
    if not restart:
        return resume, named, 0
    latest = named is True or (isinstance(named, str) and named.strip().lower() in ("true", "latest", "last"))
    if named in (None, False) or latest or dist.main_result(lambda: bool(ckpt.resume_candidates(run_dir))):
        return True, None, restart
    return True, named, restart


def start_over(run_dir: Path, resume: bool, restart: int = 0) -> None:
    """Iteration 0 in a folder that may hold an earlier run: its files are moved aside, never deleted.
    `restart`: torchrun's restart count (a restart that found no checkpoint says so in one warning line)."""
    if restart:
        warn(f"torchrun restart {restart}: no complete checkpoint in {run_dir} to resume from; starting again "
             f"from iteration 0")
    elif resume:
        print(f"note: --resume: no checkpoint in {run_dir}, starting from iteration 0", flush=True)
    folders = tuple(sorted(p.name for p in run_dir.glob(f"*{ckpt.PREFIX}*") if ckpt.is_archived_name(p.name)))
    n = archive_history(run_dir, (*folders, ckpt.CHECKPOINTS, ckpt.LEGACY, "metrics.jsonl", DISCARDED, COMPLETIONS,
                                    TENSORBOARD))
    if n is not None:
        print(f"note: {run_dir} held an earlier run; its metrics and checkpoints are kept as *.{n}.*bak", flush=True)


def write_model_folder(policy, final: Path, generation: dict | None) -> Path:
    """`policy.save` as a Hugging Face folder at `final`, written aside and renamed into place. A LoRA
    policy is saved merged, with its adapter in `final/adapter`."""
    refuse_symlink(final, "the model folder")  # replacing the link would move the model away from its target
    tmp = final.with_name(f".tmp-{final.name}")
    remove_tree(tmp)  # a leftover of a killed save; a link there is unlinked alone
    policy.save(tmp, generation=generation, merged=True)
    if getattr(policy, "is_lora", False):
        policy.save(tmp / "adapter", generation=generation)
    give_usual_modes(tmp)
    remove_tree(final)
    tmp.rename(final)
    return final


def write_sharded_model_folder(policy, final: Path, generation: dict | None) -> Path | None:
    """`write_model_folder` under FSDP, called on every rank: the shards are gathered on rank 0's CPU,
    which writes the folder from the policy's `unsharded_copy` (policies/loading/unsharded.py). Returns the
    folder (None off rank 0)."""
    state = sharded.gathered_state(policy.model)
    folder = dist.main_result(lambda: write_model_folder(policy.unsharded_copy(state), final, generation))
    return folder if dist.is_main() else None
