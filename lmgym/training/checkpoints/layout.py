"""A checkpoint's state in the Hugging Face Trainer's files, and back.

`Trainer.state_dict()` is one dict; a checkpoint folder splits it as the HF `Trainer` does:

- `model.safetensors`: the policy's weights (a LoRA policy's hold its adapters); `reference.safetensors`
  a stored KL reference; `<name>.safetensors` each module of `extra_state()` (PPO's `value_model`, the
  MCTS PRM): plain tensors, read by `safetensors.torch.load_file`;
- `optimizer.pt`, `scheduler.pt`, `rng_state.pth`: their state dicts, and `extra_state.pt` whatever else
  is not plain JSON (FSDP's per-rank RNG states, a PRM optimizer), all loadable with
  `torch.load(weights_only=True)`;
- `trainer_state.json`: the plain fields (iteration, guards, reference bookkeeping) and which file holds
  which entry ("layout"), so `read_state` puts the dict back together exactly; beside them the HF Trainer's
  own keys (`global_step`, `log_history`, `best_model_checkpoint`, ...: training/checkpoints/hf_state.py),
  written for readers of HF checkpoints and never read back.

Tensors that share memory (tied embeddings) are stored once; the other names are recorded in the
file's metadata (`aliases`) and point to the same tensor when read. Old checkpoints (one `state.pt`,
also loaded with `weights_only=True`) are still read: `read_state` takes either.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lmgym.core.jsonl import read_json
from lmgym.core.messages import first_line
from lmgym.training.checkpoints.folders import CorruptCheckpointError, load_state

STATE_JSON = "trainer_state.json"
LEGACY_STATE = "state.pt"  # the single-pickle layout of earlier versions (still read)
FORMAT = 2
WEIGHTS = {"policy": "model.safetensors", "reference": "reference.safetensors"}
TORCH_FILES = {"optimizer": "optimizer.pt", "scheduler": "scheduler.pt", "rng": "rng_state.pth"}
OTHERS = "extra_state.pt"  # the entries that are neither weights nor JSON
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\.(safetensors|pt|pth)$")
_PLAIN = (str, int, float, bool, type(None))


def state_files(state: dict[str, Any], hf: dict[str, Any] | None = None,
                model_only: bool = False) -> dict[str, Callable[[Path], None]]:
    """One writer per file of `state` (`writers[name](path)`), `trainer_state.json` among them, with the HF
    Trainer's keys `hf` beside ours. `model_only`: a `save_only_model` checkpoint (marked so; never resumed)."""
    rest, files, layout = dict(state), {}, {}
    for key, name in WEIGHTS.items():
        if _tensor_dict(rest.get(key)):
            files[name], layout[name] = _safetensors_writer(rest.pop(key)), [key]
    if isinstance(rest.get("extra"), dict):
        extra = dict(rest["extra"])
        for key in list(extra):
            name = f"{key}.safetensors"
            if _tensor_dict(extra[key]) and _FILE_NAME.match(name) and name not in files:
                files[name], layout[name] = _safetensors_writer(extra.pop(key)), ["extra", key]
        rest["extra"] = extra
    for key, name in TORCH_FILES.items():
        if isinstance(rest.get(key), dict):
            files[name], layout[name] = _torch_writer(rest.pop(key)), [key]
    others = {k: v for k, v in rest.items() if not _is_json(v)}
    if others:
        files[OTHERS], layout[OTHERS] = _torch_writer(others), []
    plain = {k: v for k, v in rest.items() if k not in others}
    own = {"format": FORMAT, "state": plain, "layout": layout, **({"model_only": True} if model_only else {})}
    text = json.dumps({**(hf or {}), **own}, indent=1)
    files[STATE_JSON] = lambda path: path.write_text(text, encoding="utf-8")
    return files


def is_state_folder(directory: Path) -> bool:
    """Whether `directory` holds a checkpoint's state in either layout."""
    return (directory / STATE_JSON).is_file() or (directory / LEGACY_STATE).is_file()


def is_model_only(directory: Path) -> bool:
    """Whether a checkpoint was written with `save_only_model` (its trainer_state.json says so)."""
    path = directory / STATE_JSON
    try:
        return path.is_file() and read_json(path).get("model_only") is True
    except (ValueError, OSError, AttributeError):
        return False  # unreadable: read_state reports it


def state_path(directory: Path) -> Path:
    """The file that names a checkpoint's state: trainer_state.json, or an old checkpoint's state.pt."""
    return directory / (LEGACY_STATE if not (directory / STATE_JSON).is_file()
                        and (directory / LEGACY_STATE).is_file() else STATE_JSON)


