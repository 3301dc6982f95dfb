"""evaluation/statistics.py against known answers: the paired bootstrap interval of a difference of per-problem
scores (identical lists: [0, 0]; a clear win: above 0; seeded: the same interval again), and the spread over seeds."""
import itertools
import math

import numpy as np
import pytest

from lmgym.evaluation import compare_seeds, interval_text, paired_bootstrap, seed_spread


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


def _exact_percentile_interval(differences, confidence=0.95):
    """The bootstrap distribution of the mean difference enumerated by hand: all n**n resamples of n problems,
    equally likely; the interval is its (1 - c)/2 and (1 + c)/2 quantiles (lowest value whose cumulative
    probability reaches them)."""
    n = len(differences)
    means = sorted(sum(differences[i] for i in picks) / n for picks in itertools.product(range(n), repeat=n))
    tail = (1 - confidence) / 2

    def quantile(q):
        return means[min(int(math.ceil(q * len(means))) - 1, len(means) - 1)]
    return quantile(tail), quantile(1 - tail)


@pytest.mark.parametrize("a, b, expected", [
    # differences [1, 1, 1, 0, 0]: resample mean k/5, k ~ Binomial(5, 0.6): P(k=0) 1.0% < 2.5% < P(k<=1) 8.7%,
    # P(k<=4) 92.2% < 97.5%: the interval is [0.2, 1.0]
    ([1, 1, 1, 0, 1], [0, 0, 0, 0, 1], (0.2, 1.0)),
    # differences [1, 0, 0, 0, 0]: k ~ Binomial(5, 0.2): P(k<=2) 94.2% < 97.5% < P(k<=3) 99.4%: [0.0, 0.6]
    ([1, 0, 0, 0, 0], [0, 0, 0, 0, 0], (0.0, 0.6)),
    # differences [1, -1, 0, 0, 0] (one problem each way): symmetric, [-0.4, 0.4] by enumeration
    ([1, 0, 1, 0, 1], [0, 1, 1, 0, 1], None),
])
def test_the_interval_matches_the_enumerated_bootstrap_distribution(a, b, expected):
    differences = [x - y for x, y in zip(a, b)]
    exact = _exact_percentile_interval(differences)
    if expected is not None:
        assert exact == pytest.approx(expected)
    result = paired_bootstrap(a, b, n_resamples=20_000, seed=5)
    assert result.difference == pytest.approx(sum(differences) / len(differences))
    # the quantiles sit inside blocks of equal resample means, so 20,000 resamples land on them exactly
    assert (result.low, result.high) == pytest.approx(exact, abs=1e-9)


def test_seeds_compared_by_welch_t_interval_against_hand_numbers():
    """method [0.30, 0.34, 0.32, 0.36, 0.28] vs baseline [0.20, 0.26, 0.22, 0.18, 0.24]: means 0.32 and 0.22,
    sample variances 0.001 each, so the standard error is sqrt(0.001/5 + 0.001/5) = 0.02 with 8 degrees of
    freedom, t(0.975, 8) = 2.306004: the interval is 0.10 +- 0.04612."""
    result = compare_seeds([0.30, 0.34, 0.32, 0.36, 0.28], [0.20, 0.26, 0.22, 0.18, 0.24])
    assert (result.method.mean, result.baseline.mean, result.difference) == pytest.approx((0.32, 0.22, 0.10))
    assert result.method.std == pytest.approx(math.sqrt(0.001)) and result.method.seeds == 5
    assert (result.low, result.high) == pytest.approx((0.10 - 2.306004 * 0.02, 0.10 + 2.306004 * 0.02), abs=1e-6)
    assert interval_text(result.difference, result.low, result.high) == "+10.0 [+5.4, +14.6]"


def test_seeds_compared_with_unequal_spreads_and_edge_cases():
    # Welch: variances 0.0025 (n=4) and 0.0001 (n=3); se^2 = 0.000625 + 0.0000333; dof by Welch-Satterthwaite
    a, b = [0.1, 0.2, 0.15, 0.15], [0.1, 0.11, 0.12]
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 3
    dof = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 2)
    from scipy.stats import t
    half = t.ppf(0.975, dof) * math.sqrt(va + vb)
    result = compare_seeds(a, b)
    assert (result.low, result.high) == pytest.approx((0.04 - half, 0.04 + half))
    same = compare_seeds([0.5, 0.5], [0.4, 0.4])
    assert (same.low, same.high) == pytest.approx((0.1, 0.1))
    one = compare_seeds([0.5], [0.4, 0.3])
    assert math.isnan(one.low) and math.isnan(one.high) and one.difference == pytest.approx(0.15)
    assert interval_text(one.difference, one.low, one.high) == "+15.0 [n/a, n/a]"
    with pytest.raises(ValueError, match="confidence"):
        compare_seeds([0.1, 0.2], [0.1, 0.2], confidence=1.5)


def records(outcomes: list[int], ids: tuple[str, ...] = ("p0", "p1", "p2")) -> list[dict]:
    return [{"kind": "sampled", "id": i, "c": c, "n": 1} for i, c in zip(ids, outcomes)]


def test_seeds_paired_over_problems_on_each_problems_share_right_over_the_seeds():
    from lmgym.evaluation import seed_mean_paired

    method = [records([1, 0, 1]), records([1, 1, 0])]  # shares right over the two seeds: 1, 0.5, 0.5
    baseline = [records([0, 0, 1]), records([0, 0, 1])]  # 0, 0, 1
    d = seed_mean_paired(method, baseline)
    assert d.difference == pytest.approx((1 + 0.5 - 0.5) / 3) and d.problems == 3
    same = paired_bootstrap([1.0, 0.5, 0.5], [0.0, 0.0, 1.0])
    assert (d.low, d.high) == pytest.approx((same.low, same.high))
    with pytest.raises(ValueError, match="run 1 lists other problems than run 0"):
        seed_mean_paired([records([1, 0, 1]), records([1, 0, 1], ids=("p0", "p2", "p1"))], baseline)
    with pytest.raises(ValueError, match="the method's runs and the baseline's list other problems"):
        seed_mean_paired(method, [records([0, 0, 1], ids=("q0", "q1", "q2"))])
