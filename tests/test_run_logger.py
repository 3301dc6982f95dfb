"""metrics.jsonl survives kills: torn last lines, atomic truncation, rows set aside rather than lost."""
import json

import pytest

from algorithms import faults
from algorithms.run_logger import DISCARDED, RunLogger


class Killed(BaseException):
    """Stands in for SIGKILL inside this process (the file state at that moment is what a kill leaves)."""


@pytest.fixture
def inject(monkeypatch):
    """inject("point:n") arms the fault-injection seam; reaching it raises Killed."""
    def die():
        raise Killed()

    monkeypatch.setattr(faults, "_die", die)

    def arm(spec):
        monkeypatch.setattr(faults, "_seen", {})
        monkeypatch.setenv(faults.ENV_VAR, spec)
    return arm


def rows(n):
    return "".join(json.dumps({"iteration": i, "reward_mean": i / 10}) + "\n" for i in range(1, n + 1))


def test_a_line_torn_by_a_kill_is_ignored_then_set_aside_on_resume(tmp_path, inject, capsys):
    logger = RunLogger(tmp_path, {})
    logger.log({"iteration": 1, "reward_mean": 0.1})
    inject("metrics.write:1")
    with pytest.raises(Killed):
        logger.log({"iteration": 2, "reward_mean": 0.2})
    text = (tmp_path / "metrics.jsonl").read_text()
    assert not text.endswith("\n") and text.count("\n") == 1  # half a line on disk
    resumed = RunLogger(tmp_path, {}, resume=True)
    assert resumed.read() == [{"iteration": 1, "reward_mean": 0.1}]
    assert "metrics.jsonl:2: unreadable line" in capsys.readouterr().err
    resumed.truncate_after(1)
    assert (tmp_path / "metrics.jsonl").read_text() == rows(1)
    assert (tmp_path / DISCARDED).read_text() == text.splitlines()[1] + "\n"
    resumed.log({"iteration": 2, "reward_mean": 0.2})
    assert (tmp_path / "metrics.jsonl").read_text() == rows(2)


@pytest.mark.parametrize("point", ["truncate.side_file:1", "truncate.before_replace:1", "truncate.after_replace:1"])
def test_a_kill_inside_truncate_after_never_loses_rows(tmp_path, inject, point):
    (tmp_path / "metrics.jsonl").write_text(rows(5))
    logger = RunLogger(tmp_path, {}, resume=True)
    inject(point)
    with pytest.raises(Killed):
        logger.truncate_after(3)
    after_kill = (tmp_path / "metrics.jsonl").read_text()
    assert after_kill in (rows(5), rows(3))  # the old file or the new one, never a partial one
    inject("none:1")
    RunLogger(tmp_path, {}, resume=True).truncate_after(3)  # the resume after the kill
    assert (tmp_path / "metrics.jsonl").read_text() == rows(3)
    kept = {json.loads(line)["iteration"] for line in (tmp_path / DISCARDED).read_text().splitlines()}
    assert kept == {4, 5}  # rows after the checkpoint are set aside, not destroyed


def test_truncate_after_leaves_a_clean_file_alone(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(rows(3))
    before = (tmp_path / "metrics.jsonl").stat().st_mtime_ns
    RunLogger(tmp_path, {}, resume=True).truncate_after(3)
    assert (tmp_path / "metrics.jsonl").stat().st_mtime_ns == before and not (tmp_path / DISCARDED).exists()


def test_a_new_run_moves_the_old_metrics_aside(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(rows(2))
    RunLogger(tmp_path, {}).log({"iteration": 1})
    assert (tmp_path / "metrics.1.jsonl.bak").read_text() == rows(2)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"iteration": 1}\n'
