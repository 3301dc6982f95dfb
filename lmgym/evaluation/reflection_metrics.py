"""Reflection metrics over finished episodes of a ``ReflectionEnv`` (per-turn answers in their outcome).

- ``p1@t1``: the actor's first answer is correct;
- ``m1@t{T}``: the most frequent parsed answer among the first T turns' (ties: the first seen; unparsed
  answers do not vote) is correct;
- ``p1@t{T}``: some answer among the first T turns' is correct.

T defaults to 5, as in "Reinforce LLM Reasoning through Multi-Agent Reflection".

Per turn (``turn_metrics``), for k = 1..T:

- ``acc@t{k}``: the answer at turn k is correct, over the episodes that have a turn k;
- ``w2r@t{k}`` (k >= 2): wrong at turn k - 1 and right at turn k, out of the episodes that were wrong at turn
  k - 1 and have a turn k (the denominator is the previous turn's wrong answers, so 1.0 means every wrong
  answer was fixed);
- ``r2w@t{k}`` (k >= 2): right at turn k - 1 and wrong at turn k, out of the episodes right at turn k - 1 and
  with a turn k (1.0: every right answer was broken by the refinement).

A rate whose denominator is empty (no episode wrong, or right, at turn k - 1) is None, not 0.

``plot_turn_accuracy`` draws the turn-k accuracy curve of each stage (base, SFT, DPO, ...) as one PNG: a flat
line is an actor that repeats itself; a rising one, refinement that fixes answers.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from lmgym.buffers import EpisodeOutcome, Trajectory
from lmgym.core.problem_records import write_problem_records
from lmgym.episodes.rollout import SamplingSettings, rollout
from lmgym.evaluation.evaluate import episode_starts, majority_correct
from lmgym.evaluation.reflection_critic_metrics import critic_metrics, critic_turns
from lmgym.policies.base import Policy
from lmgym.training.plots import save_line_plot

DEFAULT_TURNS = 5


def turn_record(episode: Trajectory | Mapping[str, Any]) -> tuple[list[str | None], list[bool]]:
    """(parsed answers, verdicts) of an episode's actor turns, from a Trajectory's outcome or an info mapping."""
    outcome = episode.outcome if isinstance(episode, Trajectory) else EpisodeOutcome.from_info(episode)
    if not outcome.turn_correct:
        raise ValueError("reflection metrics need ReflectionEnv episodes: info['turn_correct'] is missing or empty")
    correct = list(outcome.turn_correct)
    return list(outcome.turn_answers or [None] * len(correct)), correct


def reflection_metrics(episodes: Iterable[Trajectory | Mapping[str, Any]],
                       turns: int = DEFAULT_TURNS) -> dict[str, float]:
    """p1@t1, m1@t{turns}, p1@t{turns} and the final answer's accuracy (``final_accuracy``), averaged over
    ``episodes``. An episode with fewer than ``turns`` actor turns counts the turns it has."""
    _check_turns(turns)
    first, majority, any_correct, final = [], [], [], []
    for episode in episodes:
        answers, correct = turn_record(episode)
        first.append(correct[0])
        majority.append(majority_correct(answers[:turns], correct[:turns]))
        any_correct.append(any(correct[:turns]))
        final.append(correct[-1])
    if not first:
        raise ValueError("reflection_metrics: no episodes")
    return {"p1@t1": _mean(first), f"m1@t{turns}": _mean(majority), f"p1@t{turns}": _mean(any_correct),
            "final_accuracy": _mean(final), "episodes": float(len(first))}


def turn_metrics(episodes: Iterable[Trajectory | Mapping[str, Any]],
                 turns: int = DEFAULT_TURNS) -> dict[str, float | None]:
    """``acc@t{k}`` for k = 1..turns and ``w2r@t{k}``, ``r2w@t{k}`` for k = 2..turns (see the module
    docstring for the denominators; None where it is empty). A turn no episode reached is None too."""
    _check_turns(turns)
    verdicts = [turn_record(episode)[1] for episode in episodes]
    if not verdicts:
        raise ValueError("turn_metrics: no episodes")
    out: dict[str, float | None] = {}
    for k in range(1, turns + 1):
        reached = [v for v in verdicts if len(v) >= k]
        out[f"acc@t{k}"] = _mean([v[k - 1] for v in reached]) if reached else None
        if k == 1:
            continue
        wrong_before = [v[k - 1] for v in reached if not v[k - 2]]
        right_before = [not v[k - 1] for v in reached if v[k - 2]]
        out[f"w2r@t{k}"] = _mean(wrong_before) if wrong_before else None
        out[f"r2w@t{k}"] = _mean(right_before) if right_before else None
    return out


def turn_accuracy_curve(metrics: Mapping[str, Any]) -> list[float | None]:
    """[acc@t1, acc@t2, ...] from a ``turn_metrics`` (or ``evaluate_reflection``) result, in turn order."""
    curve, k = [], 1
    while f"acc@t{k}" in metrics:
        curve.append(metrics[f"acc@t{k}"])
        k += 1
    if not curve:
        raise ValueError("turn_accuracy_curve: no acc@t1 in the metrics (run turn_metrics first)")
    return curve


@torch.no_grad()
def reflection_episodes(policies: Policy | Mapping[str, Policy], env, episodes: int = 64, max_new_tokens: int = 256,
                        temperature: float = 0.0, batch_prompts: int = 16, seed: int = 0,
                        problems: Sequence[int] | None = None, samples: int = 1) -> list[Trajectory]:
    """Play reflection episodes on the env's first ``episodes`` problems (in order), or on the problem indices
    ``problems``; ``samples`` episodes each (sampling needs temperature > 0 to make them differ). ``policies``
    is one Policy for both roles or {"actor": ..., "critic": ...} (two models, or two adapters of one)."""
    for name, value in (("batch_prompts", batch_prompts), ("samples", samples)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an int >= 1; got {value!r}")
    starts = episode_starts(env, episodes) if problems is None else [{"options": {"index": int(i)}} for i in problems]
    device = getattr(next(iter(policies.values())) if isinstance(policies, Mapping) else policies, "device", "cpu")
    generator = torch.Generator(device=device).manual_seed(seed)
    settings = SamplingSettings(max_new_tokens, temperature, 1.0)
    played: list[Trajectory] = []
    for start in range(0, len(starts), batch_prompts):
        played += rollout(env, policies, starts[start:start + batch_prompts], samples, settings, generator,
                          first_group_id=start)
    return played


def evaluate_reflection(policies: Policy | Mapping[str, Policy], env, episodes: int = 64, max_new_tokens: int = 256,
                        temperature: float = 0.0, turns: int = DEFAULT_TURNS, batch_prompts: int = 16,
                        seed: int = 0, records_path: str | os.PathLike | None = None) -> dict[str, float]:
    """``reflection_metrics``, ``turn_metrics`` and (turns >= 2) ``critic_metrics`` of ``reflection_episodes``
    (greedy by default), with ``mean_length``: sampled tokens per episode, both roles'. The env must run at least
    ``turns`` actor turns. With ``records_path`` (the aggregate's ``.json`` path, or a ``.problems.jsonl``
    one) each episode's ``reflection_records`` entry is written there."""
    max_turns = getattr(getattr(env, "unwrapped", env), "max_turns", None)
    if not isinstance(max_turns, int):
        raise ValueError(f"evaluate_reflection needs a ReflectionEnv; got {type(env).__name__}")
    if max_turns < turns:
        raise ValueError(f"evaluate_reflection: turns={turns} but the env runs max_turns={max_turns} actor turns")
    played = reflection_episodes(policies, env, episodes, max_new_tokens, temperature, batch_prompts, seed)
    lengths = [t.num_generated_tokens for t in played]
    critic = critic_metrics(played) if turns >= 2 else {}
    if records_path is not None:
        write_problem_records(records_path, "reflection", reflection_records(played, turns))
    return {**reflection_metrics(played, turns), **turn_metrics(played, turns), **critic,
            "mean_length": sum(lengths) / max(len(lengths), 1)}


