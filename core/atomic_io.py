"""Crash-safe file operations: fsync helpers, atomic replace, and a removal that never leaves a
half-deleted folder under its real name."""
from __future__ import annotations

import os
import stat
from pathlib import Path

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


def write_synced(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` (created or truncated) and flush it to disk."""
    with open(path, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def append_synced(path: str | os.PathLike, text: str) -> None:
    """Append `text` to `path` (created if missing) and flush it to disk; a kill inside the write may leave
    only the start of `text` (readers of append-only files skip a line cut short)."""
    with open(path, "a") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def replace_durably(source: str | os.PathLike, path: str | os.PathLike) -> None:
    """Rename `source` over `path` (atomic on one file system) and flush the folder's entries to disk."""
    os.replace(source, path)
    fsync_dir(Path(path).parent)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Replace `path` with `text` so that a kill at any moment leaves either the old or the new content. The
    temporary file is named by the process, so two processes writing one path each replace it whole."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    write_synced(tmp, text)
    replace_durably(tmp, path)


class SymlinkRefusedError(ValueError):
    """A path the run would write into or replace is a symbolic link; the one-line message names it."""


def refuse_symlink(path: str | os.PathLike, what: str) -> None:
    """Raise SymlinkRefusedError when `path` is a symlink (to a folder, a file, nowhere or itself).

    Replacing a link would silently move the output away from where it points, and writing or deleting
    through it would touch a folder this run did not create: both are refused, before anything is written.
    """
    if os.path.islink(path):
        raise SymlinkRefusedError(f"{path}: {what} is a symbolic link (to {os.readlink(path)}); it is never "
                                  f"written through or replaced: remove the link or choose another path")


def remove_tree(path: str | os.PathLike) -> None:
    """Delete a folder: first renamed to `.trash-<name>` (atomic), then emptied file by file.

    A kill in the middle leaves only a `.trash-` folder, which `purge_trash` removes later; the
    folder's real name never points at a half-deleted copy. Symlinks are never followed: a `path`
    that is a link (to a folder, a file, nowhere, itself) is unlinked alone, and links inside the
    folder are unlinked, never descended, so nothing outside the folder is touched.
    """
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):  # a file or a link: the entry itself goes, never what a link points at
        os.unlink(path)
        fsync_dir(path.parent)
        return
    trash = path
    if not path.name.startswith(TRASH_PREFIX):
        trash = path.with_name(TRASH_PREFIX + path.name)
        remove_tree(trash)
        move_aside(path, trash)
    _empty(trash)
    trash.rmdir()
    fsync_dir(trash.parent)


def _empty(folder: Path) -> None:
    """Unlink every file and link under `folder`, then remove its subfolders, deepest first. Walks with
    `lstat` semantics (a link to a folder is an entry to unlink) and without recursion (any depth)."""
    folders, pending = [], [str(folder)]
    while pending:
        current = pending.pop()
        folders.append(current)
        with os.scandir(current) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    os.unlink(entry.path)
    for current in reversed(folders[1:]):  # every folder after its subfolders
        os.rmdir(current)


def purge_trash(folder: str | os.PathLike) -> None:
    """Finish deletions a kill interrupted (every `.trash-*` entry in `folder`)."""
    folder = Path(folder)
    if folder.is_dir():
        for entry in sorted(folder.glob(TRASH_PREFIX + "*")):  # a `.trash-*` link: the link alone goes
            remove_tree(entry)


def move_aside(path: Path, target: Path) -> None:
    """Rename `path` to `target` (same file system), durably; a link is renamed itself, never followed."""
    os.rename(path, target)
    fsync_dir(path.parent)
