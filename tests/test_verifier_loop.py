"""examples/verifier_loop.py end to end on the tiny model (the cpu preset at its smallest): every stage's
files, held-out problems kept apart from the labels trained on, a rerun reusing every stage, one-line
errors; and the library pieces it prints with (verifier tables, the at-maj@N line) on hand values."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from examples.verifier_tables import better_verifier, reliability_markdown, verifier_table, versus_line
from lmgym.core.problem_records import read_problem_records
from tests.test_examples import error_line, load_script
from tests.test_problem_records import assert_report_recomputes, assert_tampering_is_caught
from tests.tiers import slow
from tests.tiny_models import save_tiny_model_dir

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "verifier_loop.py"
VERIFIERS = ("orm", "prm_soft", "orm_ranked")  # examples/verifier_loop.py's kinds, in its order
METHODS = ["maj", "weighted_maj", "best_of_n", "beam_2x2", "mcts"]
BUDGETS = [8, 16, 24, 32]


def test_verifier_table_reliability_and_the_better_verifier_by_hand():
    orm = {"solution_count": 8.0, "solution_positive_rate": 0.25, "solution_accuracy": 0.75, "solution_auc": 0.8,
           "solution_within_problem_auc": 0.625, "solution_ece": 0.125, "majority_accuracy": 0.25,
           "weighted_majority_accuracy": 0.375,
           "best_of_n_accuracy": 0.5, "sample_accuracy": 0.25, "pass_at_n": 0.5,
           "reliability": [{"lower": 0.2, "upper": 0.3, "count": 6, "mean_score": 0.25, "positive_rate": 1 / 6},
                           {"lower": 0.9, "upper": 1.0, "count": 2, "mean_score": 0.95, "positive_rate": 0.5}]}
    one_class = {**orm, "solution_auc": None, "solution_within_problem_auc": None,
                 "weighted_majority_accuracy": None}  # a record saved before the votes
    assert verifier_table({"orm, L2": orm, "prm, L2": one_class}) == (
        "| verifier | samples | correct | accuracy | AUC | AUC within problems | ECE | maj@N | weighted maj@N "
        "| best-of-N | sample accuracy | pass@N |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        "| orm, L2 | 8 | 25.0% | 75.0% | 0.800 | 0.625 | 0.125 | 25.0% | 37.5% | 50.0% | 25.0% | 50.0% |\n"
        "| prm, L2 | 8 | 25.0% | 75.0% | - | - | 0.125 | 25.0% | - | 50.0% | 25.0% | 50.0% |\n")
    assert reliability_markdown(orm) == ("| score bin | solutions | mean score | correct |\n|---|---|---|---|\n"
                                         "| [0.2, 0.3) | 6 | 0.250 | 16.7% |\n| [0.9, 1.0) | 2 | 0.950 | 50.0% |\n")
    # mean AUC: orm (0.8 + 0.6) / 2 = 0.7; prm (no AUC -> 0.5, 0.9) / 2 = 0.7: a tie goes to the first named
    assert better_verifier({"orm": [orm, {"solution_auc": 0.6}], "prm": [one_class, {"solution_auc": 0.9}]}) == "orm"
    assert better_verifier({"orm": [{"solution_auc": 0.6}], "prm": [{"solution_auc": 0.61}]}) == "prm"
    with pytest.raises(ValueError, match="no verifiers to compare"):
        better_verifier({})


def test_versus_line_against_maj_by_hand():
    rows = [{"method": "maj@8", "accuracy": 0.133, "tokens_per_problem": 366.0},
            {"method": "weighted_maj@8", "accuracy": 0.2, "tokens_per_problem": 366.0},
            {"method": "best_of_8", "accuracy": 0.082, "tokens_per_problem": 366.0}]
    assert versus_line(rows, "maj@8", ["weighted_maj@8", "best_of_8"]) == (
        "at maj@8's budget (366.0 tokens/problem): weighted_maj@8 20.0% (+6.7 points, 366.0 tokens/problem), "
        "best_of_8 8.2% (-5.1 points, 366.0 tokens/problem) vs maj@8 13.3%")
    with pytest.raises(ValueError, match="no row for 'beam'"):
        versus_line(rows, "maj@8", ["beam"])


def test_a_generative_verifiers_rows_meet_maj_at_their_generated_tokens_by_hand():
    from examples.verifier_tables import equal_tokens_lines

    at_rows = [{"method": "maj@8", "accuracy": 0.25, "tokens_per_problem": 100.0},
               {"method": "weighted_maj[critic]@8", "accuracy": 0.75, "tokens_per_problem": 100.0,
                "verifier_tokens_per_problem": 90.0},
               {"method": "big[critic]", "accuracy": 0.75, "tokens_per_problem": 400.0,
                "verifier_tokens_per_problem": 400.0}]
    at_records = [{"index": i, "runs": [{"method": "maj@8", "correct": i == 0},
                                        {"method": "weighted_maj[critic]@8", "correct": i != 2},
                                        {"method": "big[critic]", "correct": i != 2}]} for i in range(4)]
    rows = [{"method": "maj", "budget": b, "accuracy": a, "tokens_per_problem": float(b)}
            for b, a in ((384, 0.5), (96, 0.0), (192, 0.25))]  # any order
    records = [{"index": i, "runs": [{"method": "maj", "budget": 96, "correct": False},
                                     {"method": "maj", "budget": 192, "correct": i == 3},
                                     {"method": "maj", "budget": 384, "correct": i in (1, 3)}]} for i in range(4)]
    first, second = equal_tokens_lines(at_rows, at_records, rows, records, seed=0)
    # 100 + 90 = 190 tokens: maj at 192 (the smallest budget reaching them), right on problem 3 only: 3/4 - 1/4
    assert first.startswith("weighted_maj[critic]@8 at equal generated tokens (190.0 a problem: 100.0 the "
                            "policy's, 90.0 the verifier's): 75.0% vs maj capped at 192 (192.0 tokens/problem) "
                            "25.0% on 4 problems; difference +50.0 [")
    # 800 tokens: no budget reaches them, so the largest (384), its tokens in the line: 3/4 - 2/4
    assert "(800.0 a problem" in second and "maj capped at 384 (384.0 tokens/problem) 50.0%" in second
    assert "difference +25.0 [" in second
    assert equal_tokens_lines(at_rows[:1], at_records, rows, records) == []  # no generative verifier
    assert equal_tokens_lines(at_rows, at_records, rows, []) == []  # no curve records


def test_what_the_samples_and_the_trees_held_by_hand():
    from examples.verifier_tables import within_reach_line

    at_rows = [{"method": "maj@8", "accuracy": 0.25, "tokens_per_problem": 400.0}]
    pools = [[True, False], [False, False], [False, True], [True, True]]
    at_records = [{"index": i, "samples": {"correct": c}, "runs": [{"method": "maj@8", "correct": i == 3}]}
                  for i, c in enumerate(pools)]
    rows = [{"method": "mcts", "budget": b, "tokens_per_problem": float(t)} for b, t in ((192, 180), (384, 390),
                                                                                         (768, 700))]
    # at 384 (the largest budget within maj@8's 400 tokens): right leaves on problems 0, 1, 2; chosen on 1
    trees = [dict(finished_leaves=f, finished_right=r, nodes=n, correct=c) for f, r, n, c in
             ((4, 1, 10, False), (2, 2, 6, True), (6, 1, 14, False), (0, 0, 2, False))]
    records = [{"index": i, "runs": [{"method": "mcts", "budget": 384, **tree},
                                     {"method": "mcts", "budget": 768, **trees[0]}]} for i, tree in enumerate(trees)]
    assert within_reach_line(at_rows, at_records, rows, records, "maj@8") == (
        "Within reach: maj@8's samples held a right answer on 3 of 4 problems (75.0%) and it chose one on 1 of them; "
        "mcts at budget 384 held a right finished leaf on 3 of 4 (75.0%; 3.0 finished leaves and 8.0 nodes a tree) "
        "and chose one on 1 of them.")
    old = [{k: v for k, v in r.items() if k != "samples"} for r in at_records]  # records of before the pools
    assert within_reach_line(at_rows, old, rows, records, "maj@8").startswith("Within reach: mcts at budget 384")
    assert within_reach_line(at_rows, old, rows, [], "maj@8") is None


def test_mcts_with_the_critic_is_compared_at_maj_tokens_and_its_checks_are_named():
    # MCTS with the critic as its value: compared at the largest budget within maj@8's policy tokens, as MCTS with
    # the PRM is, and its line names the tokens the critic generated (its checks), which the PRM's never has
    from examples.verifier_tables import matched_budget_line

    at_rows = [{"method": "maj@8", "accuracy": 0.25, "tokens_per_problem": 400.0}]
    at_records = [{"index": i, "runs": [{"method": "maj@8", "correct": i == 0}]} for i in range(4)]
    rows = [{"method": "mcts[critic]", "budget": b, "accuracy": a, "tokens_per_problem": float(t),
             "verifier_tokens_per_problem": v} for b, a, t, v in ((192, 0.25, 190, 1500.0), (384, 0.5, 380, 3000.0))]
    records = [{"index": i, "runs": [{"method": "mcts[critic]", "budget": 384, "correct": i in (0, 1)},
                                     {"method": "mcts[critic]", "budget": 192, "correct": False}]} for i in range(4)]
    line = matched_budget_line(at_rows, at_records, rows, records, "maj@8", "mcts[critic]")
    assert line.startswith("mcts[critic] at <= maj@8's tokens (budget 384, 380.0 tokens/problem, and 3000.0 the "
                           "verifier generated): 50.0% vs maj@8 25.0% (400.0 tokens/problem) on 4 problems; "
                           "difference +25.0 [")
    assert matched_budget_line(at_rows, at_records, rows, records, "maj@8", "mcts") is None  # the PRM's not run


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> str:
    from lmgym.policies import build_tiny_model

    return save_tiny_model_dir(tmp_path_factory, build_tiny_model)


def tiny_argv(model: str, out: Path) -> list[str]:
    """The cpu preset at its smallest: 2 problems a level, 2 samples, 1 rollout, 4-token steps, 2 training
    iterations per verifier, 4 budgets."""
    return ["--preset", "cpu", "--model", model, "--output_dir", str(out), "--label_problems", "2", "--samples", "2",
            "--rollouts", "1", "--max_new_tokens", "4", "--max_steps", "2", "--eval_problems", "2",
            "--curve_problems", "2", "--budgets", ",".join(map(str, BUDGETS)), "--train_iterations", "2",
            "--pairs_per_iteration", "4", "--micro_batch_size", "4", "--simulations", "2", "--batch_problems", "2",
            "--no-progress"]


@slow
def test_the_loop_runs_every_stage_then_reuses_them(tiny_model_dir, tmp_path, capsys):
    from lmgym.envs import make
    from lmgym.evaluation import evaluate_verifier
    from lmgym.policies.prm import ProcessRewardModel
    from lmgym.traindata.step_data import load_policy_labels

    script, out = load_script(SCRIPT), tmp_path / "run"
    argv = tiny_argv(tiny_model_dir, out)
    script.main(argv)
    printed = capsys.readouterr().out

    # 1. labels: train split of L2-L4 (problems 0, 1), with MC step labels; test split of L2 and L4 problems
    # 2, 3 (after the curves' 0, 1), outcome labels only; tokens and tokens/s printed and saved
    stats = json.loads((out / "labels" / "stats.json").read_text())
    assert list(stats) == ["train_L2", "train_L3", "train_L4", "test_L2", "test_L4"]
    for name, s in stats.items():
        split, level = name.split("_L")
        env = make("Arithmetic-v0", level=int(level), split=split, mode="stepwise")
        first = 0 if split == "train" else 2
        samples = load_policy_labels(out / "labels" / f"{name}.jsonl").samples
        assert [x.problem_id for x in samples] == [env.get_problem(first + i // 2).problem_id for i in range(4)]
        assert all(x.has_step_labels == (split == "train") for x in samples if x.steps)
        assert s["sampled_tokens"] > 0 and s["tokens_per_second"] > 0 and (s["rollouts"] > 0) == (split == "train")
        assert f"labels {split} L{level}: 4 samples of 2 problems, {s['sampled_tokens']} tokens sampled" in printed
    test_ids = {x.problem_id for level in (2, 4)
                for x in load_policy_labels(out / f"labels/test_L{level}.jsonl").samples}
    train_ids = {x.problem_id for level in (2, 3, 4)
                 for x in load_policy_labels(out / f"labels/train_L{level}.jsonl").samples}
    assert test_ids.isdisjoint(train_ids)

    # 2. verifiers: each a PRM folder; the ORM reads its last step
    verifiers = {kind: ProcessRewardModel.from_pretrained(out / "verifiers" / kind / "model", device="cpu")
                 for kind in ("orm", "prm_soft", "orm_ranked")}
    assert verifiers["orm"].aggregation == "last" and verifiers["prm_soft"].aggregation == "min"
    assert verifiers["orm_ranked"].aggregation == "last"  # the ORM with a ranking term reads its last step too
    assert all(json.loads((out / "verifiers" / k / "metrics.jsonl").read_text().splitlines()[-1])["iteration"] == 2
               for k in verifiers)

    # 3. held-out evaluation: what evaluate_verifier gives on the saved verifier and the test labels
    saved = json.loads((out / "verifier_eval.json").read_text())
    assert set(saved["verifiers"]) == {"orm", "prm_soft", "orm_ranked"}
    assert saved["better"] in ("orm", "prm_soft", "orm_ranked")
    # each (verifier, level, problem) recorded beside it; benchmarks/report.py recomputes the per-problem numbers
    # (and the curves below: curves/L<level>.problems.jsonl, curves/L<level>_at_maj.problems.jsonl, and the pooled
    # curves with their pool, curves/L<level>_pool.problems.jsonl and L<level>_pool_samples.problems.jsonl)
    text = assert_report_recomputes(out, 9)
    assert "| curves/L2_pool.problems.jsonl | weighted_maj/" in text
    assert "| prm_soft/L4 | weighted_majority_accuracy |" in text
    for kind in ("orm", "prm_soft", "orm_ranked"):  # the solution-level AUC and ECE from the records' scores, verdicts
        for metric in ("solution_ece", "solution_accuracy") + (("solution_auc",) if "solution_auc" in
                                                                saved["verifiers"][kind]["L2"] else ()):
            value = saved["verifiers"][kind]["L2"][metric]
            assert f"| {kind}/L2 | {metric} | {value:.4f} | {value:.4f} | yes |" in text, (kind, metric)
    assert "| curves/L2.problems.jsonl | maj/" in text and "| curves/L4_at_maj.problems.jsonl | best_of_2 |" in text
    ece = saved["verifiers"]["orm"]["L2"]["solution_ece"]

    def tamper_ece(data):
        data["verifiers"]["orm"]["L2"]["solution_ece"] = ece + 0.01

    assert_tampering_is_caught(out / "verifier_eval.json", tamper_ece,
                               f"| orm/L2 | solution_ece | {ece:.4f} | {ece + 0.01:.4f} | NO |", tmp_path / "tampered")
    for kind, prm in verifiers.items():
        for level in (2, 4):
            report = evaluate_verifier(prm, load_policy_labels(out / f"labels/test_L{level}.jsonl").samples)
            record = saved["verifiers"][kind][f"L{level}"]
            assert record["solution_count"] == 4
            assert record["solution_accuracy"] == pytest.approx(report.solution.accuracy)
            assert record["solution_ece"] == pytest.approx(report.solution.ece)
            assert sum(b["count"] for b in record["reliability"]) == 4

    # 4. curves: every method at every budget, each within its cap; maj@2 / weighted / best-of-2 on the same samples
    for level in (2, 4):
        curves = json.loads((out / "curves" / f"L{level}.json").read_text())
        assert curves["about"]["verifier"] == saved["better"] and curves["about"]["problems"] == [0, 2]
        aggregations = {"orm": "last", "prm_soft": "min", "orm_ranked": "last"}
        assert curves["about"]["aggregation"] == aggregations[saved["better"]]
        rows = curves["rows"]
        assert [(r["method"], r["budget"]) for r in rows] == [(m, b) for m in METHODS for b in BUDGETS]
        assert all(r["problems"] == 2 and r["tokens_per_problem"] <= r["budget"] for r in rows)
        assert (out / "curves" / f"L{level}.png").stat().st_size > 0
        at_maj = json.loads((out / "curves" / f"L{level}_at_maj.json").read_text())["rows"]
        others = [k for k in VERIFIERS if k != saved["better"]]  # every verifier scores the one pool
        assert [r["method"] for r in at_maj] == ["maj@2", "weighted_maj@2", "best_of_2"] + [
            f"{rule}[{other}]{n}" for other in others for rule, n in (("weighted_maj", "@2"), ("best_of_2", ""))]
        assert len({r["tokens_per_problem"] for r in at_maj}) == 1  # the same 2 samples a problem each
        pools = read_problem_records(out / "curves" / f"L{level}_at_maj.problems.jsonl")
        for record in pools:  # every row chose one of the pool's samples
            assert set(record["samples"]["scores"]) == {"default", *others}
            assert all(run["answer"] in record["samples"]["answers"] for run in record["runs"])

    # 5. the summary
    summary = (out / "verifier_loop.md").read_text()
    data = json.loads((out / "verifier_loop.json").read_text())
    for level in (2, 4):
        line = data[f"L{level}"]["at_maj_line"]
        assert line.startswith("at maj@2's budget (") and line in summary
    assert "| orm, L2 | 4 |" in summary and "| prm_soft, L4 | 4 |" in summary and "![L4](curves/L4.png)" in summary
    assert "| mcts | 32 |" in summary and data["verifier_eval"] == saved
    for level in (2, 4):  # what maj's pool and MCTS's trees held, from the records
        assert data[f"L{level}"]["within_reach_line"].startswith("Within reach: maj@2's samples held a right answer")
        assert "finished leaves and" in data[f"L{level}"]["within_reach_line"]

    # a second run reuses every stage: no model is loaded, nothing sampled or trained, the same summary
    script.main(argv)
    again = capsys.readouterr().out
    assert re.search(r"^policy \S+ on ", again, re.M) is None  # no model loaded (the balance table names sources)
    for what in ("labels train L2", "labels test L4", "verifier orm", "verifier prm_soft", "verifier evaluation",
                 "curves L2", "curves L4"):
        assert f"{what}: " in again
        assert "exists, skipped (--restart redoes it)" in again.split(f"{what}: ")[1].split("\n")[0]
    assert (out / "verifier_loop.md").read_text() == summary

    # --verifiers names the ones a process trains (two processes can train one each, side by side)
    capsys.readouterr()
    script.main(argv + ["--stages", "train", "--verifiers", "prm_soft"])
    only = capsys.readouterr().out
    assert "verifier prm_soft: " in only and "verifier orm: " not in only

    # a run cut during L4's capped curves: the N-sample table (saved first) is in the summary, and the rerun
    # redoes only the curves
    (out / "curves" / "L4.json").unlink()
    at_maj_saved = (out / "curves" / "L4_at_maj.json").read_text()
    script.main(argv + ["--stages", "evaluate"])  # saved: only the summary is written again
    partial = (out / "verifier_loop.md").read_text()
    assert "weighted_maj@2" in partial.split("## Held-out L4")[1] and "![L4](curves/L4.png)" not in partial
    script.main(argv)
    assert (out / "curves" / "L4.json").is_file() and (out / "curves" / "L4_at_maj.json").read_text() == at_maj_saved


def test_bad_flags_are_one_line_before_any_model_loads(tmp_path):
    script, out = load_script(SCRIPT), tmp_path / "run"
    common = ["--preset", "cpu", "--model", str(tmp_path / "no-model"), "--output_dir", str(out)]
    assert error_line(script, common + ["--stages", "label,rl"]) == (
        "error: --stages: 'rl'; choose from sft, label, train, evaluate, curves (or all)")
    assert error_line(script, common + ["--budgets", "64,x"]) == (
        "error: --budgets must be comma-separated integers, got '64,x'")
    assert error_line(script, common + ["--budgets", "64,64"]) == (
        "error: --budgets must be distinct integers >= 1, got '64,64'")
    assert error_line(script, common + ["--test_levels", "2,7"]) == (
        "error: --test_levels must be distinct integers in 0..4, got '2,7'")
    assert error_line(script, common + ["--samples", "0"]) == "error: --samples must be >= 1, got 0"
    # level 0's test split has 14 problems (the one-digit sums whose key hashes to test)
    assert error_line(script, common + ["--test_levels", "0", "--curve_problems", "10", "--eval_problems", "5"]) == (
        "error: --curve_problems + --eval_problems is 15, but the test split of Arithmetic-v0 level 0 has 14 problems")
    assert error_line(script, common + ["--learning_rate", "-1"]).startswith("error: PRMConfig.learning_rate")
    assert error_line(script, common + ["--verifiers", "orm,prm_hard"]) == (
        "error: --verifiers: 'prm_hard'; choose from orm, prm_soft, orm_ranked (or all)")
    assert error_line(script, common + ["--stages", "curves"]) == (
        f"error: stage curves needs {out / 'verifier_eval.json'}, which does not exist: add evaluate to --stages")
    assert error_line(script, common + ["--stages", "train"]) == (
        f"error: stage train needs {out / 'labels' / 'train_L2.jsonl'}, which does not exist: add label to --stages")
    assert not out.exists()  # nothing written
    for kind in ("orm", "prm_soft", "orm_ranked"):  # verifiers saved, held-out labels not: their maker is named
        (out / "verifiers" / kind / "model").mkdir(parents=True)
    assert error_line(script, common + ["--stages", "evaluate"]) == (
        f"error: stage evaluate needs {out / 'labels' / 'test_L2.jsonl'}, which does not exist: add label to --stages")


@slow
def test_a_second_policy_balanced_labels_the_critic_and_curve_parts(tiny_model_dir, tmp_path, capsys):
    """Issue 36's additions: the budgeted SFT as a second policy (its labels beside the policy's), each level's
    labels balanced before training (labels/balance.json), the critic scoring weighted maj and best-of-N beside
    the verifier, every method's interval against maj, and capped curves run in parts then merged."""
    from lmgym.traindata.step_data import balanced_samples, label_balance, load_policy_labels

    script, out = load_script(SCRIPT), tmp_path / "run"
    argv = tiny_argv(tiny_model_dir, out) + ["--train_levels", "2", "--test_levels", "2", "--second_policy", "sft",
                                             "--sft_examples", "4", "--critic", tiny_model_dir, "--budgets", "16,32"]
    script.main(argv + ["--curve_methods", "maj,best_of_n_critic"])
    assert (out / "sft" / "model" / "config.json").is_file()
    stats = json.loads((out / "labels" / "stats.json").read_text())
    assert list(stats) == ["train_L2", "test_L2", "second_L2"] and stats["second_L2"]["samples"] == 4
    own = load_policy_labels(out / "labels" / "train_L2.jsonl").samples
    second = load_policy_labels(out / "labels" / "train_L2.second.jsonl").samples
    balance = json.loads((out / "labels" / "balance.json").read_text())["L2"]
    assert balance["before"] == label_balance(own + second) and balance["mode"] == "per_policy"
    kept = balanced_samples(own, 0.5, 0) + balanced_samples(second, 0.5, 0)  # each policy's labels on their own
    assert balance["after"] == label_balance(kept)
    assert balance["sources"]["second"]["after"] == label_balance(balanced_samples(second, 0.5, 0))

    at_maj = json.loads((out / "curves" / "L2_at_maj.json").read_text())["rows"]
    better = json.loads((out / "verifier_eval.json").read_text())["better"]
    others = [k for k in VERIFIERS if k != better]
    assert [r["method"] for r in at_maj] == ["maj@2", "weighted_maj@2", "best_of_2"] + [
        f"{rule}[{other}]{n}" for other in others for rule, n in (("weighted_maj", "@2"), ("best_of_2", ""))] + [
        "weighted_maj[critic]@2", "best_of_2[critic]", f"weighted_maj[{better}_critic]@2",
        f"best_of_2[{better}_critic]"]
    assert "vs" not in at_maj[0] and all(r["vs"]["baseline"] == "maj@2" for r in at_maj[1:])
    assert all(r["vs"]["low"] <= r["vs"]["difference"] <= r["vs"]["high"] for r in at_maj[1:])
    part = json.loads((out / "curves" / "L2_part_maj+best_of_n_critic.json").read_text())["rows"]
    assert [(r["method"], r["budget"]) for r in part] == [("maj", 16), ("maj", 32), ("best_of_n[critic]", 16),
                                                          ("best_of_n[critic]", 32)]
    assert all("vs" in r for r in part[2:]) and not (out / "curves" / "L2.json").exists()

    script.main(argv + ["--curve_methods", "mcts", "--stages", "curves"])  # another part: the summary merges them
    data = json.loads((out / "verifier_loop.json").read_text())
    rows = data["L2"]["curves"]
    assert [r["method"] for r in rows] == ["maj", "maj", "best_of_n[critic]", "best_of_n[critic]", "mcts", "mcts"]
    assert all(r["vs"]["baseline"] == "maj" for r in rows[2:])
    summary = (out / "verifier_loop.md").read_text()
    assert "## Label balance" in summary and "vs maj@2, points [95% CI]" in summary
    assert "vs maj, points [95% CI]" in summary
    printed = capsys.readouterr().out
    assert "curves L2 -> " in printed and "L2_part_mcts" in printed
    assert re.search(r"curves L2: mcts at 32: \d+\.\d%, [\d.]+ tokens/problem \(2 of 2\)", printed)  # a line a run
    assert not list((out / "curves").glob("*.partial.jsonl"))  # each part's progress file gone once it is written

    # every rule's curve from one pool: each scorer of the headline table, at each budget, against maj there
    script.main(argv + ["--curve_methods", "pool", "--stages", "curves", "--pool_samples", "3"])
    pooled = json.loads((out / "curves" / "L2_pool.json").read_text())
    names = ["maj", "weighted_maj", "best_of_n"] + [f"{rule}[{other}]" for other in others
                                                     for rule in ("weighted_maj", "best_of_n")] + [
        "weighted_maj[critic]", "best_of_n[critic]", f"weighted_maj[{better}_critic]", f"best_of_n[{better}_critic]"]
    assert [(r["method"], r["budget"]) for r in pooled["rows"]] == [(m, b) for m in names for b in (16, 32)]
    assert pooled["about"]["pool_samples"] == 3 and all(r["tokens_per_problem"] <= r["budget"] for r in pooled["rows"])
    assert all(("verifier_tokens_per_problem" in r) == ("critic" in r["method"]) for r in pooled["rows"])
    pool = read_problem_records(out / "curves" / "L2_pool_samples.problems.jsonl")
    assert all(len(r["samples"]["tokens"]) == 3 for r in pool)
    for budget in (16, 32):  # maj's tokens at each budget: the pool's samples charged in order, as a capped run does
        spent = [min(budget, sum(r["samples"]["tokens"])) for r in pool]
        row = next(r for r in pooled["rows"] if r["method"] == "maj" and r["budget"] == budget)
        assert row["tokens_per_problem"] == pytest.approx(sum(spent) / len(spent))
    assert "every rule's curve from one pool of 3 samples" in (out / "verifier_loop.md").read_text()
    # each scorer's AUC over the pool and within its problems, and the pool's reach, from the pool's records
    on_pool = {r["scorer"]: r for r in pooled["about"]["scorers_on_pool"]}
    assert set(on_pool) == set(pool[0]["samples"]["scores"])
    reach = sum(any(r["samples"]["correct"]) for r in pool) / len(pool)
    assert all(r["reach"] == pytest.approx(reach) and r["problems"] == len(pool) for r in on_pool.values())
    assert "| scorer | AUC, every sample | AUC within problems |" in (out / "verifier_loop.md").read_text()
    assert not (out / "curves" / "L2_part_pool.json").exists()  # no capped part for the pool
    # the second policy (the budgeted SFT) samples a pool of its own, beside the policy's
    script.main(argv + ["--curve_methods", "pool", "--stages", "curves", "--pool_samples", "2", "--pool_policy",
                        "second"])
    second = json.loads((out / "curves" / "L2_pool_second.json").read_text())
    assert second["about"]["sampler"] == str(out / "sft" / "model") and second["about"]["pool_samples"] == 2
    assert [(r["method"], r["budget"]) for r in second["rows"]] == [(m, b) for m in names for b in (16, 32)]
    assert json.loads((out / "curves" / "L2_pool.json").read_text()) == pooled  # the policy's left as it was
    summary = (out / "verifier_loop.md").read_text()
    assert "one pool of 3 samples a problem, the policy's" in summary
    assert f"one pool of 2 samples a problem, the second policy's ({out / 'sft' / 'model'})" in summary

    (out / "curves" / "L2_at_maj.json").unlink()
    (out / "curves" / "L2_part_mcts.json").unlink()
    script.main(argv + ["--curve_methods", "mcts", "--stages", "curves"])  # a part without maj: no uncapped table
    assert (out / "curves" / "L2_part_mcts.json").is_file() and not (out / "curves" / "L2_at_maj.json").exists()


