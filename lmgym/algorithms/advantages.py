"""Advantage estimators: group-relative (GRPO), process-supervised (GRPO with a PRM), leave-one-out (RLOO),
discounted returns and GAE."""
from __future__ import annotations

from collections.abc import Iterator

import torch

from lmgym.training import distributed as dist


def _groups(rewards: torch.Tensor, group_ids: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Each group's (mask, rewards as floats), in the order of its id."""
    for gid in torch.unique(group_ids):
        idx = group_ids == gid
        yield idx, rewards[idx].float()


def _normalised(r: torch.Tensor, scale_by_std: bool, eps: float) -> torch.Tensor:
    """(r - mean) / (std + eps), unbiased std; only centred without `scale_by_std`; 0 when r's values are equal."""
    centred = r - r.mean()
    if scale_by_std:
        std = r.std(unbiased=True) if r.numel() > 1 else torch.tensor(0.0)
        centred = centred / (std + eps) if std > 1e-8 else torch.zeros_like(centred)
    return centred


def group_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, scale_by_std: bool = True,
                     eps: float = 1e-4) -> torch.Tensor:
    """(r - mean of its group) / (std of its group + eps); std is the unbiased sample std.

    `scale_by_std=False` is Dr. GRPO's choice (no division). A group whose rewards are all equal
    gets advantage 0 everywhere: it carries no signal.
    """
    adv = torch.zeros_like(rewards, dtype=torch.float)
    for idx, r in _groups(rewards, group_ids):
        adv[idx] = _normalised(r, scale_by_std, eps)
    return adv


