"""Checks of a checkpoint's state (training/checkpoints/layout.py) before any of it is applied: every field
that resuming reads has the type and range it was written with. A wrong one is one CorruptCheckpointError
line naming the file and the field (e.g. `.../iter-000003/trainer_state.json: field iteration must be a whole
number >= 0, got -5`).

The RNG states are tried on throwaway generators of the same kind (numpy's, Python's, torch's; the trainer's
sampling generator's on its own device, CUDA's when it was on a GPU, where this machine has that device), so a
state that the trainer's own generators would refuse is caught here, with the file named, and nothing
of the trainer changes. What a field's weights hold (shapes, names) is checked when they are loaded
(`apply_checkpoint`: "does not fit this model and algorithm").
"""
from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lmgym.core.messages import first_line
from lmgym.training.checkpoints.folders import CorruptCheckpointError
from lmgym.training.checkpoints.sharded import SHARDED
from lmgym.training.config import shown

REFERENCE_SOURCES = ("none", "adapter", "initial", "policy", "stored")
BIT_GENERATORS = {"PCG64": np.random.PCG64, "PCG64DXSM": np.random.PCG64DXSM, "MT19937": np.random.MT19937,
                  "Philox": np.random.Philox, "SFC64": np.random.SFC64}
CUDA_STATE_BYTES = 16  # torch's CUDA (Philox) generator state: the seed and the offset, 8 bytes each


def check_state(path: Path | Callable[[str], Path], state: dict[str, Any], folder_iteration: int | None = None
                ) -> None:
    """Raise CorruptCheckpointError (naming the file and the field) unless every field of `state` that resuming
    reads is well formed. path: the state's file, or a function giving the file that holds a field
    (checkpoint_layout.locator). folder_iteration: the N of an `iter-N` folder (the state must say the same)."""
    iteration = _count(path, "iteration", state["iteration"])
    if folder_iteration is not None and iteration != folder_iteration:
        _fail(path, "iteration", f"says {iteration}, but the folder is iteration {folder_iteration}")
    if "nonfinite_streak" in state:
        _count(path, "nonfinite_streak", state["nonfinite_streak"])
    for name in ("policy", "optimizer", "scheduler", "extra"):
        if name in state:
            _mapping(path, name, state[name])
    if state.get("reference") is not None:
        _mapping(path, "reference", state["reference"])
    if isinstance(state.get("policy"), dict):
        bad = next((k for k, v in state["policy"].items() if not isinstance(v, torch.Tensor)), None)
        if bad is not None:
            _fail(path, f"policy[{bad!r}]", f"must be a tensor, got {type(state['policy'][bad]).__name__}")
    if "optimizer" in state:
        for key, kind in (("state", dict), ("param_groups", list)):
            if not isinstance(state["optimizer"].get(key), kind):
                got = type(state["optimizer"].get(key)).__name__
                _fail(path, f"optimizer[{key!r}]", f"must be a {kind.__name__}, got {got}")
    _check_reference(path, state, iteration)
    if SHARDED in state:
        _check_sharded(path, state)
    else:
        check_rng(path, "rng", state["rng"])


def check_rng(path: Path, field: str, rng: Any) -> None:
    """The RNG states of one process (trainer_state.rng_state), each tried on a throwaway generator."""
    _mapping(path, field, rng)
    for key in ("numpy_algorithm", "python", "torch", "generator"):
        if key not in rng:
            _fail(path, f"{field}[{key!r}]", "is missing")
    numpy_state = rng["numpy_algorithm"]
    _mapping(path, f"{field}['numpy_algorithm']", numpy_state)
    kind = BIT_GENERATORS.get(numpy_state.get("bit_generator"))
    if kind is None:
        _fail(path, f"{field}['numpy_algorithm']", f"names no known bit generator "
                                                  f"({shown(numpy_state.get('bit_generator'))})")
    _try(path, f"{field}['numpy_algorithm']", lambda: setattr(kind(), "state", numpy_state))
    _try(path, f"{field}['python']", lambda: random.Random().setstate(rng["python"]))
    _byte_tensor(path, f"{field}['torch']", rng["torch"])
    _try(path, f"{field}['torch']", lambda: torch.Generator().set_state(rng["torch"]))
    _byte_tensor(path, f"{field}['generator']", rng["generator"])
    device = generator_device(rng)
    if not _device_type(device):
        _fail(path, f"{field}['generator_device']", f"must be a device type such as 'cpu' or 'cuda', got "
                                                    f"{shown(device)}")
    try:
        throwaway = torch.Generator(device=device)
    except (RuntimeError, ValueError):  # no such device here: its state cannot be tried (resuming reseeds)
        throwaway = None
    if throwaway is not None:
        _try(path, f"{field}['generator']", lambda: throwaway.set_state(rng["generator"]))
    cuda = rng.get("cuda")
    if cuda is not None:
        if not isinstance(cuda, (list, tuple)):
            _fail(path, f"{field}['cuda']", f"must be a list of tensors or None, got {type(cuda).__name__}")
        for i, item in enumerate(cuda):
            _byte_tensor(path, f"{field}['cuda'][{i}]", item)


