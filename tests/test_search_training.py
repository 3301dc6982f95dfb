"""benchmarks/search_training.py: seeds saved one file a run and summarised with each run's difference from GRPO
and its Welch t interval (no training: the run is replaced by a fake)."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load():
    spec = importlib.util.spec_from_file_location("search_training", ROOT / "benchmarks" / "search_training.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seeds_are_saved_reused_and_compared_with_grpo(tmp_path, monkeypatch):
    bench = load()
    accuracy = {"GRPO": (0.20, 0.26, 0.22, 0.18, 0.24), "MCTSSearch": (0.30, 0.34, 0.32, 0.36, 0.28)}
    trained = []

    def fake_run(name, args, out):
        trained.append((name, args.seed))
        return {"run": name, "seed": args.seed, "accuracy_before": 0.1, "accuracy_after": accuracy[name][args.seed],
                "iterations": 2, "sampled_tokens": 50, "train_minutes": 0.1, "level": 2,
                "mixed_groups": 0.25 if name == "GRPO" else None}

    monkeypatch.setattr(bench, "run", fake_run)
    common = ["--runs", "GRPO", "MCTSSearch", "--out", str(tmp_path)]
    bench.main(common + ["--seed", "3"])  # one seed, as a parallel process would
    assert trained == [("GRPO", 3), ("MCTSSearch", 3)]
    report = bench.main(common)  # 5 seeds by default: seed 3 is read back
    assert len(trained) == 10 and ("GRPO", 3) not in trained[2:]
    summary = report["summary"]
    assert summary["GRPO"]["versus"] is None and summary["MCTSSearch"]["seeds"] == 5
    versus = summary["MCTSSearch"]["versus"]
    assert versus["difference"] == pytest.approx(0.10)
    assert (versus["low"], versus["high"]) == pytest.approx((0.10 - 0.04612, 0.10 + 0.04612), abs=1e-5)
    text = (tmp_path / "summary.md").read_text()
    assert "| MCTSSearch | 5 | 32.0% |" in text and "+10.0 [+5.4, +14.6]" in text and "| 25.0% |" in text
