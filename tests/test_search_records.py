"""Per-problem records of the search evaluations (evaluate_search: kind "search", evaluate_curves: kind
"search_curves") on a scripted policy and scorer, and benchmarks/report.py recomputing their tables from them."""
import gzip
import json

from lmgym.core.problem_records import read_problem_records
from lmgym.envs import make
from lmgym.evaluation.curves import evaluate_curves, save_curves
from lmgym.evaluation.search_eval import evaluate_search, save_table
from lmgym.search import SearchSettings
from tests.search_toys import ScriptedPolicy, ScriptedScorer
from tests.test_problem_records import assert_report_recomputes, assert_tampering_is_caught
from tests.test_search_curves import METHODS, env_and_script


def test_evaluate_search_records_each_problem_and_report_recomputes_the_table(tmp_path):
    env = make("Arithmetic-v0", level=1, split="test", mode="stepwise", max_steps=2)
    gold = env.get_problem(0).gold
    policy = ScriptedPolicy({"": [f"#### {gold}\n", "#### -1\n", "#### -1\n"]})
    scorer = ScriptedScorer({f"#### {gold}\n": 0.9, "#### -1\n": 0.1})
    methods = [SearchSettings(method="greedy"), SearchSettings(method="maj", n=3),
               SearchSettings(method="best_of_n", n=3)]
    stem = tmp_path / "results" / "search" / "table"
    rows = evaluate_search(policy, env, methods, scorer, episodes=3, batch_problems=2,
                           records_path=stem.with_suffix(".json"))
    save_table(rows, stem, {"level": 1})

    records = read_problem_records(stem.with_name("table.problems.jsonl"))
    assert [(r["kind"], r["index"], r["gold"], r["id"]) for r in records] == [
        ("search", i, env.get_problem(i).gold, env.get_problem(i).problem_id) for i in range(3)]
    step = len(f"#### {gold}\n")
    assert records[0]["runs"] == [  # problem 0: greedy and best-of-3 pick the gold, the vote goes to -1
        {"method": "greedy", "answer": gold, "correct": True, "tokens": step},
        {"method": "maj@3", "answer": "-1", "correct": False, "tokens": step + 2 * 8},
        {"method": "best_of_3", "answer": gold, "correct": True, "tokens": step + 2 * 8,
         "sample_scores": [0.9, 0.1, 0.1], "sample_correct": [True, False, False]}]  # what the scorer ranked
    assert all(not run["correct"] for r in records[1:] for run in r["runs"])

    text = assert_report_recomputes(tmp_path / "results", 1)
    assert f"| best_of_3 | accuracy | {1 / 3:.4f} | {1 / 3:.4f} | yes |" in text
    assert f"| maj@3 | tokens_per_problem | {step + 16:.4f} | {step + 16:.4f} | yes |" in text

    def claim_maj_right(data):
        data["rows"][1]["accuracy"] = 1 / 3

    assert_tampering_is_caught(stem.with_suffix(".json"), claim_maj_right,
                               f"| maj@3 | accuracy | 0.0000 | {1 / 3:.4f} | NO |", tmp_path / "tampered")


def test_evaluate_curves_records_each_budget_and_report_recomputes_the_curves(tmp_path):
    env, script, episode = env_and_script()
    stem = tmp_path / "results" / "curves"
    rows = evaluate_curves(ScriptedPolicy(script), env, METHODS[:1] + METHODS[3:4], [10, 30], ScriptedScorer({}),
                           episodes=2, records_path=stem.with_suffix(".json"))
    save_curves(rows, stem, {"level": 1})

    records = read_problem_records(tmp_path / "results" / "curves.problems.jsonl")
    assert [(r["kind"], r["index"]) for r in records] == [("search_curves", 0), ("search_curves", 1)]
    assert [(run["method"], run["budget"], run["tokens"]) for run in records[0]["runs"]] == [
        ("maj", 10, 10), ("maj", 30, 30), ("beam_2x2", 10, 10), ("beam_2x2", 30, 30)]
    assert [run["correct"] for run in records[0]["runs"]] == [False, True, False, False]  # as in test_search_curves

    text = assert_report_recomputes(tmp_path / "results", 1)
    assert "| curves.problems.jsonl | maj/30 | accuracy | 0.5000 | 0.5000 | yes |" in text  # problem 0 of 2 right
    assert "| beam_2x2/10 | tokens_per_problem | 10.0000 | 10.0000 | yes |" in text
    assert "curves.json: aggregates only" not in text

    def shift_a_budget(data):
        data["rows"][1]["tokens_per_problem"] = 28.0

    assert_tampering_is_caught(stem.with_suffix(".json"), shift_a_budget,
                               "| maj/30 | tokens_per_problem | 30.0000 | 28.0000 | NO |", tmp_path / "tampered")


def test_report_reads_gzipped_records_and_curves_saved_under_kind_search(tmp_path):
    """Saved results keep their records gzipped, and the pooled curves saved before 2026-12-01 tagged theirs "search"
    (the pool's kind) although their runs name budgets: report.py recomputes both against the aggregates."""
    env, script, episode = env_and_script()
    stem = tmp_path / "results" / "curves"
    rows = evaluate_curves(ScriptedPolicy(script), env, METHODS[:1] + METHODS[3:4], [10, 30], ScriptedScorer({}),
                           episodes=2, records_path=stem.with_suffix(".json"))
    save_curves(rows, stem, {"level": 1})
    plain = tmp_path / "results" / "curves.problems.jsonl"
    lines = [json.dumps({**json.loads(line), "kind": "search"}) for line in plain.read_text().splitlines()]
    (tmp_path / "results" / "curves.problems.jsonl.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    plain.unlink()

    text = assert_report_recomputes(tmp_path / "results", 1)
    assert "| curves.problems.jsonl.gz | maj/30 | accuracy | 0.5000 | 0.5000 | yes |" in text
    assert "| beam_2x2/10 | tokens_per_problem | 10.0000 | 10.0000 | yes |" in text
    assert "aggregates only" not in text


def test_a_tree_searchs_record_keeps_its_size_and_its_right_leaves():
    from lmgym.evaluation.search_eval import run_outcome
    from lmgym.search.search_types import SearchResult

    tree = SearchResult(None, "7", True, 90, {"simulations": 30, "nodes": 13, "finished_leaves": 9,
                                               "finished_right": 1, "depth": 2})
    assert run_outcome("mcts", tree) == {"method": "mcts", "answer": "7", "correct": True, "tokens": 90,
                                         "nodes": 13, "finished_leaves": 9, "finished_right": 1}
    assert set(run_outcome("maj", SearchResult(None, "7", True, 90, {"votes": {"7": 2}}))) == {
        "method", "answer", "correct", "tokens"}
