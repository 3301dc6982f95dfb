"""Checkpoint folders that survive a kill at any moment.

Layout: `<run>/checkpoint-12/` (the Hugging Face Trainer's name: `output_dir/checkpoint-<global step>`, the
step being the iteration) holds the trainer's state in the HF Trainer's files
(`model.safetensors`, `optimizer.pt`, `scheduler.pt`, `rng_state.pth`, `trainer_state.json`:
training/checkpoints/layout.py; torch files hold tensors and plain data only, loaded with
`weights_only=True`), `buffer.jsonl` and `MANIFEST.json` (written last: every file's size and sha256).
Earlier versions wrote `<run>/checkpoints/iter-000012/` (still resumed from, and pruned like the new ones), and
before that one `state.pt`; such checkpoints are still read.
A checkpoint is written in a temporary folder (`.tmp-checkpoint-12`), flushed to disk and renamed into place, so
a folder named `checkpoint-*` is always complete; older ones are removed only afterwards, keeping the newest
`keep`. Resuming takes the newest checkpoint that verifies; the old single `<run>/checkpoint/`
layout is still read.

Symlinks are never followed when removing or renaming: a checkpoint of this run is a real folder, so a
link named `checkpoint-*` or `iter-*` (or `.tmp-*`, `.trash-*`, `checkpoint`) is not one; it is never resumed from, and
when the run removes or replaces that name, the link alone is unlinked and its target left as it was.
A symlinked `checkpoints/` folder (the old layout's) is refused (`refuse_symlink`): old checkpoints would be pruned
from a folder this run did not create.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lmgym.core.atomic_io import (
    fsync_dir,
    fsync_file,
    give_usual_modes,
    move_aside,
    purge_trash,
    refuse_symlink,
    remove_tree,
    write_synced,
)
from lmgym.core.jsonl import read_json

CHECKPOINTS = "checkpoints"  # the folder of the previous layout's `iter-N` checkpoints (still read)
LEGACY = "checkpoint"
MANIFEST = "MANIFEST.json"
FORMAT = 1
PREFIX = "checkpoint-"
_NAME = re.compile(r"^checkpoint-(\d+)$")
_OLD_NAME = re.compile(r"^iter-(\d+)$")


class CheckpointError(ValueError):
    """A checkpoint cannot be used; the message (one line) names the file and the reason."""


class CorruptCheckpointError(CheckpointError):
    """Incomplete, truncated or altered checkpoint: resuming skips it and tries an older one."""


class UnsafeCheckpointError(CheckpointError):
    """The file holds objects that could run code when unpickled: it is never loaded."""


@dataclass
class Checkpoint:
    path: Path
    iteration: int | None  # None: the old `checkpoint/` layout (the iteration is inside state.pt)


def checkpoint_name(iteration: int) -> str:
    """`checkpoint-<iteration>`, as the Hugging Face Trainer names a checkpoint of that global step."""
    return f"{PREFIX}{iteration}"


def iteration_of(directory: str | os.PathLike) -> int | None:
    """N for a folder named `checkpoint-N` (or the previous layout's `iter-N`), None for any other name (the
    oldest layout, a copied folder)."""
    found = _NAME.match(Path(directory).name) or _OLD_NAME.match(Path(directory).name)
    return int(found.group(1)) if found else None


def is_checkpoint_name(name: str) -> bool:
    """Whether `name` is a checkpoint folder's name, in this layout or the previous one."""
    return bool(_NAME.match(name) or _OLD_NAME.match(name))


def has_checkpoints(run_dir: str | os.PathLike) -> bool:
    """Whether `run_dir` holds checkpoint entries of any layout (`checkpoint-N`, `checkpoints/`, `checkpoint/`),
    complete or not: what a staged pipeline asks before it resumes a stage rather than starting it."""
    run_dir = Path(run_dir)
    return run_dir.is_dir() and (any(_NAME.match(p.name) for p in run_dir.iterdir())
                                 or os.path.lexists(run_dir / CHECKPOINTS) or os.path.lexists(run_dir / LEGACY))


def is_archived_name(name: str) -> bool:
    """Whether a run folder's entry is one a fresh start moves aside: a checkpoint (`checkpoint-N`), one set aside
    as corrupt (`corrupt-checkpoint-N`) or a staged one (`.tmp-checkpoint-N`)."""
    return bool(re.match(r"^(corrupt\d*-|\.tmp-)?checkpoint-\d+$", name))


