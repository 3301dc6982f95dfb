"""RLOO (Ahmadian et al., 2024): REINFORCE with a leave-one-out baseline, A_i = r_i - mean of the other G - 1."""
from __future__ import annotations

from dataclasses import dataclass

from lmgym.algorithms.advantages import leave_one_out_advantages
from lmgym.algorithms.grpo import GRPO, GRPOConfig


@dataclass
class RLOOConfig(GRPOConfig):
    """GRPO's settings; `scale_by_std` is unused. With one update epoch the clipped ratio is 1, so the
    gradient is exactly REINFORCE with the leave-one-out baseline."""

    kl_coeff: float = 0.0             # no KL term by default


class RLOO(GRPO):
    config_class = RLOOConfig

    def advantages(self, batch):
        return leave_one_out_advantages(batch.rewards, batch.group_ids)[:, None] * batch.loss_mask
