"""lmgym.core.atomic_io.atomic_write_text when two processes write one path: each replaces it whole, neither fails
(verifier_loop's label processes can both write one level's held-out labels)."""
from __future__ import annotations

from lmgym.core import atomic_io


def test_two_writers_of_one_path_each_replace_it_whole(tmp_path, monkeypatch):
    path = tmp_path / "test_L4.jsonl"
    write_synced, pids = atomic_io.write_synced, iter([101, 202])
    monkeypatch.setattr(atomic_io.os, "getpid", lambda: next(pids))

    def interleaved(tmp, text):
        # writer A's temporary file is written; before A renames it, writer B writes and renames its own
        write_synced(tmp, text)
        if text == "A\n":
            atomic_io.atomic_write_text(path, "B\n")
            assert path.read_text() == "B\n"

    monkeypatch.setattr(atomic_io, "write_synced", interleaved)
    atomic_io.atomic_write_text(path, "A\n")  # one shared temporary name: A's rename would find it gone
    assert path.read_text() == "A\n"  # the last rename wins, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_L4.jsonl"]  # no temporary file left
