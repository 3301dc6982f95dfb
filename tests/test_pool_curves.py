"""`pool_curves`: every rule's accuracy-vs-tokens curve from one pool of samples, by hand on a scripted pool, and the
same numbers as separate capped runs (`evaluate_curves`) of the scripted policy, whose rounds draw the pool's
samples in the pool's order."""
import tempfile
from pathlib import Path

import pytest

from lmgym.core.problem_records import problems_path, read_problem_records
from lmgym.evaluation.curves import evaluate_curves
from lmgym.evaluation.pool_curves import pool_curves, scorers_on_pool, scorers_on_pool_markdown
from lmgym.evaluation.rerank_eval import evaluate_reranking
from lmgym.search import SearchSettings
from tests.search_toys import ScriptedPolicy
from tests.test_rerank_eval import GOLD, SAMPLES, CountingScorer, env, scorers

BUDGETS = [5, 9, 16, 23, 30]  # the samples cost 9, 7, 7, 7 tokens (one a character): 30 in all


class ItemCountingScorer(CountingScorer):
    """The scripted critic, its 3 tokens a solution also listed per solution, as CriticVerifier keeps them."""

    def __init__(self, table):
        super().__init__(table)
        self.item_tokens = []

    def score_branches(self, branches):
        self.item_tokens += [3] * len(branches)
        return super().score_branches(branches)


