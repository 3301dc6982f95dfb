"""Log-probs of the tokens a loss reads: the policy's own sampled tokens (`Batch.loss_mask`), 0 elsewhere.

A multi-turn row is mostly the env's turns (retrieved passages, a critic's replies, tool results): the RAG
agent's gpu preset injects three passages after each of up to three 64-token searches. No loss term reads a
log-prob there, so when at
most PACK_BELOW of a micro-batch's positions are sampled, a policy with a backbone
(`BackbonePolicy.completion_outputs(select=...)`) runs its lm-head and log-softmax on those positions alone. A
single-turn micro-batch (only its padding unread) takes the full pass, as before, so its numbers stay bit for bit
what they were; any other policy computes every position. The unread positions read 0 either way.
"""
from __future__ import annotations

import torch

from lmgym.buffers import Batch
from lmgym.policies.base import BackbonePolicy, Policy

PACK_BELOW = 0.5  # the largest share of sampled positions for which the lm-head runs on them alone


def trained_outputs(policy: Policy, batch: Batch, temperature: float, entropy_grad: bool = False,
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(log-probs, entropies) [B, C] where `batch.loss_mask` is set, 0 elsewhere, and the completion hidden
    states [B, C, H] of a backbone policy (None for another policy)."""
    select = batch.loss_mask > 0
    if isinstance(policy, BackbonePolicy):
        packed = select if int(select.sum()) <= PACK_BELOW * select.numel() else None
        logprobs, entropy, hidden = policy.completion_outputs(
            batch.input_ids, batch.attention_mask, batch.completion_positions, temperature,
            entropy_grad=entropy_grad, select=packed)
    else:
        (logprobs, entropy), hidden = policy.token_logprobs(batch.input_ids, batch.attention_mask,
                                                            batch.completion_positions, temperature), None
    return logprobs.masked_fill(~select, 0.0), entropy.masked_fill(~select, 0.0), hidden
