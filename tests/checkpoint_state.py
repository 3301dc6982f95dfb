"""Tests' access to a checkpoint's trainer state, whichever files hold it (training/checkpoints/layout.py)."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lmgym.training.checkpoints import folders as ckpt
from lmgym.training.checkpoints import layout


def read(folder: Path) -> dict[str, Any]:
    """The state `Trainer.state_dict()` saved in `folder`, put back together."""
    return layout.read_state(Path(folder))


def write(folder: Path, state: dict[str, Any]) -> None:
    """Replace the state files of `folder` by those of `state`, the manifest updated to match (as a hand
    edit that also fixes the manifest would): only the checks of the state's fields can catch it."""
    folder = Path(folder)
    old = json.loads((folder / layout.STATE_JSON).read_text())["layout"]
    for name in old:
        (folder / name).unlink()
    manifest = json.loads((folder / ckpt.MANIFEST).read_text())
    for name in old:
        manifest["files"].pop(name, None)
    for name, writer in layout.state_files(state).items():
        writer(folder / name)
        manifest["files"][name] = ckpt.file_entry(folder / name)
    (folder / ckpt.MANIFEST).write_text(json.dumps(manifest))


def rewrite(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """`write` the state of `folder` edited by `change(state)`."""
    state = read(folder)
    change(state)
    write(folder, state)


PRETRAINED_FILES = ("config.json", "generation_config.json", "adapter_config.json", "adapter_model.safetensors",
                    "tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "system_prompt.txt")


def write_legacy(folder: Path, state: dict[str, Any]) -> None:
    """Turn checkpoint `folder` into what earlier versions wrote: the whole state in one `state.pt` (plus the
    trainer's other files), its manifest updated to match when it has one."""
    folder = Path(folder)
    old = [*json.loads((folder / layout.STATE_JSON).read_text())["layout"]]
    old += [name for name in PRETRAINED_FILES if (folder / name).is_file()]  # not written by earlier versions
    for name in [*old, layout.STATE_JSON]:
        (folder / name).unlink()
    torch.save(state, folder / layout.LEGACY_STATE)
    if (folder / ckpt.MANIFEST).is_file():
        manifest = json.loads((folder / ckpt.MANIFEST).read_text())
        manifest["files"] = {k: v for k, v in manifest["files"].items() if k not in old and k != layout.STATE_JSON}
        manifest["files"][layout.LEGACY_STATE] = ckpt.file_entry(folder / layout.LEGACY_STATE)
        (folder / ckpt.MANIFEST).write_text(json.dumps(manifest))


def entries(run: Path) -> list[str]:
    """The checkpoint entries of a run folder, sorted: `checkpoint-N`, and staged (`.tmp-`), half-removed
    (`.trash-`) or set-aside (`corrupt-`) ones."""
    import re

    shape = re.compile(r"^(\.tmp-|\.trash-|corrupt\d*-)?checkpoint-\d+$")
    return sorted(p.name for p in Path(run).iterdir() if shape.match(p.name))
