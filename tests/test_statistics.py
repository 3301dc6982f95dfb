"""evaluation/statistics.py against known answers: the paired bootstrap interval of a difference of per-problem
scores (identical lists: [0, 0]; a clear win: above 0; seeded: the same interval again), and the spread over seeds."""
import numpy as np
import pytest

from lmgym.evaluation import paired_bootstrap, seed_spread


def test_identical_score_lists_give_the_interval_zero_zero():
    scores = [1, 0, 1, 1, 0, 1, 0, 0, 1, 1]
    result = paired_bootstrap(scores, scores, n_resamples=500)
    assert (result.difference, result.low, result.high) == (0.0, 0.0, 0.0)
    assert (result.problems, result.n_resamples, result.confidence) == (10, 500, 0.95)


def test_a_clear_win_is_an_interval_above_zero_holding_the_difference():
    a = [1] * 18 + [0] * 2
    b = [1] * 4 + [0] * 16
    result = paired_bootstrap(a, b, n_resamples=2000, seed=3)
    assert result.difference == pytest.approx(0.7)
    assert 0 < result.low < 0.7 < result.high <= 1.0
    swapped = paired_bootstrap(b, a, n_resamples=2000, seed=3)  # the same resamples, the difference negated
    assert (swapped.low, swapped.high) == pytest.approx((-result.high, -result.low))


def test_pairing_counts_only_the_problems_where_the_methods_differ():
    """b is a with one problem flipped from wrong to right: every resample's difference is -k/n for k copies
    of that problem, so the interval lies in [-1, 0] in steps of 1/n and never above 0."""
    a = [1, 1, 0, 1, 0, 1, 1, 0, 1, 1]
    b = [1, 1, 1, 1, 0, 1, 1, 0, 1, 1]
    result = paired_bootstrap(a, b, n_resamples=1000, seed=0)
    assert result.difference == pytest.approx(-0.1)
    assert result.high == 0.0 and -0.4 <= result.low < 0.0
    assert round(result.low * 10) == pytest.approx(result.low * 10)


def test_the_same_seed_gives_the_same_interval_and_float_scores_work():
    rng = np.random.default_rng(7)
    a, b = rng.random(30).tolist(), rng.random(30).tolist()
    first = paired_bootstrap(a, b, n_resamples=300, seed=11)
    assert paired_bootstrap(a, b, n_resamples=300, seed=11) == first
    assert paired_bootstrap(a, b, n_resamples=300, seed=12) != first
    assert first.low < first.difference < first.high
    assert first.difference == pytest.approx(np.mean(a) - np.mean(b))


def test_a_wider_confidence_gives_a_wider_interval():
    a, b = [1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1], [0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 1]
    narrow = paired_bootstrap(a, b, n_resamples=2000, confidence=0.5)
    wide = paired_bootstrap(a, b, n_resamples=2000, confidence=0.99)
    assert wide.low <= narrow.low and narrow.high <= wide.high and (wide.low, wide.high) != (narrow.low, narrow.high)


@pytest.mark.parametrize("a, b, n_resamples, confidence, message", [
    ([1, 0, 1], [1, 0], 100, 0.95, "3 scores for a but 2 for b"),
    ([1], [0], 100, 0.95, "2 or more problems"),
    ([1, 0], [0, float("nan")], 100, 0.95, "finite per-problem scores"),
    ([1, 0], [0, 1], 0, 0.95, "n_resamples >= 1"),
    ([1, 0], [0, 1], 100, 1.0, "0 < confidence < 1"),
])
def test_bad_inputs_are_one_value_error(a, b, n_resamples, confidence, message):
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(a, b, n_resamples=n_resamples, confidence=confidence)


def test_mean_and_spread_over_seeds():
    spread = seed_spread([0.5, 0.7, 0.6])
    assert spread.mean == pytest.approx(0.6) and spread.std == pytest.approx(0.1)
    assert (spread.low, spread.high, spread.seeds) == (0.5, 0.7, 3)
    one = seed_spread([0.42])
    assert (one.mean, one.std, one.low, one.high, one.seeds) == (0.42, 0.0, 0.42, 0.42, 1)
    with pytest.raises(ValueError, match="no values"):
        seed_spread([])
