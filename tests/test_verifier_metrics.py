"""Verifier metrics against hand values: accuracy at 0.5, ROC AUC (ties count half), ECE over equal-width
bins and the reliability table."""
from __future__ import annotations

import random

import pytest

from lmgym.evaluation.verifier_metrics import (
    ReliabilityBin,
    auc_interval,
    expected_calibration_error,
    reliability_table,
    roc_auc,
    verifier_metrics,
    within_problem_auc,
)


def test_auc_by_hand_with_ties_and_one_class():
    # positives 0.35, 0.8 against negatives 0.1, 0.4: 0.35 beats 0.1 only, 0.8 beats both -> 3 of 4 pairs
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    # positives 0.5, 0.9 against negatives 0.5, 0.2: 0.5 ties 0.5 (half), beats 0.2; 0.9 beats both -> 3.5 / 4
    assert roc_auc([0.5, 0.5, 0.2, 0.9], [True, False, False, True]) == 0.875
    assert roc_auc([0.2, 0.7], [1, 1]) is None


def test_ece_reliability_and_accuracy_by_hand():
    scores, labels = [0.05, 0.15, 0.12, 0.95, 1.0], [0, 1, 0, 1, 1]
    # bins [0, .1): 0.05 (rate 0); [.1, .2): 0.15, 0.12 (mean .135, rate .5); [.9, 1]: 0.95, 1.0 (mean .975, rate 1)
    table = reliability_table(scores, labels)
    assert [(b.lower, b.upper, b.count) for b in table] == [(0.0, 0.1, 1), (0.1, 0.2, 2), (0.9, 1.0, 2)]
    assert [b.mean_score for b in table] == pytest.approx([0.05, 0.135, 0.975])
    assert [b.positive_rate for b in table] == [0.0, 0.5, 1.0]
    ece = (1 * 0.05 + 2 * 0.365 + 2 * 0.025) / 5  # 0.166
    assert expected_calibration_error(scores, labels) == pytest.approx(ece)
    metrics = verifier_metrics(scores, labels)
    # predictions (score > 0.5) 0, 0, 0, 1, 1 against 0, 1, 0, 1, 1: 4 of 5; every positive above every negative
    assert (metrics.count, metrics.positives, metrics.accuracy, metrics.auc) == (5, 3, 0.8, 1.0)
    assert metrics.ece == pytest.approx(ece) and metrics.reliability == table
    assert metrics.as_dict("eval_") == pytest.approx({"eval_count": 5.0, "eval_positive_rate": 0.6,
                                                      "eval_accuracy": 0.8, "eval_ece": ece, "eval_auc": 1.0})
    # soft labels (a step's MC success rate) calibrate too: |0.3 - 0.25| and |0.7 - 0.5| over 2 bins
    assert expected_calibration_error([0.3, 0.7], [0.25, 0.5], bins=2) == pytest.approx(0.125)
    assert reliability_table([0.3], [1], bins=2) == (ReliabilityBin(0.0, 0.5, 1, 0.3, 1.0),)


def test_auc_agrees_with_scikit_learn_where_it_is_installed():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(0)
    scores = [round(rng.random(), 1) for _ in range(200)]  # rounded: many ties
    labels = [int(rng.random() < s) for s in scores]
    assert roc_auc(scores, labels) == pytest.approx(metrics.roc_auc_score(labels, scores))


@pytest.mark.parametrize("scores, labels, message", [
    ([0.5, 0.5], [1], "2 scores but 1 labels"),
    ([], [], "no scores"),
    ([1.2], [1], "scores must be finite numbers in \\[0, 1\\]"),
    ([0.5, 0.5], [0.5, 1], "labels must be 0 or 1"),
])
def test_bad_input_is_one_line(scores, labels, message):
    with pytest.raises(ValueError, match=message):
        verifier_metrics(scores, labels)
    with pytest.raises(ValueError, match="bins must be an int >= 1, got 0"):
        reliability_table([0.5], [1], bins=0)


def test_auc_interval_over_problems_by_hand():
    # problem A ranks its right sample above its wrong one, B the other way; a resample of AA has AUC 1, BB 0,
    # AB 3/4 (0.9 > 0.1, 0.8; 0.2 > 0.1 only): the 95% interval runs from 0 to 1, the whole AUC is 3/4
    scores, labels = [[0.9, 0.1], [0.2, 0.8]], [[1, 0], [1, 0]]
    assert roc_auc([0.9, 0.1, 0.2, 0.8], [1, 0, 1, 0]) == 0.75
    assert auc_interval(scores, labels, n_resamples=400, seed=1) == (0.0, 1.0)
    # every problem separates its samples, and across problems too: every resample's AUC is 1
    assert auc_interval([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]], [[1, 0]] * 3, n_resamples=50) == (1.0, 1.0)
    assert auc_interval(scores, labels, seed=3) == auc_interval(scores, labels, seed=3)  # seeded
    assert auc_interval([[0.2, 0.7], [0.5]], [[1, 1], [1]]) is None  # one class: no AUC in any resample
    assert auc_interval([[0.9, 0.1]], [[1, 0]]) is None  # one problem: nothing to resample
    with pytest.raises(ValueError, match="one length per problem"):
        auc_interval([[0.9, 0.1]], [[1]])


def test_within_problem_auc_by_hand():
    # A: right 0.9 vs wrong 0.2, 0.9 -> 1 + 0.5 (tie) of 2; B: right 0.3, 0.6 vs wrong 0.5 -> 0 + 1 of 2;
    # C: all wrong and D: all right hold no pair; E has no samples. Pooled: 2.5 of 4 pairs, over 2 mixed problems
    scores = [[0.9, 0.2, 0.9], [0.3, 0.5, 0.6], [0.8, 0.7], [0.1], []]
    labels = [[1, 0, 0], [1, 0, 1], [0, 0], [1], []]
    assert within_problem_auc(scores, labels) == (0.625, 2)
    # problems told apart but never their samples: the easy problem's samples (two right of three) all score 0.9,
    # the hard one's (one right of three) 0.1: over all samples 6 of 9 pairs, within problems ties only
    easy_hard = [[0.9, 0.9, 0.9], [0.1, 0.1, 0.1]], [[1, 1, 0], [0, 0, 1]]
    assert within_problem_auc(*easy_hard) == (0.5, 2)
    assert roc_auc([0.9, 0.9, 0.9, 0.1, 0.1, 0.1], [1, 1, 0, 0, 0, 1]) == pytest.approx(6 / 9)
    assert within_problem_auc([[0.4, 0.6]], [[1, 1]]) is None
    with pytest.raises(ValueError, match="one length per problem"):
        within_problem_auc([[0.9, 0.1]], [[1]])
    with pytest.raises(ValueError, match="scores must be finite numbers"):
        within_problem_auc([[1.5, 0.1]], [[1, 0]])
