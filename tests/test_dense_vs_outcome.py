"""benchmarks/dense_vs_outcome.py: the two methods' configs and the mean/spread summary, by hand (no training)."""
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load():
    spec = importlib.util.spec_from_file_location("dense_vs_outcome", ROOT / "benchmarks" / "dense_vs_outcome.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_methods_differ_only_in_the_dense_credit_and_refresh(tmp_path):
    bench = load()
    args = bench.build_parser().parse_args(["--preset", "cpu"])
    for name, value in bench.PRESETS["cpu"].items():
        setattr(args, name, getattr(args, name) if getattr(args, name) is not None else value)
    outcome, dense = (bench.config_for(m, 1, args, tmp_path) for m in ("outcome", "dense"))
    assert outcome.prm_weight == 0 and outcome.refresh.every == 0
    assert dense.prm_weight == 0.3 and dense.prm_credit == "progress" and dense.refresh.every == 2
    assert dense.refresh.micro_batch_size == bench.PRESETS["cpu"]["refresh_micro_batch_size"] == 2
    # on the GPU the refresh's 64 samples a step go in two passes, not eight (the refresh's default micro-batch)
    gpu = bench.build_parser().parse_args(["--preset", "gpu"])
    for name, value in bench.PRESETS["gpu"].items():
        setattr(gpu, name, getattr(gpu, name) if getattr(gpu, name) is not None else value)
    refresh = bench.config_for("dense", 0, gpu, tmp_path).refresh
    assert (refresh.samples_per_step, refresh.micro_batch_size) == (64, 32)
    assert (outcome.batch_size, outcome.seed, outcome.learning_rate) == (dense.batch_size, 1, dense.learning_rate)


def test_summary_is_the_mean_and_sample_std_over_seeds():
    runs = [{"method": "dense", "accuracy_after": a, "sampled_tokens": 100} for a in (0.2, 0.4, 0.6)]
    runs.append({"method": "outcome", "accuracy_after": 0.3, "sampled_tokens": 90})
    summary = load().summarise(runs)
    assert summary["dense"]["mean"] == pytest.approx(0.4) and summary["dense"]["std"] == pytest.approx(0.2)
    assert summary["outcome"] == {"seeds": 1, "mean": 0.3, "std": 0.0, "min": 0.3, "max": 0.3, "sampled_tokens": 90}


def test_saved_runs_are_read_not_retrained_and_summarised_together(tmp_path, monkeypatch):
    bench = load()
    trained = []

    def fake_run(method, seed, args, out):
        trained.append((method, seed))
        return {"method": method, "seed": seed, "accuracy_before": 0.0, "accuracy_after": 0.1 * seed, "iterations": 1,
                "sampled_tokens": 10, "train_seconds": 1.0}

    monkeypatch.setattr(bench, "run", fake_run)
    common = ["--preset", "cpu", "--out", str(tmp_path), "--methods", "dense"]
    bench.main(common + ["--seeds", "1", "--first-seed", "2"])  # one seed, as a parallel process would
    assert trained == [("dense", 2)] and (tmp_path / "dense-seed2" / "result.json").is_file()
    report = bench.main(common + ["--seeds", "3"])  # seeds 0-2: only 0 and 1 are new
    assert trained == [("dense", 2), ("dense", 0), ("dense", 1)]
    assert [r["seed"] for r in report["runs"]] == [0, 1, 2]
    assert report["summary"]["dense"]["mean"] == pytest.approx(0.1) and report["summary"]["dense"]["seeds"] == 3


def test_dense_against_outcome_is_the_welch_interval_over_seeds_and_the_table_shows_it():
    bench = load()
    runs = [{"method": "dense", "seed": k, "accuracy_before": 0.2, "accuracy_after": a, "iterations": 3,
             "sampled_tokens": 100, "train_seconds": 1.0, "mixed_groups": 0.5}
            for k, a in enumerate((0.30, 0.34, 0.32, 0.36, 0.28))]
    runs += [{"method": "outcome", "seed": k, "accuracy_before": 0.2, "accuracy_after": a, "iterations": 3,
              "sampled_tokens": 100, "train_seconds": 1.0, "mixed_groups": None}
             for k, a in enumerate((0.20, 0.26, 0.22, 0.18, 0.24))]
    compared = bench.versus(runs)
    # means 0.32 and 0.22, sample variances 0.001 each: se 0.02, 8 degrees of freedom, t = 2.306004
    assert compared["difference"] == pytest.approx(0.10) and compared["seeds"] == [5, 5]
    assert (compared["low"], compared["high"]) == pytest.approx((0.10 - 0.04612, 0.10 + 0.04612), abs=1e-5)
    args = bench.build_parser().parse_args(["--preset", "cpu"])
    assert args.seeds == 5
    args.level, args.eval_episodes, args.token_budget, args.model, args.learning_rate = 3, 256, 1000, "m", 2e-6
    text = bench.markdown(bench.summarise(runs), runs, args)
    assert "dense - outcome: +10.0 [+5.4, +14.6] points" in text and "| 50.0% |" in text
    assert "learning rate 2e-06, model m" in text
    assert bench.versus([r for r in runs if r["method"] == "dense"]) is None


def test_the_table_pairs_the_methods_over_problems_when_the_runs_kept_records(tmp_path):
    bench = load()
    runs = [{"method": m, "seed": k, "accuracy_before": 0.2, "accuracy_after": 0.5, "iterations": 3,
             "sampled_tokens": 100, "train_seconds": 1.0, "mixed_groups": None}
            for m in ("dense", "outcome") for k in (0, 1)]
    outcomes = {("dense", 0): [1, 0, 1, 1], ("dense", 1): [1, 1, 0, 1], ("outcome", 0): [0, 0, 1, 1],
                ("outcome", 1): [0, 0, 1, 0]}
    for (method, seed), right in outcomes.items():
        folder = tmp_path / f"{method}-seed{seed}"
        folder.mkdir()
        folder.joinpath("after.problems.jsonl").write_text("".join(
            json.dumps({"kind": "sampled", "id": f"p{i}", "c": c, "n": 1}) + "\n" for i, c in enumerate(right)))
    args = bench.build_parser().parse_args(["--preset", "cpu", "--out", str(tmp_path)])
    args.level, args.eval_episodes, args.token_budget, args.model, args.learning_rate = 2, 4, 1000, "m", 2e-6
    text = bench.markdown(bench.summarise(runs), runs, args)
    # shares right over the seeds: dense 1, 0.5, 0.5, 1; outcome 0, 0, 1, 0.5: +0.375 a problem
    assert "dense - outcome: +37.5 [" in text and "each of 4 held-out problems' share right over 2 seeds" in text
    (tmp_path / "outcome-seed1" / "after.problems.jsonl").unlink()  # a run saved before records were kept
    assert "share right over" not in bench.markdown(bench.summarise(runs), runs, args)


def test_a_saved_run_made_at_another_learning_rate_is_refused_in_one_line(tmp_path, monkeypatch):
    # a summary mixing runs at 5e-5 and 2e-6 would compare unlike runs; the saved run records its settings
    bench = load()
    monkeypatch.setattr(bench, "run", lambda method, seed, args, out: {
        "method": method, "seed": seed, "accuracy_before": 0.0, "accuracy_after": 0.1, "iterations": 1,
        "sampled_tokens": 10, "train_seconds": 1.0, **bench.saved_settings(args)})
    common = ["--preset", "cpu", "--out", str(tmp_path), "--methods", "outcome", "--seeds", "1"]
    bench.main(common + ["--learning-rate", "2e-6"])
    saved = json.loads((tmp_path / "outcome-seed0" / "result.json").read_text())
    assert saved["learning_rate"] == 2e-6 and saved["eval_episodes"] == bench.PRESETS["cpu"]["eval_episodes"]
    assert bench.main(common + ["--learning-rate", "2e-6"])["runs"][0]["accuracy_after"] == 0.1  # same: read back
    with pytest.raises(SystemExit, match=r"outcome-seed0/result.json: saved with learning_rate 2e-06, this call "
                                         r"asks 0.001; give another --out"):
        bench.main(common)  # the cpu preset's 1e-3


def test_a_run_keeps_each_problems_outcome_before_and_after(tmp_path):
    # the tiny model, a few iterations: report.py recomputes a run's accuracy from these, and methods can be
    # paired problem by problem (they are evaluated on the same held-out problems)
    from lmgym.core.problem_records import read_problem_records

    bench = load()
    args = bench.build_parser().parse_args(["--preset", "cpu", "--methods", "outcome"])
    for name, value in bench.PRESETS["cpu"].items():
        setattr(args, name, getattr(args, name) if getattr(args, name) is not None else value)
    result = bench.run("outcome", 0, args, tmp_path)
    test_env = bench.make("Arithmetic-v0", level=args.level, split="test", mode="stepwise", max_steps=args.max_steps)
    first = [test_env.get_problem(i).problem_id for i in range(args.eval_episodes)]
    for when in ("before", "after"):
        records = read_problem_records(tmp_path / "outcome-seed0" / f"{when}.problems.jsonl")
        assert [r["id"] for r in records] == first  # the first held-out problems, in order: pairable across runs
        right = sum(r["c"] for r in records) / len(records)
        assert right == pytest.approx(result[f"accuracy_{when}"])
    rows = [json.loads(line) for line in (tmp_path / "outcome-seed0" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == list(range(1, result["iterations"] + 1))
    assert rows[-1]["sampled_tokens"] == result["sampled_tokens"] and all("reward_mean" in r for r in rows)
    assert result["grad_norm"] == pytest.approx(sum(r["grad_norm"] for r in rows) / len(rows))
