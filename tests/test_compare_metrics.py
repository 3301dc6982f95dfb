"""benchmarks/compare_metrics.py: two runs are the same run when every shared value but the clock is equal."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.test_retrieval_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "compare_metrics.py"


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


ROWS = [
    {"iteration": 0, "eval_accuracy": 0.04, "time_eval": 3.0},
    {"iteration": 1, "reward_mean": 0.0, "loss": 0.125, "tokens_per_second": 90.0},
    {"iteration": 2, "reward_mean": 0.5, "loss": 0.25, "time_sample": 1.0},
]


def test_clock_columns_are_ignored_and_the_first_differing_iteration_is_found(tmp_path):
    compare = load_script(SCRIPT).compare
    clock_only = [dict(r, time_eval=9.0, tokens_per_second=1.0, time_sample=7.0) for r in ROWS]
    assert compare(ROWS, clock_only) == (8, [])
    drifted = [dict(r) for r in ROWS]
    drifted[2]["loss"] = 0.25000001
    assert compare(ROWS, drifted) == (8, [(2, "loss")])


def test_the_script_prints_identical_or_where_they_part(tmp_path):
    a = _write(tmp_path / "a.jsonl", ROWS)
    b = _write(tmp_path / "b.jsonl", ROWS[:2] + [dict(ROWS[2], reward_mean=0.75)])
    def run(x, y):
        return subprocess.run([sys.executable, str(SCRIPT), str(x), str(y)], capture_output=True, text=True,
                              check=True).stdout

    assert run(a, a).strip().endswith("identical")
    assert "first at iteration 2: reward" in run(a, b)  # read in TRL's names
    c = _write(tmp_path / "c.jsonl", [{"reward" if k == "reward_mean" else k: v for k, v in r.items()} for r in ROWS])
    assert run(a, c).strip() == "rows 3 / 3; shared values 8; differing 0; identical"  # an old file and a new one


def test_gpu_memory_peaks_are_machine_columns_too():
    from benchmarks.compare_metrics import compare

    a = [{"iteration": 1, "loss": 0.5, "memory_peak_gb_update": 4.0}]
    b = [{"iteration": 1, "loss": 0.5, "memory_peak_gb_update": 4.5}]
    shared, differing = compare(a, b)
    assert (shared, differing) == (2, [])  # iteration and loss; the memory peak is left out
