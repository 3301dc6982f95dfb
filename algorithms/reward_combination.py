"""Combining reward components into one reward per episode: seed 001's uniform, std, PCA and L2 strategies.

Each strategy maps a batch's component matrix [N, K] (N episodes, K components, what envs report in
`info["reward_components"]`) to N rewards. NaN marks a component that is not applicable to an episode
(its reward function returned None). The statistics (standard deviations, the principal axis) are taken
over the whole matrix, i.e. over an iteration's batch, where the seed took them over one question's
group: one set of weights then holds for every episode of the iteration, a group of a few samples does
not make a noisy estimate, and a component constant within one group keeps its weight.

- `uniform`: sum_k r_k / K.
- `std`: sum_k w_k r_k with w_k = std_k / sum_j std_j (population std over the batch): a component that
  varies more weighs more. When no component varies, the uniform weights (the seed divides 0 by 0).
- `pca`: each component standardised over the batch ((r - mean) / std; a constant one is all 0), then
  projected on the first principal axis (unit length), as the seed does. PCA's sign is arbitrary, so it
  is fixed here: the axis' loadings sum to >= 0 (ties: its largest loading is positive), which makes the
  reward rise with the components on the whole. The rewards have mean 0 over the batch.
- `l2`: sqrt(sum_k r_k^2), the components' Euclidean norm. It needs components >= 0: a negative one (a
  penalty) would raise the norm, so `combine` refuses it.

A not-applicable component adds nothing to any strategy's sum: `uniform`, `std` and `l2` leave it out
(as the env's own weighted sum and TRL's nansum do), `pca` counts it at the batch mean of that component
(0 once standardised). Means and standard deviations are over the applicable values only.

Why numpy and not sklearn's PCA: the first principal axis of a centred matrix is its first right singular
vector (what `PCA(n_components=1)` computes), sklearn is not a dependency of the core, and its sign
convention (`svd_flip`) would have to be replaced by the one above anyway.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

CONSTANT = 1e-12  # a component whose std over the batch is at most this is constant


def column_stats(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population std of each column over its non-NaN values (0 and 0 for an all-NaN column)."""
    present = ~np.isnan(matrix)
    counts = np.maximum(present.sum(axis=0), 1)
    means = np.where(present, matrix, 0.0).sum(axis=0) / counts
    variances = (np.where(present, matrix - means, 0.0) ** 2).sum(axis=0) / counts
    return means, np.sqrt(variances)


def std_weights(matrix: np.ndarray) -> np.ndarray:
    """w_k = std_k / sum_j std_j; uniform when no component varies."""
    stds = column_stats(matrix)[1]
    stds = np.where(stds > CONSTANT, stds, 0.0)
    total = stds.sum()
    return stds / total if total > 0 else np.full(matrix.shape[1], 1.0 / matrix.shape[1])


def standardised(matrix: np.ndarray) -> np.ndarray:
    """(r - mean) / std per column; 0 for a constant column and for NaN entries (the column's mean)."""
    means, stds = column_stats(matrix)
    scaled = (matrix - means) / np.where(stds > CONSTANT, stds, 1.0)
    return np.where(np.isnan(matrix) | (stds <= CONSTANT), 0.0, scaled)


def uniform(matrix: np.ndarray) -> np.ndarray:
    """The mean of the K components (a NaN one counts 0)."""
    return np.nansum(matrix, axis=1) / matrix.shape[1]


def std_weighted(matrix: np.ndarray) -> np.ndarray:
    """Components weighted by their share of the summed standard deviations (`std_weights`)."""
    return np.nansum(matrix * std_weights(matrix), axis=1)


def pca(matrix: np.ndarray) -> np.ndarray:
    """The standardised components projected on their first principal axis, signed so loadings sum >= 0."""
    z = standardised(matrix)
    if not np.any(z):  # no component varies: no axis
        return np.zeros(matrix.shape[0])
    axis = np.linalg.svd(z, full_matrices=False)[2][0]  # z is centred: its first right singular vector
    total = axis.sum()
    if total < 0 or (abs(total) <= CONSTANT and axis[np.argmax(np.abs(axis))] < 0):
        axis = -axis
    return z @ axis


def l2(matrix: np.ndarray) -> np.ndarray:
    """The Euclidean norm of each episode's components (a NaN one counts 0); components must be >= 0."""
    return np.sqrt(np.nansum(matrix ** 2, axis=1))


COMBINATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "uniform": uniform, "std": std_weighted, "pca": pca, "l2": l2,
}
NON_NEGATIVE = ("l2",)  # strategies that refuse negative components


def combine(matrix: np.ndarray | Sequence[Sequence[float]], method: str,
            names: Sequence[str] | None = None) -> np.ndarray:
    """N rewards from a component matrix [N, K] (NaN: not applicable) by the strategy `method`.

    `names` (one per column) name a component in errors. Raises a one-line ValueError for an unknown
    method, a matrix that is not 2-D with K >= 1, an infinite value, or a negative component for `l2`."""
    if method not in COMBINATIONS:
        raise ValueError(f"unknown reward combination {method!r}; choose one of {', '.join(COMBINATIONS)}")
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] < 1:
        raise ValueError(f"reward combination needs a matrix [episodes, components] with >= 1 component, "
                         f"got shape {matrix.shape}")
    names = list(names) if names is not None else [f"#{k}" for k in range(matrix.shape[1])]
    if np.isinf(matrix).any():
        column = int(np.argwhere(np.isinf(matrix))[0][1])
        raise ValueError(f"reward component {names[column]!r} has an infinite value")
    if method in NON_NEGATIVE and (matrix < 0).any():  # NaN compares False
        row, column = np.argwhere(matrix < 0)[0]
        raise ValueError(f"reward combination {method!r} needs components >= 0 (a negative one, a penalty, would "
                         f"raise the norm): {names[column]!r} is {matrix[row, column]:g}; use uniform, std or pca")
    if matrix.shape[0] == 0:
        return np.zeros(0)
    return COMBINATIONS[method](matrix)
