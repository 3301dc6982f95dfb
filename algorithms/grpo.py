"""GRPO (DeepSeekMath): group-relative advantages and a clipped importance ratio, no value model."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.advantages import group_advantages, zero_variance_groups
from algorithms.base import RLAlgorithm
from algorithms.config import RLConfig, _check


@dataclass
class GRPOConfig(RLConfig):
    """GRPO settings. Defaults follow TRL's GRPOTrainer where it has one.

    Loss aggregation defaults to `token_mean` (every generated token of the step weighs the same);
    set `loss_aggregation="sequence_mean"` for the original paper's per-sequence mean.
    """

    kl_coeff: float = 0.04            # beta; KL (k3) in the loss
    clip_low: float = 0.2             # ratio lower bound is 1 - clip_low
    clip_high: float = 0.2            # ratio upper bound is 1 + clip_high (DAPO raises it)
    scale_by_std: bool = True         # divide by the group std (Dr. GRPO: False)
    drop_zero_variance_groups: bool = False  # skip groups whose rewards are all equal (no signal)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.samples_per_prompt >= 2, "GRPOConfig.samples_per_prompt must be >= 2 (a group needs a baseline)")
        _check(0 <= self.clip_low < 1, f"GRPOConfig.clip_low must be in [0, 1), got {self.clip_low}")
        _check(self.clip_high >= 0, f"GRPOConfig.clip_high must be >= 0, got {self.clip_high}")


class GRPO(RLAlgorithm):
    """Group Relative Policy Optimisation."""

    config_class = GRPOConfig

    def advantages(self, batch):
        rewards = batch.rewards
        adv = group_advantages(rewards, batch.group_ids, self.config.scale_by_std)
        self.record("zero_variance_groups", zero_variance_groups(rewards, batch.group_ids).float().mean())
        return adv[:, None] * batch.loss_mask

    def select_for_update(self, trajectories):
        if not self.config.drop_zero_variance_groups:
            return trajectories
        by_group: dict[int, list] = {}
        for t in trajectories:
            by_group.setdefault(t.group_id, []).append(t)
        return [t for g in by_group.values() if len({x.reward for x in g}) > 1 for t in g]

    def loss(self, batch, logprobs, entropy):
        c = self.config
        ratio = torch.exp(logprobs - batch.old_logprobs)
        adv = batch.advantages
        unclipped = ratio * adv
        clipped = ratio.clamp(1 - c.clip_low, 1 + c.clip_high) * adv
        with torch.no_grad():
            mask = batch.loss_mask
            was_clipped = (unclipped != torch.minimum(unclipped, clipped)).float()
            self.record("clip_fraction", (was_clipped * mask).sum() / mask.sum().clamp(min=1))
            self.record("approx_kl", (((ratio - 1) - torch.log(ratio)) * mask).sum() / mask.sum().clamp(min=1))
        return {"policy": -torch.minimum(unclipped, clipped)}
