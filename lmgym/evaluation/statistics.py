"""How sure a comparison is: a paired bootstrap interval of the difference of two methods' per-problem scores, and
a metric's mean and spread over seeds.

Two methods scored on the same problems (0/1 correct, or a float such as F1) are compared problem by problem:
`paired_bootstrap` resamples the problems with replacement, each resample keeping a problem's two scores
together, and reports the percentile interval of mean(a) - mean(b) over the resamples (scipy.stats.bootstrap
with `paired=True`). An interval above 0 says a beats b on problems like these; one holding 0, that these
problems cannot tell them apart. The percentile method, not BCa: BCa is undefined when every resample gives
the same difference (two identical lists), where the percentile interval is [0, 0].

Training runs that differ only in their seed are compared by `compare_seeds`: each method's mean and spread
(`seed_spread`) and Welch's t interval of the difference of the two means (unequal variances, Welch-Satterthwaite
degrees of freedom). Five seeds are too few for a bootstrap's percentiles to mean much; the t interval is the
usual one for a handful of runs, and it is exact to compute by hand. When each run also kept its per-problem
outcomes on one shared set of problems, `seed_mean_paired` pairs the methods problem by problem on each problem's
share right averaged over the seeds: it sees the problems' variance, where the seeds' t interval sees the runs'.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class PairedDifference:
    """mean(a) - mean(b) over the problems, and its bootstrap interval [low, high] at `confidence`."""

    difference: float
    low: float
    high: float
    confidence: float
    problems: int
    n_resamples: int


@dataclasses.dataclass(frozen=True)
class SeedSpread:
    """A metric over runs that differ only in their seed: mean, sample standard deviation (ddof 1; 0.0 for one
    seed), smallest and largest value."""

    mean: float
    std: float
    low: float
    high: float
    seeds: int


@dataclasses.dataclass(frozen=True)
class SeedComparison:
    """A method against a baseline over seeds: each one's `SeedSpread`, mean(method) - mean(baseline) and its
    Welch t interval [low, high] at `confidence` (nan when either side has one seed: no spread to judge by)."""

    method: SeedSpread
    baseline: SeedSpread
    difference: float
    low: float
    high: float
    confidence: float


def _scores(values: Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or not np.isfinite(array).all():
        raise ValueError(f"{name}: needs a flat list of finite per-problem scores")
    return array


def paired_bootstrap(a: Sequence[float], b: Sequence[float], n_resamples: int = 10_000, confidence: float = 0.95,
                     seed: int = 0) -> PairedDifference:
    """The paired bootstrap interval of mean(a) - mean(b), where a[i] and b[i] score problem i (0/1 or float);
    `n_resamples` resamples of the problems drawn by numpy's generator seeded with `seed` (same inputs and seed,
    same interval)."""
    first, second = _scores(a, "paired_bootstrap a"), _scores(b, "paired_bootstrap b")
    if len(first) != len(second):
        raise ValueError(f"paired_bootstrap: {len(first)} scores for a but {len(second)} for b (one each a problem)")
    if len(first) < 2:
        raise ValueError("paired_bootstrap: needs the scores of 2 or more problems")
    if n_resamples < 1 or not 0 < confidence < 1:
        raise ValueError(f"paired_bootstrap: needs n_resamples >= 1 and 0 < confidence < 1; got {n_resamples}, "
                         f"{confidence}")
    from scipy.stats import bootstrap  # imported here: only comparisons need scipy

    result = bootstrap((first, second), lambda x, y, axis: np.mean(x - y, axis=axis), paired=True,
                       vectorized=True, n_resamples=n_resamples, confidence_level=confidence, method="percentile",
                       rng=np.random.default_rng(seed))
    interval = result.confidence_interval
    return PairedDifference(float(np.mean(first - second)), float(interval.low), float(interval.high), confidence,
                            len(first), n_resamples)


def seed_mean_scores(runs: Sequence[Sequence[dict]]) -> tuple[list[str], np.ndarray]:
    """The problem ids of the runs' records (problem records: `id`, `c` right of `n`) and each problem's share
    right, averaged over the runs; every run must list the same problems in the same order (ValueError naming the
    first that does not)."""
    if not runs:
        raise ValueError("seed_mean_scores: no runs")
    ids = [str(r["id"]) for r in runs[0]]
    for k, run in enumerate(runs[1:], start=1):
        other = [str(r["id"]) for r in run]
        if other != ids:
            at = next((i for i, (a, b) in enumerate(zip(ids, other)) if a != b), min(len(ids), len(other)))
            raise ValueError(f"seed_mean_scores: run {k} lists other problems than run 0 (from position {at}: "
                             f"{len(other)} against {len(ids)} problems)")
    shares = np.array([[r["c"] / r["n"] for r in run] for run in runs], dtype=float)
    return ids, shares.mean(axis=0)


def seed_mean_paired(method_runs: Sequence[Sequence[dict]], baseline_runs: Sequence[Sequence[dict]],
                     **bootstrap: float) -> PairedDifference:
    """The paired bootstrap (over problems) of the method's share right averaged over its seeds minus the
    baseline's, from each run's problem records; both sides must list the same problems."""
    ids, method = seed_mean_scores(method_runs)
    base_ids, baseline = seed_mean_scores(baseline_runs)
    if ids != base_ids:
        raise ValueError("seed_mean_paired: the method's runs and the baseline's list other problems")
    return paired_bootstrap(method, baseline, **bootstrap)


def seed_spread(values: Sequence[float]) -> SeedSpread:
    """Mean and spread of one metric over seeds (one value a seed)."""
    array = _scores(values, "seed_spread")
    if len(array) == 0:
        raise ValueError("seed_spread: no values")
    std = float(np.std(array, ddof=1)) if len(array) > 1 else 0.0
    return SeedSpread(float(np.mean(array)), std, float(array.min()), float(array.max()), len(array))


def compare_seeds(method: Sequence[float], baseline: Sequence[float], confidence: float = 0.95) -> SeedComparison:
    """`method`'s runs (one value a seed) against `baseline`'s: both spreads, the difference of the means and
    Welch's t interval of it. Two runs whose values are all equal on both sides give the interval
    [difference, difference]."""
    if not 0 < confidence < 1:
        raise ValueError(f"compare_seeds: needs 0 < confidence < 1; got {confidence}")
    first, second = seed_spread(method), seed_spread(baseline)
    difference = first.mean - second.mean
    if first.seeds < 2 or second.seeds < 2:
        return SeedComparison(first, second, difference, float("nan"), float("nan"), confidence)
    va, vb = first.std ** 2 / first.seeds, second.std ** 2 / second.seeds
    if va + vb == 0:
        return SeedComparison(first, second, difference, difference, difference, confidence)
    from scipy.stats import t  # imported here: only comparisons need scipy

    dof = (va + vb) ** 2 / (va ** 2 / (first.seeds - 1) + vb ** 2 / (second.seeds - 1))
    half = float(t.ppf(0.5 + confidence / 2, dof)) * float(np.sqrt(va + vb))
    return SeedComparison(first, second, difference, difference - half, difference + half, confidence)


def interval_text(difference: float, low: float, high: float, points: bool = True) -> str:
    """"+2.9 [+0.8, +5.1]": a difference and its interval, in points (x 100) when `points`; "n/a" bounds as such."""
    scale = 100 if points else 1

    def form(value: float) -> str:
        return "n/a" if not np.isfinite(value) else f"{scale * value:+.1f}" if points else f"{value:+.3f}"
    return f"{form(difference)} [{form(low)}, {form(high)}]"
