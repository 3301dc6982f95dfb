"""Reward functions of the HotpotQA envs: exact match, F1, MRR and recall of the retrieval, a cost for
redundant searches, answer similarity, format (lenient and strict).

Each is a per-sample reward ``fn(completion, gold, info) -> float`` reading what the env put in ``info``:

- ``exact_match_reward`` / ``f1_reward``: SQuAD exact match and HotpotQA's F1 (``lmgym.envs.hotpotqa.metrics``) of
  ``info["parsed_answer"]`` (the text of the last ``<answer>...</answer>``) against the gold; 0.0 without
  an answer.
- ``mrr_reward``: the reciprocal rank of the first supporting paragraph (``info["supporting_titles"]``)
  among every passage the episode retrieved (``info["retrieved"]``, in the order retrieved: search 1's
  top k, then search 2's, ...; a passage retrieved twice takes two places, as in the transcript); 0.0
  when none was retrieved. Averaged over episodes this is the MRR, as ``lmgym.retrieval.fusion`` defines it.
- ``answer_similarity_reward(embedder)``: a reward function giving the cosine similarity of the
  embeddings of the answer and the gold, clipped below at 0 (as the seed's ``get_answer_similarity``);
  0.0 without an answer. ``embedder`` is anything with ``embed(texts) -> array [len(texts), dim]``
  (``retrieval``'s ``Embedder`` protocol), so tests pass a tiny deterministic one.
- ``format_reward``: 1.0 for an episode that ends with a complete ``<answer>...</answer>``, 0.0 otherwise,
  minus ``info["format_penalty"]`` (the env's penalty per malformed call times the number of malformed
  calls in the episode, see ``envs/hotpotqa/rag.py``). It pays for any answer, however sloppy the episode around it.

Rewards for searching, which pay for finding the supporting paragraphs without paying more than answering
(the weights decide that: ``DEFAULT_WEIGHTS``), and for the structure only when it is right:

- ``support_recall_reward``: the fraction of the question's distinct supporting titles that are among the
  titles of every passage the episode retrieved; 0.0 with no search (and for a question naming none).
- ``redundant_search_reward``: a small cost, ``-REDUNDANT_SEARCH_COST`` (0.1) per redundant search, at
  most ``-MAX_REDUNDANT_COST`` (0.3) in all. A search is redundant when it retrieved passages and every
  one of their titles was already retrieved by an earlier search of the episode. A search that retrieved
  nothing (a store that failed, or found no passage) costs nothing here: a failed store is not the
  model's doing (trainers count it as a tool error) and a malformed call already costs format.
- ``strict_format_reward``: 1.0 only for a correct structure, else 0.0 (never negative): no malformed
  call; every action but the last is one well-formed search the env ran (text before ``<search>`` allowed,
  exactly one ``<search>`` and one ``</search>``, ending the action, no answer tag); the last action holds
  exactly one ``<answer>...</answer>``, no search tag, nothing but white space after ``</answer>``, and
  ended the episode with an answer. Zero searches then an answer is a correct structure: recall and MRR
  pay for searching. It reads the model's own actions (``info["steps"]``), never the passages the env
  injected (a passage may hold any text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from lmgym.envs.hotpotqa.metrics import exact_match, hotpot_f1
from lmgym.envs.rewards.forms import TRLReward, reads_only, trl_reward
from lmgym.envs.tool_env import ANSWER_CLOSE, ANSWER_OPEN
from lmgym.retrieval.fusion import reciprocal_rank as ranked

SEARCH_OPEN, SEARCH_CLOSE = "<search>", "</search>"
REDUNDANT_SEARCH_COST = 0.1  # per search that found no title the episode had not retrieved already
MAX_REDUNDANT_COST = 0.3  # the cost of an episode's redundant searches is at most this
# The weights of a searching agent's rewards (examples/rag_grpo.py and examples/rag_agent.py, reward
# combination "env"; RAGHotpotQAEnv's own default is equal weights). Answering pays most: em + f1 = 0.6 of
# the 1.0 a perfect episode earns. Finding the supporting paragraphs pays less, mrr + support_recall =
# 0.25, each weight below em's and f1's: an episode that retrieves both paragraphs but answers wrongly
# (F1 0) earns at most 0.4 (with strict_format 0.1 and similarity 0.05), one that answers right having
# found nothing 0.75. So searching pays as a way to answer, never instead of it, and a policy cannot do
# better by farming retrieval. strict_format (0.1) pays for the structure only when every part of it is
# right; the lenient format (1 for any answer, what the first GPU run learned to farm) is logged with
# weight 0. A redundant search costs 0.5 x 0.1 = 0.05 (at most 0.15 an episode), a search that finds any
# new title nothing: a second hop is never discouraged, a repeat is. answer_similarity (dense indexes
# only) is a small hint, 0.05, well below EM and F1.
DEFAULT_WEIGHTS = {"em": 0.3, "f1": 0.3, "mrr": 0.1, "support_recall": 0.15, "redundant_search": 0.5,
                   "format": 0.0, "strict_format": 0.1, "answer_similarity": 0.05}

__all__ = [
    "DEFAULT_WEIGHTS",
    "MAX_REDUNDANT_COST",
    "REDUNDANT_SEARCH_COST",
    "SEARCH_CLOSE",
    "SEARCH_OPEN",
    "Embedder",
    "answer_similarity_reward",
    "cosine_similarity",
    "exact_match_reward",
    "f1_reward",
    "format_reward",
    "mrr_reward",
    "reciprocal_rank",
    "redundant_search_reward",
    "redundant_searches",
    "strict_format_reward",
    "support_recall_reward",
    "title_recall",
]


@runtime_checkable
class Embedder(Protocol):
    """What the answer-similarity reward needs of an embedder (``retrieval``'s embedders have it)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text: array [len(texts), dim]."""


@reads_only
def exact_match_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """1.0 if the parsed answer equals the gold after SQuAD normalisation, else 0.0 (no answer: 0.0)."""
    answer = info.get("parsed_answer")
    return 0.0 if answer is None else exact_match(answer, gold)


@reads_only
def f1_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """HotpotQA's token F1 of the parsed answer against the gold (no answer: 0.0)."""
    answer = info.get("parsed_answer")
    return 0.0 if answer is None else hotpot_f1(answer, gold)


def reciprocal_rank(retrieved_titles: Sequence[str], relevant_titles: Sequence[str]) -> float:
    """1 / (1-based position of the first relevant title in ``retrieved_titles``); 0.0 when none is there.

    ``lmgym.retrieval.fusion.reciprocal_rank``, except that a question naming no relevant title scores 0.0 where
    that metric refuses it."""
    return ranked(retrieved_titles, relevant_titles) if relevant_titles else 0.0


@reads_only
def mrr_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """Reciprocal rank of the first supporting paragraph among everything the episode retrieved."""
    titles = [passage["title"] for passage in info.get("retrieved", ())]
    return reciprocal_rank(titles, info.get("supporting_titles", ()))


@reads_only
def format_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """1.0 for a final ``<answer>...</answer>`` (0.0 without), minus the episode's format penalty."""
    answered = 1.0 if info.get("parsed_answer") is not None else 0.0
    return answered - float(info.get("format_penalty", 0.0))


def title_recall(titles: Sequence[str], supporting: Sequence[str]) -> float:
    """The share of the distinct `supporting` titles among `titles` (0.0 when there are none)."""
    wanted = set(supporting)
    return len(wanted & set(titles)) / len(wanted) if wanted else 0.0


@reads_only
def support_recall_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """The fraction of the distinct supporting titles among the titles of everything the episode retrieved."""
    return title_recall([passage["title"] for passage in info.get("retrieved", ())],
                        info.get("supporting_titles", ()))


def redundant_searches(retrieved: Sequence[Mapping[str, Any]]) -> int:
    """How many searches retrieved passages whose titles had all been retrieved by earlier searches.

    ``retrieved`` is the env's record: one entry per passage with its ``search`` number and ``title``."""
    titles_by_search: dict[int, set[str]] = {}
    for passage in retrieved:
        titles_by_search.setdefault(int(passage["search"]), set()).add(passage["title"])
    seen: set[str] = set()
    count = 0
    for number in sorted(titles_by_search):
        titles = titles_by_search[number]
        count += int(titles <= seen)
        seen |= titles
    return count


@reads_only
def redundant_search_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """``-REDUNDANT_SEARCH_COST`` per redundant search (``redundant_searches``), at most
    ``-MAX_REDUNDANT_COST`` in all; 0.0 when every search found a title not retrieved before."""
    cost = min(REDUNDANT_SEARCH_COST * redundant_searches(info.get("retrieved", ())), MAX_REDUNDANT_COST)
    return -cost if cost else 0.0  # not -0.0 in the logs


def one_search(action: str) -> bool:
    """An action that is exactly one search call: one ``<search>``, one ``</search>`` ending it (trailing
    white space allowed), no answer tag."""
    return (action.count(SEARCH_OPEN) == 1 and action.count(SEARCH_CLOSE) == 1
            and action.rstrip().endswith(SEARCH_CLOSE) and ANSWER_OPEN not in action and ANSWER_CLOSE not in action)


def one_answer(action: str) -> bool:
    """An action that is exactly one final answer: one ``<answer>``, then one ``</answer>`` ending it
    (trailing white space allowed), no search tag."""
    return (action.count(ANSWER_OPEN) == 1 and action.count(ANSWER_CLOSE) == 1
            and action.find(ANSWER_OPEN) < action.find(ANSWER_CLOSE) and action.rstrip().endswith(ANSWER_CLOSE)
            and SEARCH_OPEN not in action and SEARCH_CLOSE not in action)


@reads_only
def strict_format_reward(completion: str, gold: str, info: Mapping[str, Any]) -> float:
    """1.0 for searches that were all well formed and run, then one final answer at the very end; else 0.0."""
    steps = info.get("steps")
    if (info.get("parsed_answer") is None or info.get("format_violations") or not isinstance(steps, list)
            or not steps or not all(isinstance(step, str) for step in steps)):
        return 0.0
    *searches, last = steps
    ran = int(info.get("tool_calls", {}).get("search", 0))
    return float(ran == len(searches) and all(one_search(step) for step in searches) and one_answer(last))


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two vectors; 0.0 when either is all zeros.

    Two lines of numpy rather than sklearn's ``cosine_similarity`` or sentence-transformers'
    ``util.cos_sim``: those take matrices (or torch tensors) and the reward compares two vectors.
    """
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norms if norms > 0 else 0.0


def answer_similarity_reward(embedder: Embedder) -> TRLReward:
    """A reward function: max(0, cosine of the embeddings of the parsed answer and the gold); no answer: 0.0.

    TRL-style, so the episode engine scores a round's finished episodes with one ``embed`` call (answers, then
    golds) instead of one call an episode: with MiniLM on a GPU each call is a few ms of launches and a sync, about
    a second of every RAG agent iteration (128 episodes). ``env.step`` alone still scores one episode a call."""
    if not isinstance(embedder, Embedder):
        raise ValueError(f"embedder must have an embed(texts) -> array method; got {type(embedder).__name__}")

    def answer_similarity(completions: list[str], gold: list[str], parsed_answer: list[str | None],
                          **kwargs: Any) -> list[float]:
        answered = [k for k, answer in enumerate(parsed_answer) if answer is not None]
        scores = [0.0] * len(completions)
        if not answered:
            return scores
        texts = [parsed_answer[k] for k in answered] + [gold[k] for k in answered]
        vectors = np.asarray(embedder.embed(texts))
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"embedder.embed returned shape {vectors.shape} for {len(texts)} texts; expected "
                             f"({len(texts)}, dim)")
        for row, k in enumerate(answered):
            scores[k] = max(0.0, cosine_similarity(vectors[row], vectors[len(answered) + row]))
        return scores

    return trl_reward(answer_similarity)
