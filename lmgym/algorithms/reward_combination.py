"""The reward pipeline: how an episode's reward components become the reward that training uses.

One iteration (algorithms/base.py `train_iteration`) takes a reward through four stages, in this order:

1. **The env's weighted sum** (envs/base.py, `LanguageEnv`). When an episode ends, each of the env's
   `reward_fns` scores it once. `info["reward_components"]` maps each function's name to its raw,
   unweighted value: None means "not applicable", and a function that fails scores 0.0 and is named in
   `info["reward_errors"]`. The env's reward is sum_k reward_weights[k] * r_k over the applicable
   components (weights default to 1.0; no applicable component: 0.0). It is paid at the last step (earlier
   steps score 0.0) and becomes the trajectory's `env_reward` and `reward`.
2. **Batch combination** (`reward_combination`, this module: `combine_batch_rewards`). "env", the default,
   keeps the env's reward. uniform, std, pca and l2 replace it with `combine` of the batch's component
   matrix [N, K]: N episodes of the iteration, gathered over all ranks; K components, None as NaN
   (`lmgym.evaluation.episode_metrics.component_matrix`). These four strategies read the raw components, so the
   env's `reward_weights` count only under "env". `env_reward`, `reward` and the last step's reward move
   by the same amount. Shaping already on the episode is kept, such as DAPO's overlong penalty, which is
   added at sampling. Combining is idempotent: it always starts again from the components. To judge its
   groups, DAPO's dynamic sampling first combines each rank's own episodes; the whole batch is then
   combined over all ranks before the PRM, the KL and the advantages see it.
3. **The outcome weight and the PRM** (algorithms/prm/reward.py, `weigh_rewards`). `outcome_weight` w
   scales the combined reward: shaping "outcome_scale" pays (w - 1) times each step's env reward at the
   step's last token. With `prm_weight` > 0, the PRM scores each step in [0, 1], and `prm_weight` times
   the score is paid at the step's last token (shaping "prm"). `env_reward` keeps the combined value: the
   reward and accuracy metrics and DAPO's selection read it.
4. **The KL to the reference** (algorithms/kl.py, algorithms/base.py `prepare` and `update_step`), when
   `kl_coeff` (beta) > 0. With `kl_in_reward`, beta * k1 (the sampling log-prob minus the reference's,
   on each sampled token) is taken off the reward as shaping "kl_penalty": per token for PPO, summed at
   the last step for the others. Without it, the reward is left as it is, and beta * KL(pi || pi_ref)
   (`kl_estimator`, on the policy being trained) is a per-token loss term.

The advantages then read the result. GRPO uses `reward` (the sum after shaping). PPO's GAE and
REINFORCE's returns use the token rewards: each step's reward at its last token, plus the per-token
shaping (`lmgym.buffers.Batch.token_rewards`). GRPO with a PRM takes the per-step PRM rewards apart
(algorithms/advantages.py `process_advantages`).

**The strategies of `combine`**, those of the RAG agent this project started from (the seed, 001), map a
component matrix [N, K] to N rewards. NaN marks a component that does not apply to an episode. The
statistics (standard deviations, the principal axis) are taken over the whole batch, where the seed took
them over one question's group. One set of weights then holds for every episode of the
iteration, a group of a few samples does not give a noisy estimate, and a component that is constant
within one group keeps its weight.

- `uniform`: sum_k r_k / K, with K counting every component (one that does not apply counts 0).
- `std`: sum_k w_k r_k with w_k = std_k / sum_j std_j (population std over the batch). A component that
  varies more weighs more, and a constant one (std <= CONSTANT) weighs 0. When no component varies, the
  weights are uniform (the seed divides 0 by 0 there).
- `pca`: each component is standardised over the batch as (r - mean) / std, and a constant one becomes
  all 0. The standardised matrix is projected on its first principal axis (unit length). PCA's sign is
  arbitrary, so it is fixed here: the axis' loadings must sum to >= 0, and on a tie its largest loading
  is positive. The reward then rises with the components on the whole, whatever their scales. The
  rewards have mean 0 over the batch; when no component varies, they are all 0.
- `l2`: sqrt(sum_k r_k^2), the Euclidean norm of the components. It needs every component >= 0, because a
  negative one (a penalty) would raise the norm, so `combine` refuses one.

A component that does not apply adds nothing to any strategy's sum. `uniform`, `std` and `l2` leave it
out, as the env's own weighted sum and TRL's nansum do; `pca` counts it at the batch mean of that
component (0 once standardised). Means and standard deviations are taken over the applicable values only;
a column with no applicable value counts as constant.

numpy, not sklearn's PCA: the first principal axis of a centred matrix is its first right singular vector
(what `PCA(n_components=1)` computes), sklearn is not a dependency of the core, and its sign convention
(`svd_flip`) would have to be replaced by the one above anyway.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lmgym.buffers import Trajectory
from lmgym.evaluation.episode_metrics import component_matrix
from lmgym.training import distributed as dist

CONSTANT = 1e-12  # a component whose std over the batch is at most this is constant
ENV = "env"  # reward_combination's default: the env's own (weighted) reward, left as it is


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
REWARD_COMBINATIONS = (ENV, *COMBINATIONS)  # every value of the `reward_combination` setting
NON_NEGATIVE = ("l2",)  # strategies that refuse negative components


def combine(matrix: np.ndarray | Sequence[Sequence[float]], method: str,
            names: Sequence[str] | None = None) -> np.ndarray:
    """N rewards from a component matrix [N, K] (NaN: not applicable) by the strategy `method`.

    `names` (one per column) name a component in errors. Raises a one-line ValueError for "env" (no matrix
    form), an unknown method, a matrix that is not 2-D with K >= 1, an infinite value, or a negative
    component for `l2`."""
    if method == ENV:
        raise ValueError("reward combination 'env' keeps each episode's own reward (the env's weighted sum) and "
                         "has no matrix form; use combine_batch_rewards, or one of " + ", ".join(COMBINATIONS))
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
    `reward` and every later stage (outcome weight, PRM, KL in the reward, advantages) sees the new reward."""
    delta = value - t.env_reward
    shaping = t.reward - t.env_reward
    t.env_reward = float(value)
    t.reward = float(value) + shaping
    t.step_rewards[-1] += delta


def combine_batch_rewards(trajectories: list[Trajectory], method: str, across_ranks: bool = True) -> None:
    """Set each trajectory's env reward to `combine(method)` of the batch's reward components (stage 2 above).

    With `across_ranks`, the statistics cover every process's episodes: they are gathered, each rank computes
    the same combination and keeps its own slice, exactly what one process collecting the whole batch gets
    (a collective: every rank must call it). Without it, they cover this process's episodes only. "env"
    leaves every reward as it is."""
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
