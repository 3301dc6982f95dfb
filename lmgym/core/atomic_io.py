"""Crash-safe file operations: fsync helpers, atomic replace, and a removal that never leaves a
half-deleted folder under its real name."""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
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
    _write_synced(path, text, "w")


def append_synced(path: str | os.PathLike, text: str) -> None:
    """Append `text` to `path` (created if missing) and flush it to disk; a kill inside the write may leave
    only the start of `text` (readers of append-only files skip a line cut short)."""
    _write_synced(path, text, "a")


def _write_synced(path: str | os.PathLike, text: str, mode: str) -> None:
    """Open `path` in `mode` ("w" or "a"), write `text` and flush it to disk."""
    with open(path, mode) as fh:
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


def process_umask() -> int:
    """This process's umask, read without changing it where the system says it (Linux's /proc), else set and
    put back at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def give_usual_modes(folder: str | os.PathLike) -> None:
    """Set every regular file under `folder` to the mode a plain `open(path, "w")` gives (0666 less the umask:
    0644 with the usual 022). Some writers create their files 0600 (safetensors' `save_file` writes through a
    private temporary file); a checkpoint's files should all read alike. Links are never followed."""
    mode = 0o666 & ~process_umask()
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if stat.S_ISREG(os.lstat(path).st_mode) and stat.S_IMODE(os.lstat(path).st_mode) != mode:
                os.chmod(path, mode)


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
    folder are unlinked, never descended, so nothing outside the folder is touched -- even when a
    folder is swapped for a link while the removal runs (see `_delete_folder`).
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
    _delete_folder(trash)
    fsync_dir(trash.parent)


_FOLDER_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


@dataclass
class _OpenFolder:
    """One level of `_delete_folder`'s walk: an open folder, its name in the level above, and the
    subfolders it listed that are still to be deleted."""

    fd: int
    name: str
    subfolders: list[str]


def _delete_folder(folder: Path) -> None:
    """Delete `folder` and everything in it, walking by file descriptor, without recursion.

    Each folder is opened relative to its parent's descriptor with O_NOFOLLOW, and every unlink and rmdir
    is relative to an open folder, never through a path: a folder swapped for a link (or a file) between
    being listed and being entered fails to open and is unlinked alone. One descriptor is open per level.
    Not `shutil.rmtree` (fd-based on Linux too): in Python 3.11 it recurses (a depth limit), stops with an
    error at a swapped link instead of unlinking it, and the kill tests' crash points would have to name
    its private helpers. Entries go in name order.
    """
    parent_fd = os.open(folder.parent, os.O_RDONLY | os.O_DIRECTORY)
    levels = [_OpenFolder(parent_fd, "", [folder.name])]
    try:
        while levels:
            level = levels[-1]
            if not level.subfolders:  # emptied: close it and remove it from the level above
                levels.pop()
                os.close(level.fd)
                if levels:
                    os.rmdir(level.name, dir_fd=levels[-1].fd)
                continue
            name = level.subfolders.pop()
            try:
                fd = os.open(name, _FOLDER_NOFOLLOW, dir_fd=level.fd)
            except FileNotFoundError:
                continue
            except OSError as err:  # ELOOP: now a link; ENOTDIR: now a file -- the entry alone goes
                if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                os.unlink(name, dir_fd=level.fd)
                continue
            levels.append(_OpenFolder(fd, name, []))
            with os.scandir(fd) as listed:
                entries = sorted(listed, key=lambda e: e.name)
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    levels[-1].subfolders.insert(0, entry.name)  # popped from the end: name order
                else:
                    os.unlink(entry.name, dir_fd=fd)
    finally:
        for level in levels:
            os.close(level.fd)


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