def reflection_records(played: Sequence[Trajectory], turns: int = DEFAULT_TURNS) -> list[dict[str, Any]]:
    """One problem record (kind "reflection", lmgym.core.problem_records) per episode, in order: its `index`, `id`,
    `gold`, the actor's answer and verdict at each turn (`turn_answers`, `turn_correct`: the info keys
    `turn_record` reads, so `reflection_metrics` and `turn_metrics` recompute from the records), the `turns`
    the metrics count, each critic turn's verdict (`critic_verdicts`) and its sampled `tokens`."""
    records = []
    for index, episode in enumerate(played):
        answers, correct = turn_record(episode)
        records.append({"index": index, "id": episode.outcome.problem_id, "gold": episode.info.get("gold"),
                        "turn_answers": answers, "turn_correct": correct, "turns": turns,
                        "critic_verdicts": [verdict for _, verdict, _, _ in critic_turns(episode)],
                        "tokens": episode.num_generated_tokens})
    return records


def _check_turns(turns: int) -> None:
    if not isinstance(turns, int) or isinstance(turns, bool) or turns < 1:
        raise ValueError(f"turns must be an int >= 1; got {turns!r}")


def _mean(values: list[bool]) -> float:
    return sum(values) / len(values)


def plot_turn_accuracy(stages: Mapping[str, Mapping[str, Any] | Sequence[float | None]], path: str | Path,
                       title: str = "") -> Path:
    """Save the curves of ``stages`` (stage name -> a ``turn_metrics``/``evaluate_reflection`` result, or the
    accuracies at turns 1, 2, ... as fractions; None: turn not reached, left out) to ``path``; returns it."""
    if not isinstance(stages, Mapping) or not stages:
        raise ValueError("plot_turn_accuracy: stages must be a non-empty mapping of stage name -> metrics or curve")
    lines = {}
    for name, value in stages.items():
        curve = turn_accuracy_curve(value) if isinstance(value, Mapping) else list(value)
        points = [(k, 100 * acc) for k, acc in enumerate(curve, start=1) if acc is not None]
        if not points:
            raise ValueError(f"plot_turn_accuracy: stage {name!r} has no turn accuracy")
        lines[name] = ([k for k, _ in points], [acc for _, acc in points])
    return save_line_plot(lines, path, title or "turn-k accuracy per stage", "turn k", "accuracy at turn k (%)",
                          integer_x=True)
