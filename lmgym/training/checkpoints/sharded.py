"""Checkpoints and the model folder under `data_parallel="fsdp"`, where each rank holds only its shards.

`save` runs on every rank: each writes its shards of the policy and of the optimizer state through
`torch.distributed.checkpoint` (DCP) into `<checkpoint>/sharded/`; rank 0 writes the trainer's state
without weights or optimizer, plus the world size and every rank's RNG states (scheduler.pt,
rng_state.pth, extra_state.pt, trainer_state.json: training/checkpoints/layout.py) and the trainer's
other files. Only after every rank has written does rank 0 write the manifest (which lists the shard
files with their hashes, so `checkpoints.verify` checks them too) and rename the folder into place: a
folder named `checkpoint-*` is complete, as on one process. The shards are laid out for the world size that
wrote them: resuming needs as many ranks (`check_fits` says so in one line otherwise). Every rank's shards and
RNG states are part of a checkpoint's completeness (`check_complete`): a manifest without some rank's shard file
(a copy or sync that lost one) marks the checkpoint corrupt, so resuming sets it aside and takes the one before.

`gathered_state` collects the whole model on rank 0 (every rank takes part) for the model folder.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from lmgym.core.jsonl import read_json
from lmgym.core.messages import first_line
from lmgym.training import distributed as dist
from lmgym.training.checkpoints import folders as ckpt
from lmgym.training.checkpoints import layout
from lmgym.training.checkpoints.hf_state import hf_trainer_state

SHARDED = "sharded"  # the DCP folder inside a checkpoint
METADATA = ".metadata"  # DCP's index of the shards
# DCP's FileSystemWriter names rank r's data files __<r>_<i>.distcp (one per rank and writer thread; a rank with
# nothing to write still writes its empty file)
_SHARD_FILE = re.compile(rf"^{SHARDED}/__(\d+)_\d+\.distcp$")


def is_sharded(trainer) -> bool:
    """Whether `trainer`'s policy is sharded by FSDP (more than one process, data_parallel="fsdp")."""
    return getattr(getattr(trainer, "gradients", None), "mode", None) == "fsdp"


class _Trained(torch.nn.Module):
    """What DCP saves: the policy's model and, by position, the optimizer's parameters outside it (e.g.
    PPO's value head), so that every parameter the optimizer holds has a name."""

    def __init__(self, model: torch.nn.Module, others: list[torch.nn.Parameter]):
        super().__init__()
        self.policy = model
        self.others = torch.nn.ParameterList(others)


def _trained(trainer) -> _Trained:
    model = trainer.policy.model
    inside = {id(p) for p in model.parameters()}
    return _Trained(model, [p for p in trainer.trainable_parameters() if id(p) not in inside])


def state_entries(rng: dict[str, Any]) -> dict[str, Any]:
    """What the trainer's state holds under FSDP besides the trainer's state: the world size, and every rank's RNG
    states (`rng`: this rank's), gathered on every rank (a collective)."""
    return {SHARDED: {"world_size": dist.world_size()}, "rank_rng": dist.gather_lists([rng])}


def rank_rng(state: dict[str, Any]) -> dict[str, Any]:
    """This rank's RNG states from a sharded checkpoint's state."""
    return state["rank_rng"][dist.rank()]


def check_fits(directory: Path, state: dict[str, Any], sharded_here: bool) -> None:
    """One CheckpointError line unless a sharded checkpoint meets an FSDP run of its world size (or an
    unsharded one a run without FSDP)."""
    saved, world = state.get(SHARDED), dist.world_size()
    here = f"this run has {world} process{'es' if world > 1 else ''}"
    if saved is None and sharded_here:
        raise ckpt.CheckpointError(
            f"{directory}: not a sharded checkpoint (written without data_parallel='fsdp'); an FSDP run resumes "
            f"only checkpoints that FSDP wrote on as many ranks")
    if saved is None:
        return
    n = int(saved.get("world_size", 0))
    if not sharded_here:
        raise ckpt.CheckpointError(
            f"{directory}: a sharded checkpoint of {n} FSDP ranks, but {here} without FSDP; resume it with "
            f"data_parallel='fsdp' on {n} ranks (torchrun --nproc_per_node {n})")
    if n != world:
        raise ckpt.CheckpointError(
            f"{directory}: a sharded checkpoint of {n} FSDP ranks, but {here}; resume it on {n} ranks "
            f"(torchrun --nproc_per_node {n})")


