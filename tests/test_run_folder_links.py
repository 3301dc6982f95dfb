"""A run folder deletes only its own files: symlinks are unlinked or refused, never followed.

Each test plants links in a run folder that point at an `outside` folder (or file) holding files the
run never made, runs the real code path, and checks that every outside file is still there, unchanged.
"""
import os
from pathlib import Path

import pytest

from lmgym.core.atomic_io import SymlinkRefusedError, purge_trash, remove_tree
from lmgym.training.checkpoints import folders as ckpt
from lmgym.training.checkpoints.trainer_state import write_model_folder
from lmgym.training.cli import run_with_clear_errors
from tests import checkpoint_state
from tests.test_checkpoints import save_at, tiny_algo


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside the run with a file and a subfolder."""
    folder = tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    (folder / "keep.txt").write_text("not the run's")
    (folder / "sub" / "deep.txt").write_text("nor this")
    return folder


def contents(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


EXPECTED = {"keep.txt": "not the run's", os.path.join("sub", "deep.txt"): "nor this"}


# ---------------------------------------------------------------- remove_tree itself


def test_a_symlinked_folder_is_unlinked_and_its_target_kept(tmp_path, outside):
    link = tmp_path / "model"
    link.symlink_to(outside, target_is_directory=True)
    remove_tree(link)
    assert not os.path.lexists(link) and not (tmp_path / ".trash-model").exists()
    assert contents(outside) == EXPECTED


def test_links_inside_a_removed_folder_are_unlinked_never_descended(tmp_path, outside):
    doomed = tmp_path / "iter-000001"
    (doomed / "nested").mkdir(parents=True)
    (doomed / "state.pt").write_text("x")
    (doomed / "to_folder").symlink_to(outside, target_is_directory=True)
    (doomed / "nested" / "to_file").symlink_to(outside / "keep.txt")
    (doomed / "dangling").symlink_to(tmp_path / "nowhere")
    (doomed / "loop").symlink_to(doomed / "loop")
    remove_tree(doomed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside"]
    assert contents(outside) == EXPECTED


class ListedBeforeTheSwap:
    """What `os.scandir` returns in the swap test: the entries read in full before a folder is swapped."""

    def __init__(self, entries: list[os.DirEntry]) -> None:
        self.entries = entries

    def __enter__(self) -> "ListedBeforeTheSwap":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __iter__(self):
        return iter(self.entries)


def doomed_folder(tmp_path: Path) -> Path:
    """A folder to remove, holding a file and a subfolder `victim` with a file of its own."""
    doomed = tmp_path / "iter-000001"
    (doomed / "victim").mkdir(parents=True)
    (doomed / "state.pt").write_text("x")
    (doomed / "victim" / "own.txt").write_text("the run's")
    return doomed


def swap_for_link(folder: Path, moved_to: Path, outside: Path) -> None:
    """Move `folder` out of the tree and put a link to `outside` under its name."""
    os.rename(folder, moved_to)
    folder.symlink_to(outside, target_is_directory=True)


def test_a_subfolder_swapped_for_a_link_between_listing_and_entering_is_unlinked_alone(tmp_path, outside,
                                                                                         monkeypatch):
    doomed = doomed_folder(tmp_path)
    victim = tmp_path / ".trash-iter-000001" / "victim"  # where `victim` is while its folder is emptied
    real_scandir = os.scandir

    def listed_then_swapped(folder):
        with real_scandir(folder) as listed:
            entries = list(listed)
        if "victim" in [entry.name for entry in entries] and not victim.is_symlink():
            swap_for_link(victim, tmp_path / "moved", outside)  # the listing still says: a folder
        return ListedBeforeTheSwap(entries)

    monkeypatch.setattr(os, "scandir", listed_then_swapped)
    remove_tree(doomed)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["moved", "outside"]
    assert contents(outside) == EXPECTED
    assert contents(tmp_path / "moved") == {"own.txt": "the run's"}  # moved out before it was entered


def test_a_folder_swapped_for_a_link_after_its_trash_rename_is_unlinked_alone(tmp_path, outside, monkeypatch):
    from lmgym.core import atomic_io

    doomed = doomed_folder(tmp_path)
    real_move_aside = atomic_io.move_aside

    def moved_then_swapped(path: Path, target: Path) -> None:
        real_move_aside(path, target)
        swap_for_link(target, tmp_path / "moved", outside)

    monkeypatch.setattr(atomic_io, "move_aside", moved_then_swapped)
    remove_tree(doomed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["moved", "outside"]
    assert contents(outside) == EXPECTED
    assert contents(tmp_path / "moved") == {"state.pt": "x", os.path.join("victim", "own.txt"): "the run's"}


@pytest.mark.parametrize("kind", ["folder", "file", "dangling", "loop"])
def test_a_trash_link_is_purged_alone(tmp_path, outside, kind):
    link = tmp_path / ".trash-iter-000001"
    target = {"folder": outside, "file": outside / "keep.txt", "dangling": tmp_path / "nowhere", "loop": link}[kind]
    link.symlink_to(target)
    purge_trash(tmp_path)
    assert not os.path.lexists(link)
    assert contents(outside) == EXPECTED


# ---------------------------------------------------------------- checkpoints


def test_planted_checkpoint_links_are_unlinked_and_a_linked_checkpoint_is_never_resumed(tmp_path, outside, capsys):
    algo = tiny_algo(tmp_path, keep_checkpoints=2)
    run = tmp_path / "run"
    save_at(algo, 1)
    root = run
    real = save_at(algo, 2)
    (real / "extra").symlink_to(outside, target_is_directory=True)  # a link inside a checkpoint pruned later
    (root / ".trash-checkpoint-0").symlink_to(outside, target_is_directory=True)
    (root / ".tmp-checkpoint-3").symlink_to(outside, target_is_directory=True)  # where iteration 3 is staged
    (root / "checkpoint-7").symlink_to(outside, target_is_directory=True)  # no manifest there
    (root / "checkpoint-3").symlink_to(outside / "keep.txt")  # the name iteration 3 is sealed under
    (root / ".tmp-checkpoint-5").symlink_to(tmp_path / "nowhere")  # dangling
    save_at(algo, 3)
    assert checkpoint_state.entries(root) == ["checkpoint-2", "checkpoint-3"]
    assert not (root / "checkpoint-3").is_symlink()
    save_at(algo, 4)  # prunes checkpoint-2, with its link inside
    assert checkpoint_state.entries(root) == ["checkpoint-3", "checkpoint-4"]
    assert contents(outside) == EXPECTED

    elsewhere = tmp_path / "elsewhere"  # a complete checkpoint outside, linked in under a newer name
    os.rename(root / "checkpoint-4", elsewhere)
    (root / "checkpoint-9").symlink_to(elsewhere, target_is_directory=True)
    assert [c.iteration for c in ckpt.resume_candidates(run)] == [3]
    fresh = tiny_algo(tmp_path, keep_checkpoints=2)
    assert fresh.resume_from(run) == root / "checkpoint-3"
    save_at(fresh, 4)
    assert not os.path.lexists(root / "checkpoint-9")
    assert (elsewhere / "MANIFEST.json").is_file() and (elsewhere / "trainer_state.json").is_file()


def test_a_symlinked_checkpoints_folder_is_refused_in_one_line(tmp_path, outside):
    algo = tiny_algo(tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoints").symlink_to(outside, target_is_directory=True)
    with pytest.raises(SymlinkRefusedError) as info:
        save_at(algo, 1)
    assert str(tmp_path / "run" / "checkpoints") in str(info.value) and "\n" not in str(info.value)
    assert contents(outside) == EXPECTED


# ---------------------------------------------------------------- a whole run and the model folder


@pytest.mark.parametrize("name", ["model", "checkpoints", "metrics.jsonl"])
def test_a_run_with_a_symlinked_entry_stops_before_training_in_one_line(tmp_path, outside, capsys, name):
    run = tmp_path / "run"
    run.mkdir()
    target = outside / "keep.txt" if name.endswith(".jsonl") else outside
    (run / name).symlink_to(target)
    algo = tiny_algo(tmp_path)
    with pytest.raises(SystemExit) as info:
        run_with_clear_errors(algo.train)
    message = str(info.value.code)
    assert message.startswith("error: ") and "\n" not in message and str(run / name) in message
    assert "symbolic link" in message
    assert algo.iteration == 0 and sorted(p.name for p in run.iterdir()) == [name]  # nothing written
    assert contents(outside) == EXPECTED


def test_the_model_folder_replaces_a_leftover_link_and_refuses_a_linked_destination(tmp_path, outside):
    algo = tiny_algo(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / ".tmp-model").symlink_to(outside, target_is_directory=True)  # leftover name: unlinked, never written into
    folder = write_model_folder(algo.policy, run / "model", None)
    assert (folder / "config.json").is_file() and not folder.is_symlink()
    assert contents(outside) == EXPECTED
    (tmp_path / "other").symlink_to(outside, target_is_directory=True)
    with pytest.raises(SymlinkRefusedError, match="the model folder is a symbolic link"):
        algo.save_model(tmp_path / "other")
    assert contents(outside) == EXPECTED


def test_an_index_folder_that_is_a_link_is_refused_and_a_leftover_link_unlinked(tmp_path, outside):
    from lmgym.retrieval.index_files import IndexLoadError, write_index_folder

    def write(folder: Path) -> None:
        (folder / "documents.jsonl").write_text('{"text": "a"}\n')

    (tmp_path / "index").symlink_to(outside, target_is_directory=True)
    with pytest.raises(IndexLoadError, match="symbolic link") as info:
        write_index_folder(tmp_path / "index", write, {})
    assert "\n" not in str(info.value)
    (tmp_path / f"fresh.tmp{os.getpid()}").symlink_to(outside, target_is_directory=True)
    folder = write_index_folder(tmp_path / "fresh", write, {})
    assert (folder / "documents.jsonl").is_file() and not folder.is_symlink()
    assert contents(outside) == EXPECTED
