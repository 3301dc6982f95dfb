"""TRL-style reward functions scored once per batch of finished episodes, as TRL's GRPOTrainer calls them.

``env.step`` alone scores each finished episode at once, calling a TRL-style function with one-element
lists. The episode engine (rollouts, hence every trainer and evaluation) instead steps an unwrapped
``LanguageEnv`` inside ``batched_trl_rewards(env)``: there a finished episode's TRL-style components are left
pending (``info["pending_rewards"]``, a ``PendingRewards``), and ``settle`` later calls each such function
once with every pending episode's ``prompts``, ``completions``, ``completion_ids`` (the token ids of each
completion, as sampled) and fields as lists, then recomputes each episode's weighted reward.

A wrapped env (any ``gymnasium.Wrapper``) is not deferred: a wrapper may change the reward that ``step``
returns, and a reward settled later would bypass it; its TRL-style functions are called once per episode.
"""
from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lmgym.envs.rewards.forms import TRLReward
from lmgym.envs.rewards.guard import call_batch_reward

__all__ = ["PENDING", "PendingRewards", "batched_trl_rewards", "settle", "weighted_total"]

PENDING = "pending_rewards"  # the info key of a finished episode's unscored TRL-style components


@dataclass(frozen=True)
class PendingRewards:
    """A finished episode's TRL-style components still to score: their names, the completion and its context."""

    names: tuple[str, ...]
    completion: str
    context: dict


def weighted_total(components: Mapping[str, float | None], weights: Mapping[str, float]) -> tuple[float, bool]:
    """(sum of weight x value over the components that are not None, whether any is not None)."""
    scored = [weights[name] * value for name, value in components.items() if value is not None]
    return float(sum(scored)), bool(scored)


@contextmanager
def batched_trl_rewards(env: Any) -> Iterator[bool]:
    """Within the block, an unwrapped env leaves TRL-style rewards pending (see the module doc); yields whether
    it does (False for a wrapped env or one without TRL-style reward functions)."""
    fns = getattr(env, "reward_fns", None)
    defer = (getattr(env, "unwrapped", env) is env and isinstance(fns, Mapping)
             and any(isinstance(fn, TRLReward) for fn in fns.values()))
    if not defer:
        yield False
        return
    previous = getattr(env, "defer_batched_rewards", False)
    env.defer_batched_rewards = True
    try:
        yield True
    finally:
        env.defer_batched_rewards = previous


def settle(env: Any, episodes: Sequence[tuple[Mapping[str, Any], Sequence[int]]]) -> list[tuple[float, dict]]:
    """Score the pending components of ``episodes`` ((info, completion token ids) each, info holding a
    ``PendingRewards``): each function once over every episode that left it pending. Returns, per episode,
    its new total reward and the info keys to update (``reward_components``, ``reward_errors``,
    ``no_applicable_reward``)."""
    pending = [info[PENDING] for info, _ in episodes]
    components = [dict(info["reward_components"]) for info, _ in episodes]
    errors = [dict(info.get("reward_errors") or {}) for info, _ in episodes]
    timeout = getattr(env, "reward_timeout", None)
    for name, fn in env.reward_fns.items():
        rows = [k for k, p in enumerate(pending) if name in p.names]
        if not rows:
            continue
        samples = [(pending[k].completion, copy.deepcopy(pending[k].context)) for k in rows]
        ids = [list(episodes[k][1]) for k in rows]
        results = call_batch_reward(lambda s=samples, i=ids, f=fn: f.batch(s, i), len(rows), timeout)
        for k, (value, error) in zip(rows, results):
            components[k][name] = value
            if error is not None:
                errors[k][name] = error
    settled = []
    for comps, errs in zip(components, errors):
        total, any_scored = weighted_total(comps, env.reward_weights)
        settled.append((total, {"reward_components": comps, "reward_errors": errs,
                                "no_applicable_reward": not any_scored}))
    return settled
