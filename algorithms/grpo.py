"""GRPO (DeepSeekMath): group-relative advantages and a clipped importance ratio, no value model.

With a PRM (`prm_weight` > 0) the advantages are DeepSeekMath's process supervision
(`process_advantages`): each step's PRM reward normalised over its group's steps and summed from the
token's step to the end, plus the group-normalised rest of the reward (the env's, times
`outcome_weight`, and any shaping paid at the end)."""
from __future__ import annotations

from dataclasses import dataclass

from algorithms.advantages import group_advantages, informative_groups, process_advantages
from algorithms.base import RLAlgorithm
from training.config import setting
from algorithms.config import RLConfig
from algorithms.losses import clipped_policy_loss, masked_mean
from algorithms.prm_reward import PRM_REWARDS, STEP_ENDS


@dataclass
class GRPOConfig(RLConfig):
    """GRPO settings. Defaults follow TRL's GRPOTrainer where it has one.

    Loss aggregation defaults to `token_mean` (every generated token of the step weighs the same);
    set `loss_aggregation="sequence_mean"` for the original paper's per-sequence mean.
    """

    kl_coeff: float = setting(0.04, "beta, the weight of the KL to the reference (kl_estimator), in the loss "
                                    "(TRL's beta)")
    clip_low: float = setting(0.2, "ratio lower bound is 1 - clip_low (TRL's epsilon)")
    clip_high: float = setting(0.2, "ratio upper bound is 1 + clip_high (TRL's epsilon_high; DAPO raises it)")
    scale_by_std: bool = setting(True, "divide advantages by the group std (Dr. GRPO: false; TRL's scale_rewards)")
    drop_zero_variance_groups: bool = setting(False, "train on no group whose rewards are all equal (no signal)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("samples_per_prompt", self.samples_per_prompt >= 2, ">= 2 (a group needs a baseline)")
        self.require("clip_low", 0 <= self.clip_low < 1, "in [0, 1)")
        self.require("clip_high", self.clip_high >= 0, ">= 0")


class GRPO(RLAlgorithm):
    """Group Relative Policy Optimisation. Its variants (Dr. GRPO, DAPO, RLOO) are short subclasses."""

    config_class = GRPOConfig
    token_fields = (PRM_REWARDS, STEP_ENDS)  # collated only when the PRM scored every trajectory

    def advantages(self, batch):
        if PRM_REWARDS.name in batch.fields:
            prm = batch[PRM_REWARDS]
            adv = process_advantages(prm, batch[STEP_ENDS], batch.group_ids, batch.rewards - prm.sum(1),
                                     self.config.scale_by_std)
            return adv * batch.loss_mask
        adv = group_advantages(batch.rewards, batch.group_ids, self.config.scale_by_std)
        return adv[:, None] * batch.loss_mask

    def select_for_update(self, trajectories):
        if not self.config.drop_zero_variance_groups:
            return trajectories
        return [t for group in informative_groups(trajectories) for t in group]

    def loss(self, batch, logprobs, entropy):
        c = self.config
        loss, clipped = clipped_policy_loss(logprobs, batch.old_logprobs, batch.advantages, c.clip_low, c.clip_high)
        self.record("clip_fraction", masked_mean(clipped.float(), batch.loss_mask))
        return {"policy": loss}
