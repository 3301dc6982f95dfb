"""Dr. GRPO (Liu et al., 2025, "Understanding R1-Zero-Like Training"): GRPO without its two biases.

No division by the group std (question-difficulty bias) and a constant length normaliser instead of
per-sequence means (response-length bias): the loss sums token terms and divides by
(sequences x completion budget), the same for every sequence.
"""
from __future__ import annotations

from dataclasses import dataclass

from lmgym.algorithms.grpo import GRPO, GRPOConfig


@dataclass
class DrGRPOConfig(GRPOConfig):
    """GRPO settings with Dr. GRPO's defaults (`loss_length_normalizer` sets the constant; 0: the budget)."""

    scale_by_std: bool = False          # no division by the group std (question-difficulty bias)
    loss_aggregation: str = "constant"  # constant length normaliser (response-length bias)
    kl_coeff: float = 0.0               # no KL term by default


class DrGRPO(GRPO):
    """GRPO done right: same loss, unbiased advantages and normaliser (all in the config)."""

    config_class = DrGRPOConfig