def test_bad_issue36_flags_are_one_line(tmp_path):
    script = load_script(SCRIPT)
    common = ["--preset", "cpu", "--output_dir", str(tmp_path / "x")]
    assert error_line(script, common + ["--right_share", "1.0"]) == (
        "error: --right_share must be 0 (no balancing) or in (0, 1), got 1.0")
    assert error_line(script, common + ["--critic", str(tmp_path / "none")]) == (
        f"error: --critic {tmp_path / 'none'}: no such model folder")
    assert error_line(script, common + ["--curve_methods", "best_of_n_critic"]).startswith(
        "error: --curve_methods: 'best_of_n_critic'; choose from maj, weighted_maj, best_of_n, beam, mcts")
    assert error_line(script, common + ["--pool_policy", "second"]) == (
        "error: --pool_policy second needs --second_policy (sft, or a model folder)")
    assert error_line(script, common + ["--second_policy", str(tmp_path / "none")]) == (
        f"error: --second_policy {tmp_path / 'none'}: not 'sft' and no such model folder")


@slow
def test_one_policys_labels_leave_the_stats_to_the_process_that_labels_both(tiny_model_dir, tmp_path):
    """issue36_gpu runs the policy's and the second policy's labels in two processes (--label_only), the policy's
    beside the second policy's SFT; its label_stats stage is done once labels/stats.json exists: a one-policy
    process must not write it, else the verifiers' training could start before the other policy's labels are
    saved."""
    script, out = load_script(SCRIPT), tmp_path / "run"
    argv = tiny_argv(tiny_model_dir, out) + ["--train_levels", "2", "--test_levels", "2", "--second_policy", "sft",
                                             "--sft_examples", "4"]
    script.main(argv + ["--stages", "label", "--label_only", "policy"])  # beside the SFT: needs no second model
    assert (out / "labels" / "train_L2.jsonl").is_file() and not (out / "labels" / "stats.json").exists()
    script.main(argv + ["--stages", "sft"])
    script.main(argv + ["--stages", "label", "--label_only", "second"])
    assert (out / "labels" / "train_L2.second.jsonl").is_file() and not (out / "labels" / "stats.json").exists()
    script.main(argv + ["--stages", "label"])  # every file saved: stats over all of them, nothing labelled again
    assert list(json.loads((out / "labels" / "stats.json").read_text())) == ["train_L2", "test_L2", "second_L2"]
