"""Ranking and fusion of per-document score vectors (numpy), and retrieval quality of a ranking against a set
of relevant titles (HotpotQA: the supporting paragraphs' titles): recall@k and MRR.

Written here rather than taken from a library: `ranx.fuse` offers both fusions but works on run
dictionaries and pulls in numba; sentence-transformers' `util.semantic_search` and bm25s's `retrieve`
return only top-k lists, while weighted fusion needs every document's score. Each function is a few
lines of numpy on arrays the store already has.

The metrics take the retrieved titles in rank order; a title retrieved twice (chunks of one paragraph) takes
two positions, as it would in a prompt.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the `k` highest scores, best first; ties go to the lower index (a stable sort).

    Exactly the first `k` of a stable argsort of `-scores`, found by a partial selection: the k-th best
    value, then a stable sort of the documents scoring at least that (every tie included, in index order).
    A stable sort of all n scores costs ~20x more at n = 10^4."""
    negated = -np.asarray(scores)
    if k >= len(negated) or k < 1:
        return np.argsort(negated, kind="stable")[:k]
    kth = np.partition(negated, k - 1)[k - 1]
    if np.isnan(kth):  # fewer than k numbers: NaNs sort last, as the full sort puts them
        return np.argsort(negated, kind="stable")[:k]
    candidates = np.flatnonzero(negated <= kth)
    return candidates[np.argsort(negated[candidates], kind="stable")][:k]


def minmax_normalise(scores: np.ndarray) -> np.ndarray:
    """Scores mapped linearly onto [0, 1] (lowest -> 0, highest -> 1); all equal -> all 0."""
    scores = np.asarray(scores, dtype=np.float64)
    low, span = scores.min(), np.ptp(scores)
    return np.zeros_like(scores) if span == 0 else (scores - low) / span


def weighted_fusion(score_lists: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """Sum over methods of weight * min-max-normalised scores (each vector covers every document)."""
    if len(score_lists) != len(weights) or not score_lists:
        raise ValueError(f"weighted fusion needs one weight per score list, got {len(weights)} weights "
                         f"for {len(score_lists)} lists")
    return sum(w * minmax_normalise(s) for s, w in zip(score_lists, weights))


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], num_docs: int, k: int = 60) -> np.ndarray:
    """RRF (Cormack et al., 2009): each document scores the sum over rankings of 1 / (k + rank), rank
    counted from 1 in each ranking (document indices, best first) it appears in; 0 if in none."""
    if k < 0:
        raise ValueError(f"the RRF constant k must be >= 0, got {k}")
    fused = np.zeros(num_docs, dtype=np.float64)
    for ranking in rankings:
        ranking = np.asarray(ranking, dtype=np.int64)
        np.add.at(fused, ranking, 1.0 / (k + np.arange(1, len(ranking) + 1)))
    return fused


def _check(relevant: Collection[str]) -> set[str]:
    relevant = set(relevant)
    if not relevant:
        raise ValueError("retrieval metrics need at least one relevant title")
    return relevant


def recall_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Fraction of the relevant titles found among the first `k` retrieved."""
    if k < 1:
        raise ValueError(f"recall@k needs k >= 1, got {k}")
    relevant = _check(relevant)
    return len(relevant.intersection(retrieved[:k])) / len(relevant)


def reciprocal_rank(retrieved: Sequence[str], relevant: Collection[str]) -> float:
    """1 / (1-based rank of the first relevant title retrieved), 0 when none is; its mean over queries
    is the MRR."""
    relevant = _check(relevant)
    return next((1.0 / rank for rank, title in enumerate(retrieved, start=1) if title in relevant), 0.0)


def mean_reciprocal_rank(retrieved_lists: Sequence[Sequence[str]], relevant_lists: Sequence[Collection[str]]
                         ) -> float:
    """MRR: the mean of `reciprocal_rank` over queries (one retrieved list and one relevant set each)."""
    if len(retrieved_lists) != len(relevant_lists) or not retrieved_lists:
        raise ValueError(f"MRR needs one relevant set per query and at least one query, got "
                         f"{len(retrieved_lists)} retrieved lists and {len(relevant_lists)} relevant sets")
    return sum(map(reciprocal_rank, retrieved_lists, relevant_lists)) / len(retrieved_lists)