def check_complete(directory: Path, state: dict[str, Any]) -> None:
    """One CorruptCheckpointError line unless the manifest of the sharded checkpoint `directory` lists DCP's
    index and a shard file of every rank of the world size `state` records (whose RNG states the state
    checks hold: training/checkpoints/state_checks.py)."""
    files = read_json(directory / ckpt.MANIFEST)["files"]  # read by `verify` just before: well formed
    world = int(state[SHARDED]["world_size"])
    if f"{SHARDED}/{METADATA}" not in files:
        raise ckpt.CorruptCheckpointError(f"{directory}: incomplete sharded checkpoint (no {SHARDED}/{METADATA})")
    ranks = {int(m.group(1)) for name in files if (m := _SHARD_FILE.match(name))}
    missing = [r for r in range(world) if r not in ranks]
    if missing:
        raise ckpt.CorruptCheckpointError(
            f"{directory}: incomplete sharded checkpoint: no shard file of rank{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(str, missing))} of its {world} (every rank's shards are part of a checkpoint)")


def save_shards(trainer, folder: Path) -> None:
    """Every rank writes its shards of the policy and optimizer state into `folder` (DCP; a collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optimizer_state = get_state_dict(_trained(trainer), trainer.optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(folder))


def load_shards(trainer, folder: Path) -> None:
    """Every rank loads its shards of the policy and optimizer state from `folder` (a collective); what
    does not fit this model and optimizer is one CheckpointError line."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    trained = _trained(trainer)
    model_state, optimizer_state = get_state_dict(trained, trainer.optimizer)
    try:
        dcp.load({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(folder))
    except (CheckpointException, RuntimeError) as err:  # CheckpointException is a BaseException
        cause = next(iter(err.failures.values()))[0] if isinstance(err, CheckpointException) and err.failures else err
        first = first_line(cause)
        raise ckpt.CheckpointError(f"its shards do not fit this model and optimizer ({first[:200]})") from None
    set_state_dict(trained, trainer.optimizer, model_state_dict=model_state, optim_state_dict=optimizer_state)


def save(trainer, run_dir: str | Path) -> Path:
    """Write `<run_dir>/checkpoint-<N>` from every rank (see the module's docstring); returns the
    folder on every rank."""
    state = trainer.state_dict()  # every rank: it gathers the RNG states
    tmp = Path(dist.main_result(lambda: str(ckpt.staging_folder(run_dir, trainer.iteration))))
    save_shards(trainer, tmp / SHARDED)

    def write_rest() -> dict[str, dict]:
        writers = layout.state_files(state, hf_trainer_state(trainer))
        writers.update({name: file.write for name, file in trainer.checkpoint_files().items()})
        return ckpt.write_files(tmp, writers)

    files = dist.main_result(write_rest)
    dist.barrier()  # every rank has written its shards (dcp.save ends with a collective too): now seal

    def seal() -> str:
        shards = {f"{SHARDED}/{p.name}": ckpt.file_entry(p) for p in sorted((tmp / SHARDED).iterdir())}
        return str(ckpt.seal(run_dir, tmp, trainer.iteration, {**files, **shards}, trainer.config.keep_checkpoints))

    return Path(dist.main_result(seal))


def gathered_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The whole state dict of a sharded `model`, on the CPU of rank 0 (empty elsewhere); every rank
    must call it (it all-gathers each shard)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