def _roots(run_dir: Path) -> list[tuple[Path, re.Pattern]]:
    """Where checkpoints are, with their names: the run folder (`checkpoint-N`), and the previous layout's
    `checkpoints/` (`iter-N`) unless it is a link (never read through)."""
    old = run_dir / CHECKPOINTS
    return [(run_dir, _NAME)] + ([(old, _OLD_NAME)] if old.is_dir() and not old.is_symlink() else [])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_checkpoint(run_dir: str | os.PathLike, iteration: int, writers: dict[str, Callable[[Path], None]],
                     keep: int) -> Path:
    """Write `<run>/checkpoint-<iteration>` with one file per writer (`writers[name](path)`),
    then keep only the newest `keep` complete checkpoints. Returns the new folder."""
    tmp = staging_folder(run_dir, iteration)
    return seal(run_dir, tmp, iteration, write_files(tmp, writers), keep)


def staging_folder(run_dir: str | os.PathLike, iteration: int) -> Path:
    """A fresh, empty `<run>/.tmp-checkpoint-<iteration>` for a checkpoint being written."""
    root = Path(run_dir)
    refuse_symlink(root / CHECKPOINTS, "the checkpoints folder")  # the previous layout's: pruned into
    root.mkdir(parents=True, exist_ok=True)
    purge_trash(root)
    tmp = root / f".tmp-{checkpoint_name(iteration)}"
    remove_tree(tmp)  # a leftover (a link, even a dangling one, is unlinked alone)
    tmp.mkdir()
    return tmp


def write_files(tmp: Path, writers: dict[str, Callable[[Path], None]]) -> dict[str, dict]:
    """Each `writers[name](tmp / name)`, flushed to disk; returns their manifest entries."""
    files = {}
    for name, write in writers.items():
        write(tmp / name)
        fsync_file(tmp / name)
        files[name] = file_entry(tmp / name)
    return files


def file_entry(path: Path) -> dict:
    """A file's manifest entry: its size and sha256."""
    return {"bytes": path.stat().st_size, "sha256": _sha256(path)}


def seal(run_dir: str | os.PathLike, tmp: Path, iteration: int, files: dict[str, dict], keep: int) -> Path:
    """Write the manifest of `files` (names relative to `tmp`) last, rename `tmp` to `checkpoint-<iteration>`,
    and keep the newest `keep` complete checkpoints. Returns the new folder."""
    final = Path(run_dir) / checkpoint_name(iteration)
    give_usual_modes(tmp)  # model.safetensors comes 0600 from safetensors; every file 0644 under umask 022
    write_manifest(tmp, {"format": FORMAT, "iteration": iteration, "files": files})
    move_into_place(tmp, final)
    prune(Path(run_dir), final, iteration, keep)
    return final


def write_manifest(tmp: Path, manifest: dict) -> None:
    """`tmp/MANIFEST.json`, flushed to disk with the folder's entries: the checkpoint is complete."""
    write_synced(tmp / MANIFEST, json.dumps(manifest, indent=1))
    fsync_dir(tmp)


def move_into_place(tmp: Path, final: Path) -> None:
    """Rename the complete folder `tmp` to `final`, durably, replacing what is there (an earlier copy of
    this iteration that failed to verify at resume, or a link, which is unlinked alone)."""
    remove_tree(final)
    os.rename(tmp, final)
    fsync_dir(final.parent)


def prune(run_dir: Path, newest: Path, iteration: int, keep: int) -> None:
    """Remove leftovers and all but the newest `keep` complete checkpoints (never `newest`), in this layout
    and the previous one (`checkpoints/iter-N`)."""
    older = [c for c in complete_checkpoints(run_dir) if c.iteration is not None and c.path != newest
             and c.iteration <= iteration]
    doomed = [c.path for c in older[keep - 1:]]  # complete_checkpoints is newest first
    for root, name in _roots(run_dir):
        staged = f".tmp-{PREFIX}" if root == run_dir else ".tmp-"
        doomed += [p for p in root.iterdir() if p.name.startswith(staged)]
        doomed += [p for p in root.iterdir()  # incomplete, or a link (not this run's): the link alone goes
                   if name.match(p.name) and not _is_complete(p)]
    legacy = run_dir / LEGACY
    if (legacy.is_symlink() or legacy.is_dir()) and len(older) + 1 >= keep:
        doomed.append(legacy)
    for path in doomed:
        if path != newest:
            remove_tree(path)


