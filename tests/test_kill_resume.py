"""The headline: a run killed with SIGKILL many times (inside save(), inside the metrics write, inside
truncate_after, while pruning, and at random moments) and resumed each time ends exactly where an
uninterrupted run ends: same parameters, optimizer state and metrics.jsonl. See tests/kill_harness.py."""
import json
import os
import subprocess
import sys
from pathlib import Path

from tests import checkpoint_state
from tests.tiers import slow

pytestmark = slow  # the slow tier (tests/tiers.py): kills and resumes training processes

ROOT = Path(__file__).resolve().parents[1]


def test_killed_and_resumed_runs_equal_an_uninterrupted_run(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "kill_harness.py"), "--points", "--trials", "3",
                             "--seed", "7", "--workdir", str(tmp_path)],
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    points = summary["points"]
    # every planned kill landed at its boundary, then one attempt completed the run
    assert points["outcomes"] == ["killed"] * len(points["crash_points"]) + ["completed"]
    assert points["differences"] == [] and points["iterations_lost"] == 0
    assert max(r for r in points["resumed_from"] if r is not None) == 5
    # nothing logged was deleted: rows of killed attempts are set aside, the first start's row 0 archived
    run = tmp_path / "points"
    assert (run / "metrics.discarded.jsonl").is_file() and (run / "metrics.1.jsonl.bak").is_file()
    assert checkpoint_state.entries(run) == ["checkpoint-4", "checkpoint-5"]
    randomly = summary["random"]
    assert randomly["trials"] == 3 and randomly["kills"] >= 1
    assert randomly["mismatches"] == [] and randomly["iterations_lost"] == 0
