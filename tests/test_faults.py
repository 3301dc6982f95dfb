"""tests/faults.py: each crash point kills at its file-operation boundary (the files on disk show where),
and the library itself holds no fault-injection hook."""
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from lmgym.training.checkpoints.folders import write_checkpoint
from lmgym.training.run_logger import RunLogger
from tests.faults import FaultInjector, Killed, crash_at_fixture  # noqa: F401  (the crash_at fixture)

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("core", "retrieval", "envs", "buffers", "policies", "episodes", "training", "search",
           "evaluation", "traindata", "algorithms", "serving")


def save(run: Path, iteration: int) -> Path:
    """A checkpoint of two files (state.pt, buffer.jsonl), keeping only the newest."""
    writers = {"state.pt": lambda p: p.write_bytes(b"state %d" % iteration),
               "buffer.jsonl": lambda p: p.write_text("{}\n")}
    return write_checkpoint(run, iteration, writers, keep=1)


def entries(folder: Path) -> list[str]:
    """A folder's entries; in a run folder its checkpoint entries alone (`checkpoint-N`, `.tmp-`, `.trash-`)."""
    if not folder.is_dir():
        return []
    names = sorted(p.name for p in folder.iterdir())
    return [n for n in names if "checkpoint-" in n] if any("checkpoint-" in n for n in names) else names


def killed_saving(run: Path, crash_at, point: str, iteration: int) -> Path:
    crash_at(point)
    with pytest.raises(Killed):
        save(run, iteration)
    crash_at(None)
    return run


def test_save_points_sit_between_writing_sealing_renaming_and_pruning(tmp_path, crash_at):
    root = killed_saving(tmp_path / "a", crash_at, "save.state.pt:1", 1)
    assert entries(root) == [".tmp-checkpoint-1"] and entries(root / ".tmp-checkpoint-1") == ["state.pt"]
    root = killed_saving(tmp_path / "b", crash_at, "save.buffer.jsonl:1", 1)
    assert entries(root / ".tmp-checkpoint-1") == ["buffer.jsonl", "state.pt"]
    root = killed_saving(tmp_path / "c", crash_at, "save.manifest:1", 1)
    assert entries(root) == [".tmp-checkpoint-1"]
    assert entries(root / ".tmp-checkpoint-1") == ["MANIFEST.json", "buffer.jsonl", "state.pt"]
    save(tmp_path / "d", 1)
    root = killed_saving(tmp_path / "d", crash_at, "save.renamed:1", 2)
    assert entries(root) == ["checkpoint-1", "checkpoint-2"]  # renamed into place, the older one not yet pruned
    save(tmp_path / "e", 1)
    root = killed_saving(tmp_path / "e", crash_at, "save.pruned:1", 2)
    assert entries(root) == ["checkpoint-2"]


def test_remove_points_sit_between_the_trash_rename_and_each_deletion(tmp_path, crash_at):
    save(tmp_path / "a", 1)
    root = killed_saving(tmp_path / "a", crash_at, "remove.renamed:1", 2)
    assert entries(root) == [".trash-checkpoint-1", "checkpoint-2"]
    assert entries(root / ".trash-checkpoint-1") == ["MANIFEST.json", "buffer.jsonl", "state.pt"]
    save(tmp_path / "b", 1)
    root = killed_saving(tmp_path / "b", crash_at, "remove.file:2", 2)
    assert entries(root / ".trash-checkpoint-1") == ["state.pt"]  # two of its three files deleted
    save(tmp_path / "b", 3)  # the next save finishes the interrupted deletion
    assert entries(root) == ["checkpoint-3"]


@pytest.mark.parametrize("point, config_on_disk", [("config.before_replace:1", {"old": True}),
                                                   ("config.after_replace:1", {"new": True})])
def test_config_points_sit_before_and_after_the_atomic_rename(tmp_path, crash_at, point, config_on_disk):
    (tmp_path / "config.json").write_text(json.dumps({"old": True}))
    crash_at(point)
    with pytest.raises(Killed):
        RunLogger(tmp_path, {"new": True})
    assert json.loads((tmp_path / "config.json").read_text()) == config_on_disk


def test_a_finished_metrics_line_is_whole_on_disk(tmp_path, crash_at):
    logger = RunLogger(tmp_path, {})
    crash_at("metrics.written:2")
    logger.log({"iteration": 1})
    with pytest.raises(Killed):
        logger.log({"iteration": 2})
    assert (tmp_path / "metrics.jsonl").read_text() == '{"iteration": 1}\n{"iteration": 2}\n'


def test_disarmed_points_change_nothing(tmp_path, crash_at):
    crash_at("save.manifest:5")
    for iteration in (1, 2, 3):
        save(tmp_path, iteration)
    assert entries(tmp_path) == ["checkpoint-3"]


@pytest.mark.parametrize("spec, problem", [("save.manifestt:1", "unknown crash point 'save.manifestt'"),
                                           ("metrics.write:0", "must be an integer >= 1"),
                                           ("remove.file", "unknown crash point ''")])
def test_a_bad_crash_point_is_one_line(crash_at, spec, problem):
    with pytest.raises(ValueError, match=problem) as err:
        crash_at(spec)
    assert "\n" not in str(err.value)


def test_a_module_imported_under_an_earlier_injector_is_counted_by_the_next(monkeypatch, tmp_path):
    from lmgym.core import atomic_io

    def killed():
        raise Killed()

    holder = types.ModuleType("holder")
    holder.__file__ = str(ROOT / "tests" / "holder.py")
    monkeypatch.setitem(sys.modules, "holder", holder)
    with pytest.MonkeyPatch.context() as earlier:
        FaultInjector(killed).install(earlier.setattr)
        holder.append_synced = atomic_io.append_synced  # `from lmgym.core.atomic_io import append_synced` meanwhile
    later = FaultInjector(killed)
    later.install(monkeypatch.setattr)
    later.arm("metrics.written:1")
    with pytest.raises(Killed):
        holder.append_synced(tmp_path / "metrics.jsonl", "{}\n")


def test_the_library_holds_no_fault_injection_hook():
    assert importlib.util.find_spec("lmgym.core.faults") is None
    for package in LIBRARY:
        for path in (ROOT / "lmgym" / package).rglob("*.py"):
            text = path.read_text()
            assert "crash_point" not in text and "torn_write" not in text and "RLGYM_CRASH_AT" not in text, path
