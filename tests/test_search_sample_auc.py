"""The scorer's AUC on a scored search method's own samples (evaluation/search_eval.py: `sample_auc`): each
sample's score against its verdict, with the interval over problems, on a scripted policy and scorer; only
methods that score their samples carry it."""
import pytest

from lmgym.envs import make
from lmgym.evaluation.search_eval import evaluate_search, sample_auc, sample_auc_table
from lmgym.search import SearchSettings
from tests.search_toys import ScriptedPolicy, ScriptedScorer


def test_a_scored_method_reports_its_scorers_auc_on_the_samples_it_ranked():
    env = make("Arithmetic-v0", level=1, split="test", mode="stepwise", max_steps=2)
    gold = env.get_problem(0).gold
    policy = ScriptedPolicy({"": [f"#### {gold}\n", "#### -1\n", "#### -1\n"]})  # right on problem 0 only
    scorer = ScriptedScorer({f"#### {gold}\n": 0.9, "#### -1\n": 0.1})
    rows = evaluate_search(policy, env, [SearchSettings(method="maj", n=3), SearchSettings(method="best_of_n", n=3),
                                         SearchSettings(method="weighted_maj", n=3)], scorer, episodes=3)
    assert "sample_auc" not in rows[0]  # maj scores nothing
    # 9 samples: problem 0's right one at 0.9; wrong ones at 0.9 (problems 1, 2: problem 0's answer) and 0.1 (6):
    # the right one beats 6 and ties 2 -> (6 + 1) / 8. Resamples holding problem 0 run from 7/8 (0, 1, 1) to 1
    # (0, 0, 0); those without it have no right sample and are left out.
    for row in rows[1:]:
        assert row["sample_auc"] == pytest.approx(7 / 8)
        assert (row["samples_scored"], row["samples_right"]) == (9, 1)
        assert (row["sample_auc_low"], row["sample_auc_high"]) == (pytest.approx(7 / 8), pytest.approx(1.0))
    table = sample_auc_table(rows)
    assert table.splitlines() == ["| method | verifier AUC on its samples [95% CI] | samples (right) |",
                                  "|---|---|---|", "| best_of_3 | 0.875 [0.875, 1.000] | 9 (1) |",
                                  "| weighted_maj@3 | 0.875 [0.875, 1.000] | 9 (1) |"]
    assert sample_auc_table(rows[:1]) == ""


def test_no_scores_or_one_label_gives_no_auc():
    assert sample_auc([{"method": "maj@2", "correct": True}]) is None
    assert sample_auc([{"sample_scores": [0.2, 0.7], "sample_correct": [False, False]}]) is None
    one_problem = sample_auc([{"sample_scores": [0.2, 0.7], "sample_correct": [False, True]}])
    assert one_problem == {"sample_auc": 1.0, "samples_scored": 2, "samples_right": 1}  # no interval of one problem
