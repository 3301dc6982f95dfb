"""benchmarks/search_training.py: seeds saved one file a run and summarised with each run's difference from GRPO
and its Welch t interval (no training: the run is replaced by a fake)."""
import importlib.util
import json
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


def test_the_learning_rate_reaches_every_run_and_a_saved_run_at_another_is_refused(tmp_path, monkeypatch):
    bench = load()
    args = bench.build_parser().parse_args(["--learning-rate", "2e-6", "--seed", "1"])
    args.seed = 1
    for name in bench.RUNS:
        config = bench.config_for(name, args, tmp_path)
        assert (config.learning_rate, config.seed, config.kl_coeff) == (2e-6, 1, bench.COMMON["kl_coeff"]), name
    default = bench.build_parser().parse_args([])
    assert default.learning_rate == bench.COMMON["learning_rate"] == 5e-5
    monkeypatch.setattr(bench, "run", lambda name, args, out: {
        "run": name, "seed": args.seed, "accuracy_before": 0.1, "accuracy_after": 0.2, "iterations": 2,
        "sampled_tokens": 50, "train_minutes": 0.1, "level": 2, "mixed_groups": None,
        **bench.run_settings(name, args)})
    common = ["--runs", "GRPO", "--out", str(tmp_path), "--seed", "0"]
    bench.main(common + ["--learning-rate", "2e-6"])
    assert "learning rate 2e-06" in (tmp_path / "summary.md").read_text()
    with pytest.raises(SystemExit, match="saved with eval_episodes 256, this call asks 896"):
        bench.main(common + ["--learning-rate", "2e-6", "--eval-episodes", "896"])


def test_mcts_search_scales_its_advantages_as_asked_and_a_saved_run_scaled_otherwise_is_refused(tmp_path,
                                                                                                   monkeypatch):
    bench = load()
    assert bench.build_parser().parse_args([]).mcts_advantages == "none"
    for scaling in ("rms", "whiten", "none"):
        args = bench.build_parser().parse_args(["--mcts-advantages", scaling, "--seed", "0"])
        args.seed = 0
        assert bench.config_for("MCTSSearch", args, tmp_path).advantage_scaling == scaling
        assert bench.run_settings("MCTSSearch", args)["advantage_scaling"] == scaling
        assert "advantage_scaling" not in bench.run_settings("GRPO", args)  # GRPO's runs do not depend on it
    monkeypatch.setattr(bench, "run", lambda name, args, out: {
        "run": name, "seed": args.seed, "accuracy_before": 0.1, "accuracy_after": 0.2, "iterations": 2,
        "sampled_tokens": 50, "train_minutes": 0.1, "level": 2, "mixed_groups": None,
        **bench.run_settings(name, args)})
    common = ["--runs", "GRPO", "MCTSSearch", "--out", str(tmp_path), "--seed", "0"]
    bench.main(common + ["--mcts-advantages", "none"])
    assert json.loads((tmp_path / "MCTSSearch-seed0" / "result.json").read_text())["advantage_scaling"] == "none"
    with pytest.raises(SystemExit, match="MCTSSearch-seed0/result.json: saved with advantage_scaling none, this "
                                         "call asks rms"):
        bench.main(common + ["--mcts-advantages", "rms"])


def test_the_summary_pairs_each_run_with_grpo_over_problems_from_the_runs_records(tmp_path):
    bench = load()
    results = [{"run": name, "seed": seed, "accuracy_before": 0.1, "accuracy_after": 0.5, "iterations": 2,
                "sampled_tokens": 50, "train_minutes": 0.1, "level": 2, "mixed_groups": None}
               for name in ("GRPO", "MCTSSearch") for seed in (0, 1)]
    right = {"GRPO": [1, 1, 0, 0], "MCTSSearch": [1, 0, 0, 0]}
    for r in results:
        folder = tmp_path / f"{r['run']}-seed{r['seed']}"
        folder.mkdir()
        folder.joinpath("after.problems.jsonl").write_text("".join(
            json.dumps({"kind": "sampled", "id": f"p{i}", "c": c, "n": 1}) + "\n"
            for i, c in enumerate(right[r["run"]])))
    text = bench.markdown(bench.summarise(results), results, tmp_path)
    assert "MCTSSearch - GRPO: -25.0 [" in text and "each of 4 held-out problems' share right over 2 seeds" in text
    assert "share right over" not in bench.markdown(bench.summarise(results), results)  # no folder: no line


def test_how_far_a_run_moved_is_its_mean_gradient_norm_and_its_last_ten_kls():
    from examples.common import movement_cells, run_movement

    rows = [{"grad_norm": 0.5 + k % 2, "kl": 0.01 * k} for k in range(12)]  # norms 0.5, 1.5, ...; KL 0 to 0.11
    assert run_movement(rows) == pytest.approx({"grad_norm": 1.0, "kl_last10": 0.01 * sum(range(2, 12)) / 10})
    assert run_movement([{"reward_mean": 1.0}]) == {"grad_norm": None, "kl_last10": None}
    assert movement_cells({"grad_norm": 0.0738, "kl_last10": 0.00355}) == "0.074 | 0.0036"
    assert movement_cells({}) == "- | -"  # a run saved before they were kept


def test_a_run_keeps_each_problems_outcome_before_and_after(tmp_path_factory, tmp_path):
    # the tiny model, one iteration of GRPO: report.py recomputes a run's accuracy from these records
    from lmgym.core.problem_records import read_problem_records
    from lmgym.policies import build_tiny_model
    from tests.tiny_models import save_tiny_model_dir

    bench = load()
    model = save_tiny_model_dir(tmp_path_factory, build_tiny_model)
    bench.main(["--runs", "GRPO", "--model", model, "--seed", "0", "--max-iterations", "1", "--eval-episodes", "3",
                "--max-steps", "2", "--token-budget", "10", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "GRPO-seed0" / "result.json").read_text())
    assert result["learning_rate"] == 5e-5 and result["eval_episodes"] == 3
    assert result["grad_norm"] > 0 and result["kl_last10"] is not None  # how far it moved, from its metrics
    for when in ("before", "after"):
        records = read_problem_records(tmp_path / "GRPO-seed0" / f"{when}.problems.jsonl")
        assert len(records) == 3 and len({r["id"] for r in records}) == 3
        assert sum(r["c"] for r in records) / 3 == pytest.approx(result[f"accuracy_{when}"])
