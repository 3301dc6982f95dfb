"""Reward components of trajectories: combining them into each episode's reward (`combine_rewards`, the
`reward_combination` setting) and the per-component metrics every iteration and evaluation logs
(`component_metrics`, `component_means`).

Components are what the env reports in `info["reward_components"]` (name -> value, None when not
applicable; LanguageEnv reports one per reward function). The strategies are in
algorithms/reward_combination.py.
"""
from __future__ import annotations

import math
import numbers
from typing import Mapping, Sequence

import numpy as np

from algorithms import distributed as dist
from algorithms.reward_combination import combine
from buffers import Trajectory

ENV = "env"  # reward_combination's default: the env's own (weighted) reward, left as it is
RESERVED = ("mean", "std", "failures")  # reward_<name> is already another metric for these


def components_of(t: Trajectory, method: str) -> Mapping[str, float | None]:
    """The episode's `info["reward_components"]`, or a one-line ValueError when the env reports none."""
    components = t.info.get("reward_components")
    if not isinstance(components, Mapping) or not components:
        raise ValueError(f"reward_combination={method!r} needs info['reward_components'] (name -> value) on every "
                         f"episode, as LanguageEnv reports it; episode of group {t.group_id} has none (use 'env')")
    return components


def component_matrix(rows: Sequence[Mapping[str, float | None]]) -> tuple[list[str], np.ndarray]:
    """(component names in order of first appearance, matrix [len(rows), K]); None or absent -> NaN."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    matrix = np.full((len(rows), len(names)), np.nan)
    for i, row in enumerate(rows):
        for k, name in enumerate(names):
            value = row.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
                raise ValueError(f"reward component {name!r} must be a number or None, got {value!r}")
            matrix[i, k] = float(value)
    return names, matrix


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


def component_means(trajectories: list[Trajectory]) -> dict[str, float]:
    """`reward_<name>`: each reward component's mean over the episodes it applies to (those reporting
    components; None values left out). Empty when no episode has components."""
    return _means(_columns(trajectories))


def component_metrics(trajectories: list[Trajectory]) -> dict:
    """`component_means`, and `rewards_<name>`: each component's per-episode values (None: not applicable),
    for the plots (flat keys of lists, as `rewards`, so wandb logs them as they are)."""
    columns = _columns(trajectories)
    values = {f"rewards_{name}": [None if math.isnan(v) else round(float(v), 4) for v in column]
              for name, column in columns.items()}
    return {**_means(columns), **values} if values else {}


def _means(columns: dict[str, np.ndarray]) -> dict[str, float]:
    """`reward_<name>`: the mean of each column's applicable (non-NaN) values; columns with none are left out."""
    return {f"reward_{name}": float(values[~np.isnan(values)].mean())
            for name, values in columns.items() if (~np.isnan(values)).any()}


def _columns(trajectories: list[Trajectory]) -> dict[str, np.ndarray]:
    """Component name -> its values over the episodes that report components (NaN: not applicable)."""
    rows = [t.info["reward_components"] for t in trajectories if isinstance(t.info.get("reward_components"), Mapping)]
    names, matrix = component_matrix(rows)
    clash = [name for name in names if name in RESERVED]
    if clash:
        raise ValueError(f"reward component {clash[0]!r} would be logged as reward_{clash[0]}, which is another "
                         f"metric; rename the reward function")
    return {name: matrix[:, k] for k, name in enumerate(names)}
