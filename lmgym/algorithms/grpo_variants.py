"""GRPO's variants, each a short subclass of `GRPO` (algorithms/grpo.py) whose differences are mostly defaults.

- Dr. GRPO (Liu et al., 2025, "Understanding R1-Zero-Like Training"): GRPO without its two biases. No division by
  the group std (question-difficulty bias) and a constant length normaliser instead of per-sequence means
  (response-length bias): the loss sums token terms and divides by (sequences x completion budget), the same for
  every sequence.
- RLOO (Ahmadian et al., 2024): REINFORCE with a leave-one-out baseline, A_i = r_i - mean of the other G - 1.
- DAPO (Yu et al., 2025): GRPO with clip-higher, token-level loss, dynamic sampling and a soft overlong penalty.
  Dynamic sampling: groups whose env rewards (before the length penalty; combined by `reward_combination`) are
  all equal carry no signal; they are dropped and more groups are collected (at most `max_refill_rounds` extra
  rounds) until `prompts_per_iteration` informative groups are in hand. The reward/accuracy metrics cover every
  sampled episode, dropped ones included.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from lmgym.algorithms.advantages import informative_groups, leave_one_out_advantages
from lmgym.algorithms.grpo import GRPO, GRPOConfig
from lmgym.algorithms.losses import completion_budget
from lmgym.algorithms.reward_combination import combine_batch_rewards
from lmgym.training.config import setting


# ---------------------------------------------------------------------- Dr. GRPO
@dataclass
class DrGRPOConfig(GRPOConfig):
    """GRPO settings with Dr. GRPO's defaults (`loss_length_normalizer` sets the constant; 0: the budget)."""

    scale_by_std: bool = False          # no division by the group std (question-difficulty bias)
    loss_aggregation: str = "constant"  # constant length normaliser (response-length bias)
    kl_coeff: float = 0.0               # no KL term by default


class DrGRPO(GRPO):
    """GRPO done right: same loss, unbiased advantages and normaliser (all in the config)."""

    config_class = DrGRPOConfig


# ---------------------------------------------------------------------- RLOO
@dataclass
class RLOOConfig(GRPOConfig):
    """GRPO's settings; `scale_by_std` is unused. With one update epoch the clipped ratio is 1, so the
    gradient is exactly REINFORCE with the leave-one-out baseline."""

    kl_coeff: float = 0.0             # no KL term by default


class RLOO(GRPO):
    config_class = RLOOConfig

    def advantages(self, batch):
        return leave_one_out_advantages(batch.rewards, batch.group_ids)[:, None] * batch.loss_mask


# ---------------------------------------------------------------------- DAPO
def overlong_penalty(length: int, max_length: int, buffer: int, factor: float = 1.0) -> float:
    """0 up to `max_length - buffer` tokens, then linearly down to -factor at `max_length` (and beyond)."""
    if buffer <= 0 or length <= max_length - buffer:
        return 0.0
    return -factor * min(length - (max_length - buffer), buffer) / buffer


@dataclass
class DAPOConfig(GRPOConfig):
    """DAPO's defaults: no KL, asymmetric clip, token mean over the batch, dynamic sampling on."""

    kl_coeff: float = 0.0                   # DAPO drops the KL term
    clip_low: float = 0.2
    clip_high: float = 0.28                 # clip-higher
    loss_aggregation: str = "token_mean"    # token-level loss over the whole batch
    drop_zero_variance_groups: bool = setting(True, "dynamic sampling: drop groups whose rewards are all equal "
                                                    "and collect more")
    max_refill_rounds: int = setting(3, "extra collection rounds to refill dropped groups")
    overlong_buffer: int = setting(16, "soft length penalty over the last N tokens of the completion budget (0: off)")
    overlong_penalty_factor: float = setting(1.0, "length penalty at the full completion budget")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("max_refill_rounds", self.max_refill_rounds >= 0, ">= 0")
        budget = completion_budget(self)  # one action's; a multi-step env's budget is a multiple of it
        self.require("overlong_buffer", 0 <= self.overlong_buffer < budget,
                     f"in [0, {budget}) (the completion budget of one action: loss_length_normalizer, else "
                     f"max_new_tokens)")
        self.require("overlong_penalty_factor", self.overlong_penalty_factor >= 0, ">= 0")


class DAPO(GRPO):
    config_class = DAPOConfig

    def sample_groups(self, num_prompts, first_group_id, seeds=None):
        trajectories = super().sample_groups(num_prompts, first_group_id, seeds)
        c = self.config
        for t in trajectories:
            penalty = overlong_penalty(t.num_generated_tokens, self.completion_budget, c.overlong_buffer,
                                       c.overlong_penalty_factor)
            t.add_shaping("overlong_penalty", penalty)  # dynamic sampling and metrics read the unshaped env_reward
            self.record("overlong_penalty", penalty)
        return trajectories

    def collect(self):
        trajectories = super().collect()
        wanted, rounds = self.prompts_per_rank, 0  # this process's share of the batch
        while self.config.drop_zero_variance_groups and rounds < self.config.max_refill_rounds:
            # judge groups by the rewards training will use (this rank's batch; train_iteration combines all ranks')
            combine_batch_rewards(trajectories, self.config.reward_combination, across_ranks=False)
            found = len(informative_groups(trajectories))
            if found >= wanted:
                break
            rate = found / len({t.group_id for t in trajectories})  # expected informative fraction
            more = min(wanted, math.ceil((wanted - found) / rate)) if rate > 0 else wanted
            trajectories += self.sample_groups(more, max(t.group_id for t in trajectories) + 1)
            rounds += 1
        self.record("refill_rounds", rounds)
        return trajectories

    def select_for_update(self, trajectories):
        if not self.config.drop_zero_variance_groups:
            return trajectories
        return [t for group in informative_groups(trajectories)[:self.prompts_per_rank] for t in group]
