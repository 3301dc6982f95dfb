"""Evaluation: accuracy (greedy), pass@k (unbiased from n samples), any@k and maj@k over held-out episodes,
with per-problem records that recompute them (`sampled_record`, `sampled_metrics`)."""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from lmgym.buffers import Trajectory
from lmgym.core.problem_records import write_problem_records
from lmgym.episodes.rollout import SamplingSettings, rollout
from lmgym.evaluation.episode_metrics import ToolErrorCounter, component_means
from lmgym.search.votes import majority_answer
from lmgym.training.progress import counting_tokens, phase_bar, token_postfix


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al., 2021): 1 - C(n-c, k) / C(n, k), the chance
    that k of the n drawn without replacement hold a correct one, computed stably as
    1 - prod_{i<k} (n-c-i) / (n-i). 0 when c = 0; 1 when n - c < k (every draw of k holds a correct one)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k: needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def winner_correct(winner: str | None, answers: list[str | None], correct: list[bool]) -> bool:
    """Is a vote's `winner` (None: nothing parsed) one of the answers graded correct?"""
    return winner is not None and any(c for a, c in zip(answers, correct) if a == winner)


def majority_correct(answers: list[str | None], correct: list[bool]) -> bool:
    """maj@k: is the most frequent parsed answer (ties: first seen) a correct one?"""
    return winner_correct(majority_answer(answers), answers, correct)


def episode_starts(env, episodes: int) -> list[dict]:
    """Deterministic resets: problem indices when the env exposes them, else seeds."""
    total = getattr(getattr(env, "unwrapped", env), "num_problems", None)
    if total is not None:
        return [{"options": {"index": i}} for i in range(min(episodes, total))]
    return [{"seed": i} for i in range(episodes)]


def sampled_record(index: int, group: Sequence[Trajectory], k: int) -> dict[str, Any]:
    """One problem's outcome record (lmgym.core.problem_records) from its n sampled episodes, in sampling order, for
    metrics at `k`: its `index` (problem index, or seed), `id`, `gold`, parsed `predictions`, `correct`, the
    counts `n` and `c`, `k` and each sample's `tokens`."""
    correct = [bool(t.outcome.correct) for t in group]
    first = group[0]
    return {"index": index, "id": first.outcome.problem_id, "gold": first.info.get("gold"),
            "predictions": [t.outcome.parsed_answer for t in group], "correct": correct,
            "n": len(correct), "c": sum(correct), "k": k, "tokens": [t.num_generated_tokens for t in group]}


def sampled_metrics(records: Sequence[Mapping[str, Any]], k: int) -> dict[str, float]:
    """The headline numbers of `evaluate` recomputed from its per-problem records (`sampled_record`):

    - ``accuracy``: the share of all samples that are correct (greedy k=1: the share of problems);
    - ``pass@k`` (k > 1): the unbiased estimator from each problem's n >= k samples, c of them correct,
      1 - C(n-c, k) / C(n, k) (Chen et al., 2021, `pass_at_k`), averaged over problems;
    - ``any@k`` (k > 1): some one of the problem's first k samples is correct (equal to pass@k when n = k;
      the estimate from one draw of k samples, higher variance);
    - ``maj@k`` (k > 1): the most frequent parsed answer of the first k samples is a correct one.
    """
    if not records:
        raise ValueError("sampled_metrics: no problem records")
    samples = [c for r in records for c in r["correct"]]
    out = {"accuracy": sum(samples) / len(samples), "episodes": float(len(records))}
    if k > 1:
        problems = len(records)
        out[f"pass@{k}"] = sum(pass_at_k(r["n"], r["c"], k) for r in records) / problems
        out[f"any@{k}"] = sum(any(r["correct"][:k]) for r in records) / problems
        out[f"maj@{k}"] = sum(majority_correct(r["predictions"][:k], r["correct"][:k]) for r in records) / problems
    return out


@torch.no_grad()
def evaluate(policy, env, episodes: int = 256, max_new_tokens: int = 64, k: int = 1, temperature: float = 0.0,
             batch_prompts: int = 64, seed: int = 0, progress: bool = False,
             tool_errors: ToolErrorCounter | None = None, samples: int | None = None,
             records_path: str | os.PathLike | None = None, max_prompt_tokens: int = 0) -> dict[str, float]:
    """Greedy accuracy (k=1) or, with k > 1 and temperature > 0, `samples` (n >= k; default k) episodes of
    each problem and pass@k (unbiased from the n), any@k and maj@k as well (`sampled_metrics` defines them);
    each episode runs until the env ends it or `episode_step_limit(env)` actions. Envs that report reward
    components also get each one's mean over the episodes (`reward_<name>`); envs with tools, their failed
    tool calls (`tool_errors`, `tool_error_rate`; warned about through `tool_errors`, a run's counter, else a
    new one). With `records_path` (an aggregate's `.json` path or a `.problems.jsonl` one), each problem's
    outcome (`sampled_record`) is written there (lmgym.core.problem_records), kind "sampled".

    With `progress`, a bar counts the episodes done (its postfix: the tokens sampled so far). `max_prompt_tokens`
    keeps each prompt's last N tokens (0: all), as training's max_prompt_length does."""
    n = k if samples is None else samples
    if n < k:
        raise ValueError(f"evaluate: samples={n} is fewer than k={k} (pass@k needs n >= k samples a problem)")
    if n > 1 and temperature <= 0:
        raise ValueError("evaluate: k > 1 (or samples > 1) needs temperature > 0 (greedy samples are identical)")
    starts = episode_starts(env, episodes)
    generator = torch.Generator(device=getattr(policy, "device", "cpu")).manual_seed(seed)
    settings = SamplingSettings(max_new_tokens, temperature, 1.0, max_prompt_tokens)
    records, episodes_done = [], []
    bar = phase_bar("evaluate", len(starts) * n, "ep", progress)
    count_tokens = token_postfix(bar)
    for start in range(0, len(starts), batch_prompts):
        chunk = starts[start:start + batch_prompts]
        with counting_tokens(policy, count_tokens):
            trajs = rollout(env, policy, chunk, n, settings, generator, first_group_id=start)
        bar.update(len(trajs))
        episodes_done.extend(trajs)
        records.extend(sampled_record(start + g, trajs[g * n:(g + 1) * n], k) for g in range(len(chunk)))
    bar.close()
    lengths = [t.num_generated_tokens for t in episodes_done]
    result = {**sampled_metrics(records, k), "episodes": float(len(starts)),
              "mean_length": sum(lengths) / max(len(lengths), 1), **component_means(episodes_done),
              **(tool_errors or ToolErrorCounter()).metrics(episodes_done, "evaluation")}
    if n != k:
        result["samples"] = float(n)
    if records_path is not None:
        write_problem_records(records_path, "sampled", records)
    return result
