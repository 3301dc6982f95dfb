"""How well a verifier's scores in [0, 1] predict binary labels (a solution's correctness, a step's label):
accuracy at a threshold, ROC AUC, and calibration (expected calibration error over equal-width bins, with
the reliability table it comes from).

AUC is the Mann-Whitney statistic: the chance that a random positive scores above a random negative, ties
counting half (scikit-learn's roc_auc_score gives the same; it is an optional dependency here, so the few
lines of rank arithmetic live in this file). It is None when the labels hold one class only. `auc_interval` is
its bootstrap interval over problems (a problem's samples are drawn together): with few right solutions among
the held-out samples, the AUC alone says little.

`within_problem_auc` is what reranking needs: the AUC over (right, wrong) pairs of samples of the SAME problem.
The AUC over all samples also rewards telling easy problems from hard ones, which never changes a choice among
one problem's samples (the thirty-second session's lease: 0.92 over all of the budgeted SFT's samples, 0.69
within problems, and no reranking gain).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of the reliability table: scores in [lower, upper) ([lower, 1] for the last), how many, their
    mean score and the fraction of them labelled positive."""

    lower: float
    upper: float
    count: int
    mean_score: float
    positive_rate: float


@dataclass(frozen=True)
class VerifierMetrics:
    """Accuracy at `threshold`, ROC AUC (None: one class only), ECE, and the reliability table (empty bins
    left out), over `count` items of which `positives` are labelled 1."""

    count: int
    positives: int
    accuracy: float
    auc: float | None
    ece: float
    reliability: tuple[ReliabilityBin, ...]
    threshold: float = 0.5

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        """The scalar metrics for logging, names prefixed (AUC left out when None)."""
        values = {"count": self.count, "positive_rate": self.positives / self.count, "accuracy": self.accuracy,
                  "ece": self.ece}
        if self.auc is not None:
            values["auc"] = self.auc
        return {f"{prefix}{k}": float(v) for k, v in values.items()}


def _checked(scores: Sequence[float], labels: Sequence[float | bool], binary: bool = True
             ) -> tuple[np.ndarray, np.ndarray]:
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    if s.ndim != 1 or s.shape != y.shape:
        raise ValueError(f"verifier metrics: {s.size} scores but {y.size} labels (two flat lists of one length)")
    if s.size == 0:
        raise ValueError("verifier metrics: no scores")
    if not np.all(np.isfinite(s)) or np.any((s < 0) | (s > 1)):
        raise ValueError("verifier metrics: scores must be finite numbers in [0, 1]")
    if binary and not np.all((y == 0) | (y == 1)):
        raise ValueError("verifier metrics: labels must be 0 or 1 (binarise soft labels first)")
    if not np.all((y >= 0) & (y <= 1)):
        raise ValueError("verifier metrics: labels must be numbers in [0, 1]")
    return s, y