def records_of(named) -> list[dict]:
    """evaluate_reranking's problem records of the scripted pool (two problems, 4 samples each)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pool.json"
        evaluate_reranking(ScriptedPolicy({"": SAMPLES}), env(), SearchSettings(method="maj", n=4), named,
                           aggregations={"critic": "last"}, episodes=2, batch_problems=1, records_path=path)
        return read_problem_records(problems_path(path))


def test_the_pool_keeps_each_samples_tokens_and_the_critics_check_of_each():
    named = {**scorers(), "critic": ItemCountingScorer(scorers()["critic"].table)}
    records = records_of(named)
    pool = records[0]["samples"]
    assert pool["tokens"] == [len(s) for s in SAMPLES]
    assert pool["verifier_tokens"] == {"critic": [3, 3, 3, 3]}  # the plain verifier generated nothing
    assert "verifier_tokens" not in records_of(scorers())[0]["samples"]  # a scorer that lists no items


def test_each_budget_keeps_the_pools_prefix_that_fits_and_each_rule_chooses_among_it_by_hand():
    named = {**scorers(), "critic": ItemCountingScorer(scorers()["critic"].table)}
    rows, records = pool_curves(records_of(named), BUDGETS)
    by = {(r["method"], r["budget"]): r for r in rows}
    assert list(dict.fromkeys(r["method"] for r in rows)) == [
        "maj", "weighted_maj", "best_of_n", "weighted_maj[critic]", "best_of_n[critic]"]
    # problem 0 (gold 125) keeps nothing at 5 (the first sample crosses the cap), [125] at 9, [125, 7] at 16
    # (maj's tie goes to the answer seen first), [125, 7, 7] at 23 and 30 (7 outvotes it; the verifier's sums
    # keep 125 at 0.9 > 0.4, the critic's pick 7); problem 1 (gold 93) is wrong everywhere
    accuracy = {method: [by[(method, b)]["accuracy"] for b in BUDGETS] for method in dict.fromkeys(m for m, _ in by)}
    assert accuracy == {"maj": [0.0, 0.5, 0.5, 0.0, 0.0], "weighted_maj": [0.0, 0.5, 0.5, 0.5, 0.5],
                        "best_of_n": [0.0, 0.5, 0.5, 0.5, 0.5], "weighted_maj[critic]": [0.0, 0.5, 0.0, 0.0, 0.0],
                        "best_of_n[critic]": [0.0, 0.5, 0.0, 0.0, 0.0]}
    assert [by[("maj", b)]["tokens_per_problem"] for b in BUDGETS] == [5, 9, 16, 23, 30]  # the cut sample counts
    # the critic checked the kept samples only: 0, 1, 2, 3, 4 of them
    assert [by[("weighted_maj[critic]", b)]["verifier_tokens_per_problem"] for b in BUDGETS] == [0, 3, 6, 9, 12]
    assert "verifier_tokens_per_problem" not in by[("weighted_maj", 30)]
    assert "vs" not in by[("maj", 9)] and by[("weighted_maj", 23)]["vs"]["difference"] == pytest.approx(0.5)
    assert by[("weighted_maj", 9)]["vs"]["difference"] == 0.0  # against maj at the same budget
    first = records[0]
    assert first["gold"] == GOLD and "samples" not in first
    assert {(run["method"], run["budget"]) for run in first["runs"]} == set(by)


def test_the_curves_are_what_separate_capped_runs_give():
    rows, _ = pool_curves(records_of(scorers()), BUDGETS)
    methods = [SearchSettings(method=m, n=4) for m in ("maj", "weighted_maj", "best_of_n")]
    capped = evaluate_curves(ScriptedPolicy({"": SAMPLES}), env(), methods, BUDGETS, scorers()["default"],
                             episodes=2, batch_problems=1, baseline="maj")
    pooled = {(r["method"], r["budget"]): (r["accuracy"], r["tokens_per_problem"]) for r in rows}
    assert {(r["method"], r["budget"]): (r["accuracy"], r["tokens_per_problem"]) for r in capped} == {
        key: value for key, value in pooled.items() if "[" not in key[0]}


def test_a_budget_past_the_pool_spends_the_whole_pool_and_says_so():
    rows, _ = pool_curves(records_of(scorers()), [30, 60])
    assert [r["tokens_per_problem"] for r in rows if r["method"] == "maj"] == [30, 30]


@pytest.mark.parametrize("budgets, message", [([], "pool_curves: budgets is empty"),
                                              ([0], "pool_curves: budgets must be integers >= 1"),
                                              ([9, 9], "pool_curves: budgets repeat a value")])
def test_bad_budgets_are_one_line(budgets, message):
    with pytest.raises(ValueError, match=message):
        pool_curves(records_of(scorers()), budgets)


def test_records_without_a_pool_are_one_line():
    with pytest.raises(ValueError, match="pool_curves: no problem records"):
        pool_curves([], [8])
    records = records_of(scorers())
    del records[1]["samples"]["tokens"]
    with pytest.raises(ValueError, match=r"record 1 has no per-sample tokens \(samples.tokens\)"):
        pool_curves(records, [8])
    records = records_of(scorers())
    first = sorted(records[0]["samples"]["scores"])
    records[1]["samples"]["scores"].pop(first[-1])
    with pytest.raises(ValueError, match=rf"record 1 is scored by .*, record 0 by {', '.join(first)}: one pool has"):
        pool_curves(records, [8])
    with pytest.raises(ValueError, match="scorers_on_pool: record 1 is scored by"):
        scorers_on_pool(records)


def test_pool_scorers_tell_problems_apart_from_samples_by_hand():
    def record(correct, default, critic):
        n = len(correct)
        return {"samples": {"answers": ["1"] * n, "correct": correct, "tokens": [5] * n,
                            "scores": {"default": default, "critic": critic}}}
    # the default scorer scores the easy problem's samples 0.9 and the hard one's 0.1: it tells the problems apart
    # (over every sample: 2 right of 0.9 against the wrong 0.9 (ties) and the two 0.1s; 0.1 right ties the 0.1s)
    # but never one problem's samples; the critic ranks within each problem; the third problem has no right sample
    records = [record([True, True, False], [0.9, 0.9, 0.9], [0.8, 0.7, 0.2]),
               record([False, False, True], [0.1, 0.1, 0.1], [0.3, 0.1, 0.4]),
               record([False, False], [0.5, 0.5], [0.5, 0.5])]
    rows = {r["scorer"]: r for r in scorers_on_pool(records)}
    assert rows["default"]["within_problem_auc"] == 0.5 and rows["critic"]["within_problem_auc"] == 1.0
    # default over every sample: positives 0.9, 0.9, 0.1 against negatives 0.9, 0.1, 0.1, 0.5, 0.5:
    # each 0.9 gets 0.5 + 1 + 1 + 1 + 1 = 4.5, the 0.1 gets 0 + 0.5 + 0.5 = 1: 10 of 15 pairs
    assert rows["default"]["auc"] == pytest.approx(10 / 15)
    assert rows["critic"]["mixed_problems"] == 2 and rows["critic"]["problems"] == 3
    assert rows["critic"]["reach"] == pytest.approx(2 / 3) and rows["critic"]["sample_accuracy"] == pytest.approx(3 / 8)
    table = scorers_on_pool_markdown(list(rows.values()))
    assert table.splitlines()[2] == "| default | 0.667 | 0.500 | 2 of 3 | 66.7% | 37.5% |"
    with pytest.raises(ValueError, match="scorers_on_pool: no problem records"):
        scorers_on_pool([])
