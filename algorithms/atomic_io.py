"""Crash-safe file operations: fsync helpers, atomic replace, and a removal that never leaves a
half-deleted folder under its real name."""
from __future__ import annotations

import os
from pathlib import Path

from algorithms.faults import crash_point

TRASH_PREFIX = ".trash-"


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a file's data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a folder's entries (creations, renames, deletions) to disk."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # platforms without directory fds
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: str | os.PathLike, text: str, crash_name: str = "atomic_write") -> None:
    """Replace `path` with `text` so that a kill at any moment leaves either the old or the new content."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    crash_point(f"{crash_name}.before_replace")
    os.replace(tmp, path)
    fsync_dir(path.parent)
    crash_point(f"{crash_name}.after_replace")


def remove_tree(path: str | os.PathLike) -> None:
    """Delete a folder: first renamed to `.trash-<name>` (atomic), then emptied file by file.

    A kill in the middle leaves only a `.trash-` folder, which `purge_trash` removes later; the
    folder's real name never points at a half-deleted copy.
    """
    path = Path(path)
    if not path.exists():
        return
    trash = path
    if not path.name.startswith(TRASH_PREFIX):
        trash = path.with_name(TRASH_PREFIX + path.name)
        if trash.exists():
            remove_tree(trash)
        os.rename(path, trash)
        fsync_dir(path.parent)
        crash_point("remove.renamed")
    if trash.is_dir():
        for child in sorted(trash.rglob("*"), reverse=True):  # children before their folders
            if child.is_dir() and not child.is_symlink():
                child.rmdir()
            else:
                child.unlink()
            crash_point("remove.file")
        trash.rmdir()
    else:
        trash.unlink()
    fsync_dir(trash.parent)


def purge_trash(folder: str | os.PathLike) -> None:
    """Finish deletions a kill interrupted (every `.trash-*` entry in `folder`)."""
    folder = Path(folder)
    if folder.is_dir():
        for entry in sorted(folder.glob(TRASH_PREFIX + "*")):
            remove_tree(entry)


def move_aside(path: Path, target: Path) -> None:
    """Rename `path` to `target` (same file system), durably."""
    os.rename(path, target)
    fsync_dir(path.parent)
