"""Loss aggregation: how per-token losses become one number, consistently across gradient accumulation.

Each micro-batch contributes sum(per_token_loss * weights); the weights are chosen so the sum over
all micro-batches of one optimizer step equals the stated aggregate, whatever the split:
- token_mean:    every generated token of the step counts equally (DAPO; no length bias)
- sequence_mean: mean over sequences of each sequence's token mean (original GRPO; favours short wrong answers)
- constant:      token sum / (num sequences * constant length) (Dr. GRPO)
"""
from __future__ import annotations

import torch


def token_weights(mask: torch.Tensor, mode: str, step_tokens: float, step_sequences: int, constant_length: int
                  ) -> torch.Tensor:
    """Per-token weights [B, T] for one micro-batch inside an optimizer step.

    step_tokens / step_sequences: generated tokens and sequences in the whole optimizer step
    (summed over micro-batches, and over processes when distributed).
    """
    if mode == "token_mean":
        return mask / max(step_tokens, 1.0)
    if mode == "sequence_mean":
        lengths = mask.sum(-1, keepdim=True).clamp(min=1.0)
        return mask / lengths / max(step_sequences, 1)
    if mode == "constant":
        return mask / (max(step_sequences, 1) * constant_length)
    raise ValueError(f"unknown loss aggregation {mode!r}: token_mean, sequence_mean or constant")


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1.0)
