"""Rollouts: play groups of episodes from env resets to their end and return them as trajectories.

Works for single-turn envs (one action), stepwise envs (one reasoning step per action) and multi-turn
envs: each episode is a branch of the `EpisodeEngine`, and all live branches are advanced together, one
batched sampling call per role and action, until the env ends them or `episode_step_limit(env)` is
reached. A wrapper chain around the env applies to every branch (see episodes/env_state.py). A wrapper
may change the prompt (the reset observation), the action text the env scores, the reward,
``terminated``/``truncated`` and ``info``; later observations are not re-read (the transcript is
rebuilt from token ids plus ``info["injected_text"]``), and it must not change which problems exist.
An episode a wrapper truncates before the env finishes it is not scored by the env's reward
functions (the env's own ``max_steps`` truncation is).
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

from lmgym.buffers import Trajectory
from lmgym.episodes.engine import EpisodeEngine, SamplingSettings
from lmgym.policies.base import Policy

__all__ = ["SamplingSettings", "rollout"]


def rollout(env, policy: Policy | Mapping[str, Policy], starts: list[dict], group_size: int,
            settings: SamplingSettings, generator: torch.Generator | None = None, first_group_id: int = 0,
            timings: dict | None = None, sample_key: int | None = None) -> list[Trajectory]:
    """Play `group_size` episodes from each reset in `starts` (kwargs for env.reset, e.g. {"seed": 3}).

    `policy`: one Policy, or a mapping role -> Policy (the env's `current_role` picks). Episodes of one
    start share a group id and the same initial env state. TRL-style reward functions are called once each
    for the whole batch. When `timings` is given, the seconds spent in the env (resets, steps: reward
    scoring) are added to timings["score"]. With `sample_key` (instead of
    `generator`), each episode's sampling noise depends only on (sample_key, group id, index in group,
    step), so splitting `starts` over processes samples the same.
    """
    engine = EpisodeEngine(env, policy, settings)
    branches = engine.start(starts, group_size, first_group_id)
    engine.play(branches, generator, sample_key, score=False)
    engine.score_pending(branches)  # TRL-style rewards: once per function over the whole batch
    if timings is not None:
        timings["score"] = timings.get("score", 0.0) + engine.env_seconds
    return [branch.to_trajectory() for branch in branches]
