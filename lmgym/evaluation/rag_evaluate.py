"""Greedy evaluation of HotpotQA episodes, an agent's (``RAG-HotpotQA-v0``) or a reader's given passages
(``QuestionSearchHotpotQAEnv``, ``HotpotQAEnv``): what it retrieved and what it answered, per episode and
averaged.

Per episode (``episode_metrics``), from the env's final info:

- ``mrr``: the reciprocal rank of the first supporting title among every passage the episode retrieved,
  in order (``lmgym.envs.hotpotqa.rewards.mrr_reward``; 0 when it retrieved none);
- ``recall@3``: the share of the distinct supporting titles among the first ``RECALL_AT`` (3) passages it
  retrieved (its first search's, at k = 3), so every episode is judged on the same number of passages;
- ``recall``: that share among every passage it retrieved (``support_recall``, all searches);
- ``em``, ``f1``: SQuAD exact match and HotpotQA's F1 of the parsed answer (0 without one);
- ``em_reply``, ``f1_reply``: the same, but an episode with no tagged answer is read leniently: the first
  non-empty line of what the model wrote (at most ``REPLY_CHARS`` characters) counts as its answer. An
  untrained reader rarely writes ``<answer>`` tags; these columns tell what it knew apart from the format;
- ``searches``: the searches the store ran; ``tokens``: the tokens the model generated, all turns.

``mrr`` and both recalls are None for an env that cannot search (no ``retrieved`` in its info: closed
book, the gold paragraphs); their means leave such episodes out, and are None when no episode searched.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from lmgym.buffers import Trajectory
from lmgym.envs.hotpotqa.metrics import exact_match, hotpot_f1
from lmgym.envs.hotpotqa.rewards import reciprocal_rank, title_recall
from lmgym.episodes.rollout import SamplingSettings, rollout
from lmgym.evaluation.evaluate import episode_starts

RECALL_AT = 3
REPLY_CHARS = 300  # an untagged reply read as an answer: its first line, cut to this length
METRICS = ("mrr", f"recall@{RECALL_AT}", "recall", "em", "f1", "em_reply", "f1_reply", "searches", "tokens")


def reply_answer(parsed: str | None, text: str) -> str:
    """The tagged answer when there is one, else the first non-empty line of the model's text (bounded)."""
    if parsed is not None:
        return parsed
    line = next((line.strip() for line in text[:4 * REPLY_CHARS].splitlines() if line.strip()), "")
    return line[:REPLY_CHARS]


def search_queries(info: Mapping[str, Any]) -> list[str]:
    """The queries of the searches the store ran, in order (refused calls and failed searches left out)."""
    return [str(entry["argument"]) for entry in info.get("tool_log", ())
            if entry.get("tool") == "search" and not str(entry.get("output", "")).startswith("error")]


def episode_metrics(trajectory: Trajectory) -> dict[str, Any]:
    """The episode's metrics (see the module docstring) with its id, queries, retrieved titles and answer."""
    info = trajectory.info
    answer, gold = trajectory.outcome.parsed_answer, str(info.get("gold", ""))
    supporting = list(info.get("supporting_titles", ()))
    retrieved = info.get("retrieved")
    titles = None if retrieved is None else [str(passage["title"]) for passage in retrieved]
    read = reply_answer(answer, trajectory.text)
    return {"id": trajectory.outcome.problem_id, "answer": answer, "reply_answer": read, "gold": gold,
            "queries": search_queries(info),
            "retrieved_titles": titles, "supporting_titles": supporting,
            "mrr": None if titles is None else reciprocal_rank(titles, supporting),
            f"recall@{RECALL_AT}": None if titles is None else title_recall(titles[:RECALL_AT], supporting),
            "recall": None if titles is None else title_recall(titles, supporting),
            "em": exact_match(answer, gold) if answer is not None else 0.0,
            "f1": hotpot_f1(answer, gold) if answer is not None else 0.0,
            "em_reply": exact_match(read, gold) if read else 0.0,
            "f1_reply": hotpot_f1(read, gold) if read else 0.0,
            "searches": float(info.get("tool_calls", {}).get("search", 0)),
            "tokens": float(trajectory.num_generated_tokens)}


def mean_metrics(episodes: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Each of METRICS averaged over the episodes that have it (None: none has it)."""
    means: dict[str, float | None] = {}
    for name in METRICS:
        values = [float(e[name]) for e in episodes if e.get(name) is not None]
        means[name] = sum(values) / len(values) if values else None
    return means


@torch.no_grad()
def evaluate_rag(policy, env, episodes: int | None = None, max_new_tokens: int = 64, batch_prompts: int = 64,
                 seed: int = 0) -> tuple[dict[str, float | None], list[dict[str, Any]]]:
    """(means, per-episode metrics) of greedy episodes on the env's first `episodes` questions (None: all),
    each run until the env ends it or its step limit. Each episode's row is its problem record (kind "rag",
    lmgym.core.problem_records): `index`, `episode_metrics` and `correct` (the env's verdict); `mean_metrics` of
    the rows is the means."""
    total = getattr(env, "unwrapped", env).num_problems
    starts = episode_starts(env, total if episodes is None else episodes)
    if not starts or batch_prompts < 1:
        raise ValueError(f"evaluate_rag: needs at least one episode and batch_prompts >= 1; got {len(starts)} "
                         f"episode(s), batch_prompts {batch_prompts}")
    generator = torch.Generator(device=getattr(policy, "device", "cpu")).manual_seed(seed)
    settings = SamplingSettings(max_new_tokens, 0.0, 1.0)
    rows: list[dict[str, Any]] = []
    for first in range(0, len(starts), batch_prompts):
        trajectories = rollout(env, policy, starts[first:first + batch_prompts], 1, settings, generator,
                               first_group_id=first)
        rows.extend({"index": first + i, **episode_metrics(t), "correct": bool(t.outcome.correct)}
                    for i, t in enumerate(trajectories))
    return mean_metrics(rows), rows
