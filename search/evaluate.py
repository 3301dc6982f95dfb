"""Evaluation: accuracy (greedy), pass@k and maj@k over held-out episodes."""
from __future__ import annotations

import math
from collections import Counter

import torch

from training.progress import counting_tokens, phase_bar, token_postfix
from training.reward_metrics import component_means
from training.tool_errors import ToolErrorCounter
from episodes.rollout import SamplingSettings, rollout


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al., 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def majority_answer(answers: list[str | None]) -> str | None:
    """The most frequent parsed answer (ties: the first seen; unparsed answers do not vote), or None."""
    votes = Counter(a for a in answers if a is not None)
    return votes.most_common(1)[0][0] if votes else None


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


@torch.no_grad()
def evaluate(policy, env, episodes: int = 256, max_new_tokens: int = 64, k: int = 1, temperature: float = 0.0,
             batch_prompts: int = 64, seed: int = 0, progress: bool = False,
             tool_errors: ToolErrorCounter | None = None) -> dict[str, float]:
    """Greedy accuracy (k=1) or, with k > 1 and temperature > 0, pass@k and maj@k as well; each episode
    runs until the env ends it or `episode_step_limit(env)` actions. Envs that report reward components
    also get each one's mean over the episodes (`reward_<name>`); envs with tools, their failed tool calls
    (`tool_errors`, `tool_error_rate`; warned about through `tool_errors`, a run's counter, else a new one).

    With `progress`, a bar counts the episodes done (its postfix: the tokens sampled so far)."""
    if k > 1 and temperature <= 0:
        raise ValueError("evaluate: k > 1 needs temperature > 0 (greedy samples are identical)")
    starts = episode_starts(env, episodes)
    generator = torch.Generator(device=getattr(policy, "device", "cpu")).manual_seed(seed)
    settings = SamplingSettings(max_new_tokens, temperature, 1.0)
    accuracy, pass_k, maj_k, lengths, episodes_done = [], [], [], [], []
    bar = phase_bar("evaluate", len(starts) * k, "ep", progress)
    count_tokens = token_postfix(bar)
    for start in range(0, len(starts), batch_prompts):
        chunk = starts[start:start + batch_prompts]
        with counting_tokens(policy, count_tokens):
            trajs = rollout(env, policy, chunk, k, settings, generator, first_group_id=start)
        bar.update(len(trajs))
        episodes_done.extend(trajs)
        for g in range(len(chunk)):
            group = trajs[g * k:(g + 1) * k]
            correct = [t.outcome.correct for t in group]
            accuracy.extend(correct)
            lengths.extend(t.num_generated_tokens for t in group)
            if k > 1:
                pass_k.append(pass_at_k(k, sum(correct), k))
                maj_k.append(majority_correct([t.outcome.parsed_answer for t in group], correct))
    bar.close()
    result = {"accuracy": sum(accuracy) / max(len(accuracy), 1), "episodes": float(len(starts)),
              "mean_length": sum(lengths) / max(len(lengths), 1), **component_means(episodes_done),
              **(tool_errors or ToolErrorCounter()).metrics(episodes_done, "evaluation")}
    if k > 1:
        result[f"pass@{k}"] = sum(pass_k) / len(pass_k)
        result[f"maj@{k}"] = sum(maj_k) / len(maj_k)
    return result
