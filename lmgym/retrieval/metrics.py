"""Retrieval quality against a set of relevant titles (HotpotQA: the supporting paragraphs' titles).

Both take the retrieved titles in rank order; a title retrieved twice (chunks of one paragraph) takes
two positions, as it would in a prompt.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence


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