def _device_type(name: Any) -> bool:
    """Whether `name` is a device type torch knows (a type alone: 'cuda', not 'cuda:1' or 'gpu')."""
    try:
        return isinstance(name, str) and torch.device(name).type == name
    except (RuntimeError, ValueError):
        return False


def generator_device(rng: dict[str, Any]) -> Any:
    """The device type of the trainer's sampling generator whose state `rng['generator']` is: saved as
    `generator_device`; checkpoints written before it was saved had a CUDA generator's 16-byte (seed, offset)
    state on a GPU and a CPU generator's 5,056-byte one elsewhere."""
    if "generator_device" in rng:
        return rng["generator_device"]
    state = rng.get("generator")
    return "cuda" if isinstance(state, torch.Tensor) and state.numel() == CUDA_STATE_BYTES else "cpu"


def _check_reference(path: Path, state: dict[str, Any], iteration: int) -> None:
    if "reference_source" in state and state["reference_source"] not in REFERENCE_SOURCES:
        _fail(path, "reference_source", f"must be one of {', '.join(REFERENCE_SOURCES)}, got "
                                        f"{shown(state['reference_source'])}")
    if state.get("reference_source") == "stored" and not isinstance(state.get("reference"), dict):
        _fail(path, "reference", "must hold the reference's weights (reference_source is 'stored')")
    if state.get("ref_synced_at") is not None:
        synced = _count(path, "ref_synced_at", state["ref_synced_at"])
        if synced > iteration:
            _fail(path, "ref_synced_at", f"is {synced}, after the checkpoint's iteration {iteration}")


def _check_sharded(path: Path, state: dict[str, Any]) -> None:
    _mapping(path, SHARDED, state[SHARDED])
    world = _count(path, "sharded['world_size']", state[SHARDED].get("world_size"))
    ranks = state["rank_rng"]
    if not isinstance(ranks, (list, tuple)) or len(ranks) != world:
        _fail(path, "rank_rng", f"must be a list of {world} RNG states (one a rank), got {shown(ranks)}")
    for i, rng in enumerate(ranks):
        check_rng(path, f"rank_rng[{i}]", rng)


def _count(path: Path, field: str, value: Any) -> int:
    """`value` when it is a whole number >= 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _fail(path, field, f"must be a whole number >= 0, got {shown(value)}")
    return value


def _mapping(path: Path, field: str, value: Any) -> None:
    if not isinstance(value, dict):
        _fail(path, field, f"must be a dict, got {type(value).__name__}")


def _byte_tensor(path: Path, field: str, value: Any) -> None:
    if not isinstance(value, torch.Tensor) or value.dtype != torch.uint8 or value.dim() != 1:
        got = f"a {value.dtype} tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else \
            type(value).__name__
        _fail(path, field, f"must be a 1-d uint8 tensor (an RNG state), got {got}")


def _try(path: Path, field: str, apply) -> None:
    """Run `apply` (setting a state on a throwaway generator); its refusal is one line naming the field."""
    try:
        apply()
    except (ValueError, TypeError, RuntimeError, KeyError, OverflowError) as err:
        first = first_line(err)
        _fail(path, field, f"is not a valid RNG state ({first[:160]})")


def _fail(path: Path | Callable[[str], Path], field: str, problem: str) -> None:
    raise CorruptCheckpointError(f"{path(field) if callable(path) else path}: field {field} {problem}")
