"""How sure a comparison is: a paired bootstrap interval of the difference of two methods' per-problem scores, and
a metric's mean and spread over seeds.

Two methods scored on the same problems (0/1 correct, or a float such as F1) are compared problem by problem:
`paired_bootstrap` resamples the problems with replacement, each resample keeping a problem's two scores
together, and reports the percentile interval of mean(a) - mean(b) over the resamples (scipy.stats.bootstrap
with `paired=True`). An interval above 0 says a beats b on problems like these; one holding 0, that these
problems cannot tell them apart. The percentile method, not BCa: BCa is undefined when every resample gives
the same difference (two identical lists), where the percentile interval is [0, 0].
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


def seed_spread(values: Sequence[float]) -> SeedSpread:
    """Mean and spread of one metric over seeds (one value a seed)."""
    array = _scores(values, "seed_spread")
    if len(array) == 0:
        raise ValueError("seed_spread: no values")
    std = float(np.std(array, ddof=1)) if len(array) > 1 else 0.0
    return SeedSpread(float(np.mean(array)), std, float(array.min()), float(array.max()), len(array))