def roc_auc(scores: Sequence[float], labels: Sequence[float | bool]) -> float | None:
    """ROC AUC of `scores` against 0/1 `labels` (ties count half); None when only one class is present."""
    s, y = _checked(scores, labels)
    positives, negatives = int(y.sum()), int(y.size - y.sum())
    if positives == 0 or negatives == 0:
        return None
    _, where, counts = np.unique(s, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = ((ends - counts + ends + 1) / 2)[where]  # tied scores share their mean rank (1-based)
    return float((ranks[y == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def reliability_table(scores: Sequence[float], labels: Sequence[float | bool], bins: int = 10
                      ) -> tuple[ReliabilityBin, ...]:
    """The non-empty bins of `bins` equal-width bins over [0, 1] (a score of 1.0 goes to the last). Labels
    may be soft (in [0, 1]: a bin's positive rate is then its mean label, e.g. a step's MC success rate)."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"verifier metrics: bins must be an int >= 1, got {bins!r}")
    s, y = _checked(scores, labels, binary=False)
    index = np.minimum((s * bins).astype(int), bins - 1)
    table = []
    for b in range(bins):
        chosen = index == b
        if chosen.any():
            table.append(ReliabilityBin(b / bins, (b + 1) / bins, int(chosen.sum()), float(s[chosen].mean()),
                                        float(y[chosen].mean())))
    return tuple(table)


def expected_calibration_error(scores: Sequence[float], labels: Sequence[float | bool], bins: int = 10) -> float:
    """ECE: the count-weighted mean over bins of |mean score - positive rate| (soft labels allowed)."""
    table = reliability_table(scores, labels, bins)
    total = sum(b.count for b in table)
    return float(sum(b.count * abs(b.mean_score - b.positive_rate) for b in table) / total)


def within_problem_auc(scores: Sequence[Sequence[float]], labels: Sequence[Sequence[float | bool]]
                       ) -> tuple[float, int] | None:
    """The share of (right, wrong) sample pairs of one problem in which the right one scores higher (ties count
    half), pooled over the pairs of every problem (`scores[i]`, `labels[i]`: problem i's samples), and how many
    problems held both classes. None when none did. A problem's scores must be in [0, 1], labels 0 or 1."""
    if len(scores) != len(labels) or any(len(a) != len(b) for a, b in zip(scores, labels)):
        raise ValueError("within_problem_auc: scores and labels must be lists of one length per problem, alike")
    wins, pairs, mixed = 0.0, 0, 0
    for row_scores, row_labels in zip(scores, labels):
        if not len(row_scores):
            continue
        s, y = _checked(row_scores, row_labels)
        right, wrong = s[y == 1], s[y == 0]
        if right.size and wrong.size:
            difference = right[:, None] - wrong[None, :]
            wins += float((difference > 0).sum() + 0.5 * (difference == 0).sum())
            pairs += difference.size
            mixed += 1
    return None if not pairs else (wins / pairs, mixed)


def verifier_metrics(scores: Sequence[float], labels: Sequence[float | bool], threshold: float = 0.5,
                     bins: int = 10) -> VerifierMetrics:
    """Accuracy (score > threshold predicts 1), ROC AUC, ECE and the reliability table of `scores` against
    0/1 `labels`."""
    if not 0 <= threshold <= 1:
        raise ValueError(f"verifier metrics: threshold must be in [0, 1], got {threshold!r}")
    s, y = _checked(scores, labels)
    table = reliability_table(s, y, bins)
    ece = float(sum(b.count * abs(b.mean_score - b.positive_rate) for b in table) / s.size)
    return VerifierMetrics(int(s.size), int(y.sum()), float(((s > threshold) == (y == 1)).mean()), roc_auc(s, y),
                           ece, table, threshold)


def auc_interval(scores: Sequence[Sequence[float]], labels: Sequence[Sequence[float | bool]],
                 n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> tuple[float, float] | None:
    """The percentile bootstrap interval of `roc_auc` over problems: `scores[i]` and `labels[i]` are problem i's
    samples, and each resample draws problems with replacement (numpy's generator seeded with `seed`), keeping a
    problem's samples together. Resamples holding one class only are left out; None when fewer than half of
    them hold both classes (too few of the scarce label to say)."""
    if len(scores) != len(labels) or any(len(a) != len(b) for a, b in zip(scores, labels)):
        raise ValueError("auc_interval: scores and labels must be lists of one length per problem, alike")
    if n_resamples < 1 or not 0 < confidence < 1:
        raise ValueError(f"auc_interval: needs n_resamples >= 1 and 0 < confidence < 1; got {n_resamples}, "
                         f"{confidence}")
    if len(scores) < 2:
        return None
    flat_s, flat_y = _checked([x for row in scores for x in row], [x for row in labels for x in row])
    ends = np.cumsum([len(row) for row in scores])
    starts = ends - np.asarray([len(row) for row in scores])
    rng, values = np.random.default_rng(seed), []
    for _ in range(n_resamples):
        picked = rng.integers(0, len(scores), len(scores))
        index = np.concatenate([np.arange(starts[i], ends[i]) for i in picked])
        auc = roc_auc(flat_s[index], flat_y[index])
        if auc is not None:
            values.append(auc)
    if len(values) < n_resamples / 2:
        return None
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)
