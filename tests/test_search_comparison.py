"""evaluation/search_comparison.py: each method's paired interval against the baseline over the same problems,
at the same budget on curves, and the tables' extra column."""
import pytest

from lmgym.evaluation import paired_bootstrap
from lmgym.evaluation.curves import curves_table
from lmgym.evaluation.search_comparison import versus_baseline, with_intervals
from lmgym.evaluation.search_eval import markdown_table

MAJ = [1, 0, 0, 1, 0, 0, 1, 0]
WEIGHTED = [1, 1, 0, 1, 1, 0, 1, 0]
BEST = [1, 0, 0, 0, 0, 1, 1, 0]


def records(budgets=(None,)):
    out = []
    for i in range(len(MAJ)):
        runs = []
        for budget in budgets:
            for method, own in (("maj@8", MAJ), ("weighted_maj@8", WEIGHTED), ("best_of_8", BEST)):
                run = {"method": method, "correct": bool(own[i]), "tokens": 10, "answer": "1"}
                runs.append(run if budget is None else {**run, "budget": budget})
        out.append({"index": i, "runs": runs})
    return out


def test_each_method_is_compared_with_the_baseline_on_the_same_problems():
    compared = versus_baseline(records(), "maj@8", n_resamples=2000, seed=1)
    assert set(compared) == {("weighted_maj@8", None), ("best_of_8", None)}
    assert compared[("weighted_maj@8", None)] == paired_bootstrap(WEIGHTED, MAJ, n_resamples=2000, seed=1)
    assert compared[("weighted_maj@8", None)].difference == pytest.approx(2 / 8)
    assert compared[("best_of_8", None)].difference == pytest.approx(0.0)
    with pytest.raises(ValueError, match="baseline 'greedy' is not one of the compared methods"):
        versus_baseline(records(), "greedy")


def test_rows_gain_their_interval_and_tables_show_it():
    rows = [{"method": m, "accuracy": sum(v) / 8, "tokens_per_problem": 10.0, "problems": 8, "seconds": 1.0,
             "tokens_per_second": 80.0} for m, v in (("maj@8", MAJ), ("weighted_maj@8", WEIGHTED), ("best_of_8", BEST))]
    assert "vs maj@8" not in markdown_table(rows)  # no comparison asked: the table as before
    compared = with_intervals(rows, records(), "maj@8", n_resamples=2000, seed=1)
    assert "vs" not in compared[0] and compared[1]["vs"]["difference"] == pytest.approx(0.25)
    low, high = compared[1]["vs"]["low"], compared[1]["vs"]["high"]
    assert 0 <= low <= 0.25 <= high <= 1.0  # no problem where the baseline wins: never below 0
    table = markdown_table(compared)
    assert "vs maj@8, points [95% CI]" in table.splitlines()[0]
    assert f"+25.0 [{100 * low:+.1f}, {100 * high:+.1f}]" in table and table.splitlines()[2].endswith("| - |")


def test_curves_compare_at_the_same_budget():
    data = records(budgets=(64, 128))
    for record in data:  # curve names, and at budget 128 weighted_maj is wrong everywhere
        for run in record["runs"]:
            run["method"] = run["method"].split("@")[0].replace("best_of_8", "best_of_n")
            if run["method"] == "weighted_maj" and run["budget"] == 128:
                run["correct"] = False
    rows = [{"method": m, "budget": b, "accuracy": 0.5, "tokens_per_problem": b, "problems": 8}
            for b in (64, 128) for m in ("maj", "weighted_maj", "best_of_n")]
    compared = with_intervals(rows, data, "maj", n_resamples=500)
    by = {(r["method"], r["budget"]): r.get("vs") for r in compared}
    assert by[("maj", 64)] is None and by[("weighted_maj", 64)]["difference"] == pytest.approx(0.25)
    assert by[("weighted_maj", 128)]["difference"] == pytest.approx(-3 / 8)
    assert "vs maj, points" in curves_table(compared).splitlines()[0]