def complete_checkpoints(run_dir: str | os.PathLike) -> list[Checkpoint]:
    """Checkpoints that have a manifest (`checkpoint-N`, and the previous layout's `checkpoints/iter-N`), newest
    first, this layout's first of one iteration (contents not yet verified)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = [(Checkpoint(p, int(m.group(1))), root == run_dir) for root, name in _roots(run_dir)
             for p in root.iterdir() if (m := name.match(p.name)) and _is_complete(p)]
    return [c for c, _ in sorted(found, key=lambda item: (item[0].iteration, item[1]), reverse=True)]


def _is_complete(path: Path) -> bool:
    """A real folder (not a link) with a manifest: what this run's `seal` leaves."""
    return not path.is_symlink() and path.is_dir() and (path / MANIFEST).is_file()


def unsealed_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Entries named `checkpoint-*` (or `checkpoints/iter-*`) that resuming passes over, newest first: a folder
    without a manifest (never sealed, or damaged since: `seal` renames only complete folders) or a link. The next
    save removes them."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = [p for root, name in _roots(run_dir) for p in root.iterdir() if name.match(p.name) and not _is_complete(p)]
    return sorted(found, key=iteration_of, reverse=True)


def resume_candidates(run_dir: str | os.PathLike) -> list[Checkpoint]:
    """Where resuming looks, best first: complete new-layout checkpoints, then the old `checkpoint/`."""
    run_dir = Path(run_dir)
    found = complete_checkpoints(run_dir)
    if not (run_dir / LEGACY).is_symlink() and (run_dir / LEGACY / "state.pt").is_file():
        found.append(Checkpoint(run_dir / LEGACY, None))
    return found


def verify(directory: str | os.PathLike) -> None:
    """Check every file of a checkpoint against its manifest (old-layout folders have none: no-op)."""
    directory = Path(directory)
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        if is_checkpoint_name(directory.name):
            raise CorruptCheckpointError(f"{directory}: incomplete checkpoint (no {MANIFEST})")
        return
    try:
        manifest = read_json(manifest_path)  # too deep, not UTF-8, huge numbers: all ValueError
        files = manifest["files"]
        assert isinstance(files, dict) and ("trainer_state.json" in files or "state.pt" in files)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise CorruptCheckpointError(f"{manifest_path}: unreadable manifest") from None
    for name, expected in files.items():
        path = directory / name
        if not path.is_file():
            raise CorruptCheckpointError(f"{path}: missing (listed in {MANIFEST})")
        size = path.stat().st_size
        if size != expected.get("bytes"):
            raise CorruptCheckpointError(f"{path}: {size} bytes, the manifest says {expected.get('bytes')} "
                                         f"(truncated or altered)")
        if _sha256(path) != expected.get("sha256"):
            raise CorruptCheckpointError(f"{path}: sha256 differs from the manifest (altered or corrupt)")


def load_state(path: str | os.PathLike) -> dict[str, Any]:
    """`torch.load(path, weights_only=True)` with one-line errors: a file that would need arbitrary
    unpickling (code execution) is refused, a truncated or corrupt one is reported as such."""
    path = Path(path)
    if not path.is_file():
        raise CorruptCheckpointError(f"{path}: missing")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        if "Weights only load failed" not in text:
            raise CorruptCheckpointError(f"{path}: truncated or corrupt ({_first_line(text)})") from None
        found = re.search(r"GLOBAL ([\w.]+)", text) or re.search(r"(Unsupported operand \w+)", text)
        detail = (f"it calls GLOBAL {found.group(1)}" if found and found.re.pattern.startswith("GLOBAL") else
                  found.group(1) if found else "not loadable with weights_only=True")
        raise UnsafeCheckpointError(
            f"{path}: refused: it holds more than tensors and plain data ({detail}), which could run code "
            f"when loaded; only plain-data checkpoints are loaded") from None
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        raise CorruptCheckpointError(f"{path}: truncated or corrupt ({_first_line(str(err))})") from None
    if not isinstance(state, dict):
        raise CorruptCheckpointError(f"{path}: not a checkpoint (holds a {type(state).__name__}, not a dict)")
    return state


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:200]


def set_aside_corrupt(checkpoint: Checkpoint) -> Path:
    """Rename a checkpoint that failed to verify to `corrupt-<name>` (kept for inspection, never resumed)."""
    path = checkpoint.path
    target = path.with_name(f"corrupt-{path.name}")
    n = 1
    while os.path.lexists(target):
        n += 1
        target = path.with_name(f"corrupt{n}-{path.name}")
    move_aside(path, target)
    return target