def group_step_normalised(step_rewards: torch.Tensor, step_mask: torch.Tensor, group_ids: torch.Tensor,
                          scale_by_std: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """Each step reward [B, C] (where `step_mask` is 1) normalised over all steps of all members of its group
    (DeepSeekMath 4.1.3): (r - mean) / (std + eps), unbiased std; centred only without `scale_by_std`; 0 when
    the group's step rewards are all equal. 0 off the step ends."""
    mask = step_mask > 0
    normalised = torch.zeros_like(step_rewards, dtype=torch.float)
    for gid in torch.unique(group_ids):
        rows = (group_ids == gid)[:, None] & mask
        r = step_rewards[rows].float()
        if r.numel() == 0:
            continue
        normalised[rows] = _normalised(r, scale_by_std, eps)
    return normalised


def process_advantages(step_rewards: torch.Tensor, step_mask: torch.Tensor, group_ids: torch.Tensor,
                       outcome_rewards: torch.Tensor | None = None, scale_by_std: bool = True,
                       eps: float = 1e-4) -> torch.Tensor:
    """GRPO's process supervision (DeepSeekMath, section 4.1.3), per token [B, C].

    `step_rewards` [B, C] holds each step's reward at its last token, where `step_mask` is 1. Each step
    reward is normalised over all steps of all members of its group ((r - mean) / (std + eps), unbiased
    std; centred only without `scale_by_std`; 0 when the group's step rewards are all equal); a token's
    advantage is the sum of the normalised rewards of its own step and every later one. With
    `outcome_rewards` [B], the group-normalised outcome (`group_advantages`) is added to every token.
    Positions after the last step end get the outcome part only; the caller masks what is not trained on.
    """
    normalised = group_step_normalised(step_rewards, step_mask, group_ids, scale_by_std, eps)
    adv = normalised.flip(1).cumsum(1).flip(1)  # the sum over this token's step and every later one
    if outcome_rewards is not None:
        adv = adv + group_advantages(outcome_rewards, group_ids, scale_by_std, eps)[:, None]
    return adv


def has_signal(rewards: list[float], tol: float = 1e-9) -> bool:
    """True when a group's rewards are not all equal (within `tol`): a group baseline leaves some
    advantage non-zero. A group of one never has signal. The one zero-variance test of the package."""
    return len(rewards) > 1 and max(rewards) - min(rewards) > tol


def zero_variance_groups(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """Boolean mask over group ids (sorted unique) telling which groups have all-equal rewards."""
    return torch.tensor([not has_signal(rewards[group_ids == g].float().tolist()) for g in torch.unique(group_ids)],
                        dtype=torch.bool)


def groups_of(trajectories: list) -> list[list]:
    """Trajectories grouped by `group_id`, groups in order of first appearance."""
    by_group: dict[int, list] = {}
    for t in trajectories:
        by_group.setdefault(t.group_id, []).append(t)
    return list(by_group.values())


def env_signal(group: list) -> bool:
    """`has_signal` of a group's env rewards (before any shaping: KL, length penalties)."""
    return has_signal([t.env_reward for t in group])


def informative_groups(trajectories: list) -> list[list]:
    """Groups (in order of appearance) whose env rewards are not all equal."""
    return [g for g in groups_of(trajectories) if env_signal(g)]


def zero_variance_fraction(trajectories: list) -> float:
    """Fraction of groups whose env rewards are all equal (no learning signal for group baselines)."""
    groups = groups_of(trajectories)
    return sum(not env_signal(g) for g in groups) / len(groups) if groups else 0.0


def discounted_returns(token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """Reward-to-go per token: G_t = r_t + gamma * G_{t+1}, restricted to masked positions' sequence."""
    returns = torch.zeros_like(token_rewards)
    running = torch.zeros(token_rewards.shape[0], device=token_rewards.device)
    for t in reversed(range(token_rewards.shape[1])):
        running = token_rewards[:, t] + gamma * running
        returns[:, t] = running
    return returns * mask


def gae(token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the positions where mask == 1 (others are skipped).

    Returns (advantages, returns) with returns = advantages + values. The value after the last
    valid position is 0 (episodes end inside the batch).
    """
    B, T = token_rewards.shape
    adv = torch.zeros_like(token_rewards)
    next_value = torch.zeros(B, device=values.device)
    running = torch.zeros(B, device=values.device)
    for t in reversed(range(T)):
        m = mask[:, t]
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        running_new = delta + gamma * lam * running
        adv[:, t] = running_new * m
        running = torch.where(m > 0, running_new, running)
        next_value = torch.where(m > 0, values[:, t], next_value)
    return adv, adv + values


def leave_one_out_advantages(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """RLOO: r_i - mean of the other G - 1 rewards of its group (= G / (G - 1) * (r_i - group mean)).

    A group of one sample has no baseline: its advantage is 0.
    """
    adv = torch.zeros_like(rewards, dtype=torch.float)
    for idx, r in _groups(rewards, group_ids):
        if r.numel() > 1:
            adv[idx] = r - (r.sum() - r) / (r.numel() - 1)
    return adv


def global_moments(values: torch.Tensor, mask: torch.Tensor) -> tuple[float, float, float]:
    """(count, mean, sum of squared deviations) of `values` where `mask`, over every rank's batch (each
    rank holds its share of the iteration's groups): batch statistics that do not change with the world size."""
    n = dist.all_reduce_sum(float(mask.sum()))
    mean = dist.all_reduce_sum(float((values * mask).sum())) / max(n, 1.0)
    return n, mean, dist.all_reduce_sum(float((((values - mean) * mask) ** 2).sum()))


def whiten(values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / std over the masked positions (population std) of the whole batch, every rank's share
    included; masked-out positions become 0."""
    if dist.world_size() > 1:
        n, mean, squares = global_moments(values, mask)
        return (values - mean) * (squares / max(n, 1.0) + eps) ** -0.5 * mask
    n = mask.sum().clamp(min=1.0)
    mean = (values * mask).sum() / n
    var = (((values - mean) * mask) ** 2).sum() / n
    return (values - mean) * torch.rsqrt(var + eps) * mask


def rms_scale(values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """x / sqrt(mean of x^2) over the masked positions of the whole batch, every rank's share included: signs and
    ratios kept, the scale made 1 (an advantage already measured against a baseline, such as a tree's
    Q(node) - Q(parent), keeps its meaning); masked-out positions become 0, all-zero values stay 0."""
    n = dist.all_reduce_sum(float(mask.sum()))
    squares = dist.all_reduce_sum(float((values * values * mask).sum()))
    return values * (squares / max(n, 1.0) + eps) ** -0.5 * mask


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var(returns - values) / Var(returns) over masked positions: 1 perfect, 0 no better than a
    constant, negative worse than a constant; nan when the returns have no variance."""
    n = mask.sum().clamp(min=1.0)

    def var(x):
        mean = (x * mask).sum() / n
        return float((((x - mean) * mask) ** 2).sum() / n)

    total = var(returns)
    return float("nan") if total < 1e-12 else 1.0 - var(returns - values) / total
