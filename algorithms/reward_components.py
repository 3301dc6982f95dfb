"""Reward components of trajectories combined into each episode's reward (`combine_rewards`, the
`reward_combination` setting). The per-component metrics are in training/reward_metrics.py.

Components are what the env reports in `info["reward_components"]` (name -> value, None when not
applicable; LanguageEnv reports one per reward function). The strategies are in
algorithms/reward_combination.py.
"""
from __future__ import annotations

from typing import Mapping

from training import distributed as dist
from algorithms.reward_combination import combine
from buffers import Trajectory
from training.reward_metrics import component_matrix

ENV = "env"  # reward_combination's default: the env's own (weighted) reward, left as it is


def components_of(t: Trajectory, method: str) -> Mapping[str, float | None]:
    """The episode's reward components (`outcome.reward_components`, as a dict: it may cross processes), or a
    one-line ValueError when the env reports none."""
    components = dict(t.outcome.reward_components)
    if not components:
        raise ValueError(f"reward_combination={method!r} needs info['reward_components'] (name -> value) on every "
                         f"episode, as LanguageEnv reports it; episode of group {t.group_id} has none (use 'env')")
    return components


def set_env_reward(t: Trajectory, value: float) -> None:
    """Make `value` the episode's env reward. `env_reward`, `reward` (its shaping kept) and the last step's
    reward (the step the components scored) move by the same amount, so the step rewards still sum to
    `reward` and every later step (shaping, KL in the reward, advantages) sees the new reward."""
    delta = value - t.env_reward
    shaping = t.reward - t.env_reward
    t.env_reward = float(value)
    t.reward = float(value) + shaping
    t.step_rewards[-1] += delta


def combine_rewards(trajectories: list[Trajectory], method: str, across_ranks: bool = True) -> None:
    """Set each trajectory's env reward to the combination `method` of its reward components, the
    statistics taken over the whole batch: with `across_ranks`, every process's episodes (gathered, so
    each rank computes the same combination and keeps its own slice: exactly what one process collecting
    the whole batch gets); else this process's only. `method` "env" leaves the env's reward."""
    if method == ENV:
        return
    rows = [components_of(t, method) for t in trajectories]
    offset = 0
    if across_ranks and dist.world_size() > 1:  # a collective: every rank gets here once per iteration
        per_rank = dist.gather_lists([rows])
        offset = sum(len(part) for part in per_rank[:dist.rank()])
        rows = [row for part in per_rank for row in part]
    if not rows:
        return
    names, matrix = component_matrix(rows)
    rewards = combine(matrix, method, names)
    for t, reward in zip(trajectories, rewards[offset:offset + len(trajectories)]):
        set_env_reward(t, float(reward))
