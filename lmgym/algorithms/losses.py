"""Loss aggregation: how per-token losses become one number, consistently across gradient accumulation.

Each micro-batch contributes sum(per_token_loss * weights); the weights are chosen so the sum over
all micro-batches of one optimizer step equals the stated aggregate, whatever the split:
- token_mean:    every generated token of the step counts equally (DAPO; no length bias)
- sequence_mean: mean over sequences of each sequence's token mean (original GRPO; favours short wrong answers)
- constant:      token sum / (num sequences * constant length) (Dr. GRPO)
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from lmgym.episodes.env_state import episode_step_limit, is_multi_step


def completion_budget(config, env=None) -> int:
    """Most tokens one episode may generate: the "constant" loss normaliser and DAPO's overlong limit.

    `loss_length_normalizer` when set, else `max_new_tokens` per action times the env's step limit
    (`episode_step_limit`) for multi-step envs (`is_multi_step`). Without an env: one action's
    budget, the smallest any env gives (what a config can check on its own).
    """
    steps = 1
    if env is not None and is_multi_step(env):
        steps = episode_step_limit(env)
    return config.loss_length_normalizer or config.max_new_tokens * steps


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


MAX_LOG_RATIO = 20.0


def clipped_policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                        clip_low: float, clip_high: float, dual_clip: float = 0.0
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate per token: -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A), r = pi / pi_old.

    `dual_clip` c > 1 (Ye et al., 2020) also bounds the loss of negative advantages by -c A, so a
    token whose ratio exploded cannot dominate the step. Returns (loss, clipped) where `clipped` marks
    the tokens whose gradient the clipping removed.
    """
    # exp of a log-ratio above ~88 is inf in float32, and the clipped branch's zero gradient times inf
    # is NaN; bounding the log-ratio at 20 (a ratio of 5e8, far outside any clip range) keeps it finite
    ratio = torch.exp((logprobs - old_logprobs).clamp(max=MAX_LOG_RATIO))
    unclipped = -ratio * advantages
    clipped = -ratio.clamp(1 - clip_low, 1 + clip_high) * advantages
    loss = torch.maximum(unclipped, clipped)
    was_clipped = clipped > unclipped
    if dual_clip > 0:
        bound = -dual_clip * advantages
        dual = (advantages < 0) & (loss > bound)
        loss = torch.where(dual, bound, loss)
        was_clipped = was_clipped | dual
    return loss, was_clipped.detach()


def clipped_value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip: float
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """0.5 * max((V - R)^2, (V_clip - R)^2), V_clip = V_old + clamp(V - V_old, -clip, clip); clip 0: unclipped.

    Returns (loss, clipped) like `clipped_policy_loss`.
    """
    loss = 0.5 * (values - returns) ** 2
    if clip <= 0:
        return loss, torch.zeros_like(loss, dtype=torch.bool)
    v_clipped = old_values + (values - old_values).clamp(-clip, clip)
    loss_clipped = 0.5 * (v_clipped - returns) ** 2
    return torch.maximum(loss, loss_clipped), (loss_clipped > loss).detach()


def clipped_ratio_loss(batch, logprobs: torch.Tensor, clip_low: float, clip_high: float,
                       record: Callable[[str, torch.Tensor], None]) -> dict[str, torch.Tensor]:
    """GRPO's and MCTSSearch's loss terms: {"policy": `clipped_policy_loss` of the batch's advantages against its
    behaviour log-probs}; records `clip_fraction`, the share of the batch's loss tokens whose ratio was clipped."""
    loss, clipped = clipped_policy_loss(logprobs, batch.old_logprobs, batch.advantages, clip_low, clip_high)
    record("clip_fraction", masked_mean(clipped.float(), batch.loss_mask))
    return {"policy": loss}
