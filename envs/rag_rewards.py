"""Reward functions of the HotpotQA envs: exact match, F1, MRR of the retrieval, answer similarity, format.

Each is a per-sample reward ``fn(completion, gold, info) -> float`` reading what the env put in ``info``:

- ``exact_match_reward`` / ``f1_reward``: SQuAD exact match and HotpotQA's F1 (``envs.qa_metrics``) of
  ``info["parsed_answer"]`` (the text of the last ``<answer>...</answer>``) against the gold; 0.0 without
  an answer.
- ``mrr_reward``: the reciprocal rank of the first supporting paragraph (``info["supporting_titles"]``)
  among every passage the episode retrieved (``info["retrieved"]``, in the order retrieved: search 1's
  top k, then search 2's, ...; a passage retrieved twice takes two places, as in the transcript); 0.0
  when none was retrieved. Averaged over episodes this is the MRR, as ``retrieval.metrics`` defines it.
- ``answer_similarity_reward(embedder)``: a reward function giving the cosine similarity of the
  embeddings of the answer and the gold, clipped below at 0 (as the seed's ``get_answer_similarity``);
  0.0 without an answer. ``embedder`` is anything with ``embed(texts) -> array [len(texts), dim]``
  (``retrieval``'s ``Embedder`` protocol), so tests pass a tiny deterministic one.
- ``format_reward``: 1.0 for an episode that ends with a complete ``<answer>...</answer>``, 0.0 otherwise,
  minus ``info["format_penalty"]`` (the env's penalty per malformed call times the number of malformed
  calls in the episode, see ``envs/rag.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from envs.qa_metrics import exact_match, hotpot_f1
from envs.rewards import RewardFn

__all__ = [
    "Embedder",
    "answer_similarity_reward",
    "cosine_similarity",
    "exact_match_reward",
    "f1_reward",
    "format_reward",
    "mrr_reward",
    "reciprocal_rank",
]


@runtime_checkable
class Embedder(Protocol):
    """What the answer-similarity reward needs of an embedder (``retrieval``'s embedders have it)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text: array [len(texts), dim]."""


def exact_match_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """1.0 if the parsed answer equals the gold after SQuAD normalisation, else 0.0 (no answer: 0.0)."""
    answer = info.get("parsed_answer")
    return 0.0 if answer is None else exact_match(answer, gold)


def f1_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """HotpotQA's token F1 of the parsed answer against the gold (no answer: 0.0)."""
    answer = info.get("parsed_answer")
    return 0.0 if answer is None else hotpot_f1(answer, gold)


def reciprocal_rank(retrieved_titles: Sequence[str], relevant_titles: Sequence[str]) -> float:
    """1 / (1-based position of the first relevant title in ``retrieved_titles``); 0.0 when none is there.

    ``retrieval.metrics.reciprocal_rank`` (imported here, not at module load: the retrieval package is heavy),
    except that a question naming no relevant title scores 0.0 where that metric refuses it."""
    from retrieval.metrics import reciprocal_rank as ranked

    return ranked(retrieved_titles, relevant_titles) if relevant_titles else 0.0


def mrr_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """Reciprocal rank of the first supporting paragraph among everything the episode retrieved."""
    titles = [passage["title"] for passage in info.get("retrieved", ())]
    return reciprocal_rank(titles, info.get("supporting_titles", ()))


def format_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """1.0 for a final ``<answer>...</answer>`` (0.0 without), minus the episode's format penalty."""
    answered = 1.0 if info.get("parsed_answer") is not None else 0.0
    return answered - float(info.get("format_penalty", 0.0))


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two vectors; 0.0 when either is all zeros.

    Two lines of numpy rather than sklearn's ``cosine_similarity`` or sentence-transformers'
    ``util.cos_sim``: those take matrices (or torch tensors) and the reward compares two vectors.
    """
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norms if norms > 0 else 0.0


def answer_similarity_reward(embedder: Embedder) -> RewardFn:
    """A reward function: max(0, cosine of the embeddings of the parsed answer and the gold); no answer: 0.0."""
    if not isinstance(embedder, Embedder):
        raise ValueError(f"embedder must have an embed(texts) -> array method; got {type(embedder).__name__}")

    def answer_similarity(completion: str, gold: str, info: Mapping[str, Any]) -> float:
        answer = info.get("parsed_answer")
        if answer is None:
            return 0.0
        vectors = np.asarray(embedder.embed([answer, gold]))
        if vectors.ndim != 2 or vectors.shape[0] != 2:
            raise ValueError(f"embedder.embed returned shape {vectors.shape} for 2 texts; expected (2, dim)")
        return max(0.0, cosine_similarity(vectors[0], vectors[1]))

    return answer_similarity
