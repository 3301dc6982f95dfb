"""The on-disk index: a folder written whole or not at all, with a manifest of sha256 sums checked on load.

    manifest.json     format, version, StoreConfig, embedder name and dimension, document count, sha256 of
                      every other file
    documents.jsonl   the (chunked) documents, row i = document i
    embeddings.npy    float32 [n, dim] unit vectors (dense stores only)
    bm25/             bm25s's own files
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lmgym.core.atomic_io import remove_tree
from lmgym.core.jsonl import read_json

FORMAT, VERSION = "rlgym-retrieval-index", 1
MANIFEST = "manifest.json"


class IndexNotFoundError(FileNotFoundError):
    """No index where one was expected; the message (one line) says how to build one."""


class IndexLoadError(ValueError):
    """An index folder is incomplete, corrupt or does not match what it is loaded with (one line)."""


def sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_index_folder(folder: str | Path, write: Callable[[Path], None], manifest: dict[str, Any]) -> Path:
    """`write(tmp)` fills a temporary sibling folder; the manifest (with the sha256 of each file written)
    goes in last and the folder is renamed into place, replacing an older index there."""
    folder = Path(folder).expanduser()
    if folder.is_symlink():  # replacing it would move the index away from the link's target; never written through
        raise IndexLoadError(f"{folder} is a symbolic link (to {os.readlink(folder)}); an index folder is "
                             f"never written through or replaced as a link: name the folder itself")
    if folder.exists() and not folder.is_dir():
        raise IndexLoadError(f"{folder} is a file; an index is saved as a folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MANIFEST).is_file():
        raise IndexLoadError(f"{folder} is a non-empty folder that holds no index; choose another path")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    remove_tree(tmp)  # a leftover; a link there is unlinked alone
    tmp.mkdir()
    write(tmp)
    files = {str(p.relative_to(tmp)): sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    (tmp / MANIFEST).write_text(json.dumps({"format": FORMAT, "version": VERSION, **manifest, "files": files},
                                           indent=1))
    if folder.exists():
        old = folder.with_name(f"{folder.name}.old{os.getpid()}")
        folder.rename(old)
        tmp.rename(folder)
        remove_tree(old)
    else:
        tmp.rename(folder)
    return folder


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of an index folder after checking that every file it lists is there, unchanged."""
    folder = Path(folder).expanduser()
    hint = "build one with examples/build_index.py or DocumentStore.save"
    if not folder.is_dir():
        raise IndexNotFoundError(f"no retrieval index at {folder} (not a folder); {hint}")
    path = folder / MANIFEST
    if not path.is_file():
        raise IndexNotFoundError(f"{folder} is not a retrieval index (no {MANIFEST}); {hint}")
    try:
        manifest = read_json(path)
    except ValueError:  # not JSON, not UTF-8, nested too deeply, a huge integer
        raise IndexLoadError(f"{path}: corrupt manifest (not JSON); rebuild the index") from None
    if (not isinstance(manifest, dict) or manifest.get("format") != FORMAT
            or not isinstance(manifest.get("files"), dict)):
        raise IndexLoadError(f"{path}: not a manifest of this toolkit's retrieval index; rebuild the index")
    if manifest.get("version") != VERSION:
        raise IndexLoadError(f"{path}: index format version {manifest.get('version')!r}, this code reads {VERSION}; "
                             "rebuild the index")
    for name, digest in manifest["files"].items():
        file = folder / name
        if not file.is_file():
            raise IndexLoadError(f"{folder}: index file {name} is missing; rebuild the index")
        if sha256(file) != digest:
            raise IndexLoadError(f"{file}: corrupt or changed since the index was saved (sha256 differs); "
                                 "rebuild the index")
    return manifest
