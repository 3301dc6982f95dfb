"""GRPO (DeepSeekMath): group-relative advantages and a clipped importance ratio, no value model.

With a PRM (`prm_weight` > 0) the advantages are DeepSeekMath's process supervision
(`process_advantages`): each step's PRM reward normalised over its group's steps and summed from the
token's step to the end, plus the group-normalised rest of the reward (the env's, times
`outcome_weight`, and any shaping paid at the end). With `prm_credit="progress"` each step earns its PRM
score difference and its tokens get the step's own normalised credit beside the outcome advantage
(algorithms/prm/step_credit.py). `refresh` retrains the PRM on the policy's own samples as it moves
(algorithms/prm/refresh.py)."""
from __future__ import annotations

from dataclasses import dataclass

from lmgym.algorithms.advantages import group_advantages, informative_groups, process_advantages
from lmgym.algorithms.base import RLAlgorithm
from lmgym.training import distributed as dist
from lmgym.training.config import ConfigError, setting
from lmgym.algorithms.config import RLConfig
from lmgym.algorithms.losses import clipped_policy_loss, masked_mean
from lmgym.algorithms.prm.reward import PRM_REWARDS, STEP_ENDS
from lmgym.algorithms.prm.step_credit import progress_advantages
from lmgym.algorithms.prm.refresh import VerifierRefresh, VerifierRefreshConfig


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


class GRPO(RLAlgorithm):
    """Group Relative Policy Optimisation. Its variants (Dr. GRPO, DAPO, RLOO) are short subclasses."""

    config_class = GRPOConfig
    token_fields = (PRM_REWARDS, STEP_ENDS)  # collated only when the PRM scored every trajectory

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        c, self.verifier_refresh = self.config, None
        if c.refresh.every > 0:
            if self.prm is None:
                raise ConfigError.of_field(type(c).__name__, "refresh.every", f"is {c.refresh.every}, but no PRM "
                                           f"was given to refresh: pass prm= or set refresh.every to 0")
            if dist.world_size() > 1:
                raise ConfigError.of_field(type(c).__name__, "refresh.every", "needs a single process for now (each "
                                           "rank would train its own copy of the verifier)")
            self.verifier_refresh = VerifierRefresh(self.prm, c.refresh, c.seed, c.bf16, f"{c.output_dir}/verifier")

    def after_rewards(self, trajectories):
        if self.verifier_refresh is None:
            return {}
        return self.verifier_refresh.observe(trajectories, self.iteration)

    def advantages(self, batch):
        c = self.config
        if PRM_REWARDS.name in batch.fields:
            prm = batch[PRM_REWARDS]
            outcome = batch.rewards - prm.sum(1)
            if c.prm_credit == "progress":
                adv = progress_advantages(prm, batch[STEP_ENDS], batch.group_ids, outcome, c.prm_weight,
                                          c.scale_by_std)
            else:
                adv = process_advantages(prm, batch[STEP_ENDS], batch.group_ids, outcome, c.scale_by_std)
            return adv * batch.loss_mask
        adv = group_advantages(batch.rewards, batch.group_ids, c.scale_by_std)
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

    def extra_state(self):
        """The refreshed verifier's weights (nothing when it is not refreshed)."""
        return {"verifier": self.prm.state_dict()} if self.verifier_refresh is not None else {}

    def load_extra_state(self, state):
        if self.verifier_refresh is not None and "verifier" in state:
            self.prm.load_state_dict(state["verifier"])
