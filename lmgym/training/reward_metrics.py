"""Per-component reward metrics every iteration and evaluation logs: `reward_<name>` means and the
`rewards_<name>` per-episode values the plots draw, from each episode's `outcome.reward_components`."""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from lmgym.buffers import Trajectory
from lmgym.buffers.outcome import checked_component

RESERVED = ("mean", "std", "failures")  # reward_<name> is already another metric for these


def component_matrix(rows: Sequence[Mapping[str, float | None]]) -> tuple[list[str], np.ndarray]:
    """(component names in order of first appearance, matrix [len(rows), K]); None or absent -> NaN.
    The metrics below read it, and so does the batch reward combination (algorithms/reward_combination.py)."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    matrix = np.full((len(rows), len(names)), np.nan)
    for i, row in enumerate(rows):
        for k, name in enumerate(names):
            value = checked_component(name, row.get(name))
            if value is not None:
                matrix[i, k] = value
    return names, matrix


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
    rows = [t.outcome.reward_components for t in trajectories if t.outcome.reward_components]
    names, matrix = component_matrix(rows)
    clash = [name for name in names if name in RESERVED]
    if clash:
        raise ValueError(f"reward component {clash[0]!r} would be logged as reward_{clash[0]}, which is another "
                         f"metric; rename the reward function")
    return {name: matrix[:, k] for k, name in enumerate(names)}
