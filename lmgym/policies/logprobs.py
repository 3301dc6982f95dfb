"""Per-token log-probabilities of given completion tokens, computed in chunks.

The lm-head and log-softmax run over a few positions at a time, so the full [batch, length, vocab]
logits never sit in memory at once; with gradients, each chunk is checkpointed and recomputed in
the backward pass.

`sampled_token_outputs` gives an RL loss the log-probs it reads: those of the policy's own sampled tokens
(`Batch.loss_mask`), 0 elsewhere. A multi-turn row is mostly the env's turns (retrieved passages, a critic's
replies, tool results: the RAG agent's gpu preset injects three passages after each of up to three 64-token
searches), and no loss term reads a log-prob there. So when at most PACK_BELOW of a micro-batch's positions are
sampled, a policy with a backbone (`BackbonePolicy.completion_outputs(select=...)`) runs its lm-head and
log-softmax on those positions alone. A single-turn micro-batch (only its padding unread) takes the full pass,
as before, so its numbers stay bit for bit what they were; any other policy computes every position.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.utils.checkpoint import checkpoint

from lmgym.policies.base import BackbonePolicy, Policy

if TYPE_CHECKING:
    from lmgym.buffers import Batch

PACK_BELOW = 0.5  # the largest share of sampled positions for which the lm-head runs on them alone


def _chunk_logprobs(hidden: torch.Tensor, head_weight: torch.Tensor, targets: torch.Tensor, temperature: float,
                    entropy_grad: bool = False):
    logits = (hidden @ head_weight.T).float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, -1)
    token_logp = logp_all.gather(-1, targets[..., None]).squeeze(-1)
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return token_logp, entropy


# rows x positions of one chunk's logits at most: 2,048 x a 152k vocabulary in float32 is 1.2 GB
MAX_CHUNK_TOKENS = 2048


def chunked_token_logprobs(
    hidden: torch.Tensor,
    head_weight: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    chunk_size: int = 64,
    entropy_grad: bool = False,
    max_chunk_tokens: int = MAX_CHUNK_TOKENS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs and entropies of `targets` [B, T] under logits = hidden [B, T, H] @ head_weight.T.

    `chunk_size` counts positions (times the batch), at most `max_chunk_tokens` // B of them, so a chunk's
    float32 logits never exceed max_chunk_tokens x vocabulary, however many rows a token-budget micro-batch
    holds; 0 computes everything at once. Entropies carry gradients only with `entropy_grad` (an entropy
    bonus in the loss).
    """
    if chunk_size > 0:
        chunk_size = max(1, min(chunk_size, max_chunk_tokens // max(hidden.shape[0], 1)))
    if chunk_size <= 0 or hidden.shape[1] <= chunk_size:
        return _chunk_logprobs(hidden, head_weight, targets, temperature, entropy_grad)
    parts_lp, parts_ent = [], []
    for start in range(0, hidden.shape[1], chunk_size):
        h, t = hidden[:, start:start + chunk_size], targets[:, start:start + chunk_size]
        if torch.is_grad_enabled() and (h.requires_grad or head_weight.requires_grad):
            lp, ent = checkpoint(_chunk_logprobs, h, head_weight, t, temperature, entropy_grad, use_reentrant=False)
        else:
            lp, ent = _chunk_logprobs(h, head_weight, t, temperature, entropy_grad)
        parts_lp.append(lp)
        parts_ent.append(ent)
    return torch.cat(parts_lp, 1), torch.cat(parts_ent, 1)


def scatter_selected(select: torch.Tensor, *packed: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each of `packed` [1, N] (values at the N True positions of `select` [B, C], row-major) as [B, C], 0 at
    the other positions (gradients flow to the packed values)."""
    return tuple(values.new_zeros(select.shape).masked_scatter(select, values[0]) for values in packed)


def completion_hidden_states(hidden: torch.Tensor, completion: int | torch.Tensor) -> torch.Tensor:
    """The hidden states [B, C, H] that predict each completion token (state t predicts token t + 1).

    `completion` is a start column shared by every row (int), or the positions [B, C] of each row's
    completion tokens (right-padded batches, see lmgym.buffers.batch.collate).
    """
    if isinstance(completion, int):
        return hidden[:, completion - 1:-1]
    index = (completion - 1).clamp(min=0)
    return hidden.gather(1, index.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))


def completion_targets(input_ids: torch.Tensor, completion: int | torch.Tensor) -> torch.Tensor:
    """The completion token ids [B, C] (same `completion` convention as completion_hidden_states)."""
    if isinstance(completion, int):
        return input_ids[:, completion:]
    return input_ids.gather(1, completion)


def sampled_token_outputs(policy: Policy, batch: Batch, temperature: float, entropy_grad: bool = False,
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(log-probs, entropies) [B, C] where `batch.loss_mask` is set, 0 elsewhere, and the completion hidden
    states [B, C, H] of a backbone policy (None for another policy); see the module docstring."""
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