def locator(directory: Path) -> Callable[[str], Path]:
    """For a checkpoint whose state `read_state` read: the file holding a field (`rng['torch']` ->
    rng_state.pth), so that a bad field's message names the file to look at."""
    path = state_path(directory)
    if path.name == LEGACY_STATE:
        return lambda field: path
    files = {where[0]: directory / name for name, where in read_json(path)["layout"].items() if where}
    others = [directory / name for name, where in read_json(path)["layout"].items() if not where]

    def find(field: str) -> Path:
        top = re.match(r"\w*", field).group(0)
        if top in files:
            return files[top]
        return others[0] if others and top in load_state(others[0]) else path
    return find


def read_state(directory: Path) -> dict[str, Any]:
    """The dict `state_files` split (or an old state.pt's), nothing executed: safetensors and
    `weights_only` torch files only. Anything malformed is one CorruptCheckpointError line."""
    path = state_path(directory)
    if path.name == LEGACY_STATE:
        return load_state(path)
    try:
        saved = read_json(path)
        state, layout = dict(saved["state"]), saved["layout"]
        assert saved.get("format") == FORMAT and isinstance(layout, dict)
    except (ValueError, KeyError, TypeError, AssertionError, AttributeError, OSError):
        raise CorruptCheckpointError(f"{path}: unreadable (not a format-{FORMAT} trainer state)") from None
    for name, where in sorted(layout.items(), key=lambda item: len(item[1]) if isinstance(item[1], list) else 0):
        if not (isinstance(name, str) and _FILE_NAME.match(name) and isinstance(where, list) and len(where) <= 2
                and all(isinstance(k, str) for k in where)):
            raise CorruptCheckpointError(f"{path}: layout entry {str(name)[:80]!r} is malformed")
        value = load_tensors(directory / name) if name.endswith(".safetensors") else load_state(directory / name)
        _place(path, state, where, value)  # extra_state.pt first: a module's weights may go into its "extra"
    return state


def _place(path: Path, state: dict[str, Any], where: list[str], value: Any) -> None:
    if not where:
        state.update(value)
    elif len(where) == 1:
        state[where[0]] = value
    elif isinstance(state.get(where[0]), dict):
        state[where[0]][where[1]] = value
    else:
        raise CorruptCheckpointError(f"{path}: layout puts a file into {where[0]!r}, which is not a dict")


def save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """`safetensors.torch.save_file` of `tensors` (on the CPU): a tensor that is another name's (tied
    weights) is stored once and recorded as an alias; one that overlaps another otherwise is copied."""
    from safetensors.torch import save_file

    out, aliases, seen, storages = {}, {}, {}, set()
    for name, tensor in tensors.items():
        tensor = tensor.detach()
        storage = (tensor.device, tensor.untyped_storage().data_ptr())
        view = (*storage, tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype)
        if tensor.numel() and view in seen:
            aliases[name] = seen[view]
            continue
        seen[view] = name
        shared = tensor.numel() and storage in storages
        storages.add(storage)
        tensor = tensor.to("cpu")
        out[name] = tensor.clone() if shared else tensor.contiguous()
    save_file(out, str(path), metadata={"format": "pt", "aliases": json.dumps(aliases)})


def load_tensors(path: Path) -> dict[str, torch.Tensor]:
    """`safetensors.torch.load_file(path)` with the aliases put back; a damaged file is one line."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    if not path.is_file():
        raise CorruptCheckpointError(f"{path}: missing")
    try:
        tensors = load_file(str(path))
        with safe_open(str(path), framework="pt") as handle:
            aliases = json.loads((handle.metadata() or {}).get("aliases", "{}"))
    except Exception as err:  # safetensors raises its own SafetensorError (and OSError, ValueError, ...)
        raise CorruptCheckpointError(f"{path}: truncated or corrupt ({first_line(err)[:200]})") from None
    if not isinstance(aliases, dict) or any(not isinstance(k, str) or v not in tensors for k, v in aliases.items()):
        raise CorruptCheckpointError(f"{path}: its aliases name tensors it does not hold")
    return {**tensors, **{name: tensors[target] for name, target in aliases.items()}}


def _safetensors_writer(tensors: dict[str, torch.Tensor]) -> Callable[[Path], None]:
    return lambda path: save_tensors(tensors, path)


def _torch_writer(value: Any) -> Callable[[Path], None]:
    return lambda path: torch.save(value, path)


def _tensor_dict(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())


def _is_json(value: Any) -> bool:
    """Whether `value` survives a JSON round trip exactly (plain scalars, and lists and str-keyed dicts of them;
    a tuple, which would come back a list, does not)."""
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False
