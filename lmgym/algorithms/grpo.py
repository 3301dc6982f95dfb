"""GRPO (DeepSeekMath): group-relative advantages and a clipped importance ratio, no value model.

A_i = (r_i - mean of the group's rewards) / (their std, with `scale_by_std`) for every token of episode i; the
loss is `clipped_ratio_loss` (algorithms/losses.py). With a PRM (`prm_weight` > 0) the advantages are step-level
and the verifier may be refreshed as the policy moves (`refresh`): `ProcessCredit`
(algorithms/prm/process_credit.py). docs/algorithms.md, "GRPO on one page", follows one iteration call by call."""
from __future__ import annotations

from dataclasses import dataclass

from lmgym.algorithms.advantages import group_advantages, informative_groups
from lmgym.algorithms.base import RLAlgorithm
from lmgym.algorithms.config import RLConfig
from lmgym.algorithms.losses import clipped_ratio_loss
from lmgym.algorithms.prm.process_credit import ProcessCredit
from lmgym.algorithms.prm.refresh import VerifierRefreshConfig
from lmgym.training.config import setting


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
    refresh: VerifierRefreshConfig = setting(VerifierRefreshConfig(), "retrain the PRM on the policy's own samples "
                                             "every N iterations (`refresh: {every: 2}`; every 0: off)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("samples_per_prompt", self.samples_per_prompt >= 2, ">= 2 (a group needs a baseline)")
        self.require("clip_low", 0 <= self.clip_low < 1, "in [0, 1)")
        self.require("clip_high", self.clip_high >= 0, ">= 0")
        self.require("prm_weight", self.prm_credit != "progress" or self.prm_weight <= 1,
                     "<= 1 with prm_credit 'progress' (the step credit must not outweigh the outcome advantage)")


class GRPO(ProcessCredit, RLAlgorithm):
    """Group Relative Policy Optimisation; with a PRM, `ProcessCredit`'s step credit. Its variants (Dr. GRPO, DAPO,
    RLOO) are short subclasses (algorithms/grpo_variants.py)."""

    config_class = GRPOConfig

    def outcome_advantages(self, batch):
        adv = group_advantages(batch.rewards, batch.group_ids, self.config.scale_by_std)
        return adv[:, None] * batch.loss_mask

    def select_for_update(self, trajectories):
        if not self.config.drop_zero_variance_groups:
            return trajectories
        return [t for group in informative_groups(trajectories) for t in group]

    def loss(self, batch, logprobs, entropy):
        c = self.config
        return clipped_ratio_loss(batch, logprobs, c.clip_low, c.clip_high, self.record)
