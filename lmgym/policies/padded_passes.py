"""Backbone passes over padded rows without a [batch, query, key] attention mask.

Given a 2-D attention mask with padding, transformers builds a [batch, 1, length, length] mask for SDPA, and
SDPA with a mask cannot use FlashAttention (with grouped-query attention on CUDA it falls back to the math
kernel, which also holds every head's scores): both grow with the square of the context. Here each row's
tokens are moved to its first columns, so the padding comes after every real token and a plain causal pass
(no mask: `is_causal`, FlashAttention) computes each real token from the same keys as the masked pass; the
hidden states are moved back to the caller's columns. Training batches are right-padded already
(lmgym.buffers.batch.collate), so nothing moves; a batch without padding is passed as it is (transformers skips its
mask then); rows with a hole in their mask (not one contiguous run of tokens) keep the mask.

On CUDA the columns are padded to a multiple of 8 first (`column_multiple`): the compiled layers' kernels
are specialised on whether the length's strides are 8-aligned, so lengths of both kinds recompiled the layers
mid-run (5-7 s a step, W1 on an H100); padding after every row's tokens changes no real token's result.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from lmgym.policies.attention_backends import variable_length_attention


def contiguous_starts(attention_mask: torch.Tensor) -> torch.Tensor | None:
    """Each row's first token column [B], or None when some row's tokens are not one contiguous run."""
    columns = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    starts = attention_mask.int().argmax(-1)
    ends = starts + attention_mask.sum(-1)
    runs = (columns >= starts[:, None]) & (columns < ends[:, None])
    return starts if bool((runs == attention_mask.bool()).all()) else None


def _rotate(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """x [B, L, ...] with row b's column (j + shift[b]) mod L moved to column j."""
    length = x.shape[1]
    index = (torch.arange(length, device=x.device) + shift[:, None]) % length
    return x.gather(1, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))


def column_multiple(device: torch.device) -> int:
    """The multiple passes pad their length to: 8 on CUDA (aligned strides, one compiled kernel), else 1."""
    return 8 if device.type == "cuda" else 1


def backbone_hidden(backbone: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    multiple: int | None = None) -> torch.Tensor:
    """Last hidden states [B, L, H] of a decoder backbone (a Hugging Face model without its head, or a DDP/FSDP
    wrapper of one) over `input_ids` [B, L] padded as `attention_mask` [B, L] says (1: token, 0: padding), each
    token at position 0, 1, ... of its row; at padded columns they are meaningless. The pass runs on columns
    padded to a multiple of `multiple` (default: `column_multiple` of the device)."""
    length = input_ids.shape[1]
    extra = -length % (column_multiple(input_ids.device) if multiple is None else multiple)
    if extra:  # after every row's last token: causal attention never lets a real token see them
        input_ids = F.pad(input_ids, (0, extra), value=0)
        attention_mask = F.pad(attention_mask, (0, extra), value=0)
        return _backbone_hidden(backbone, input_ids, attention_mask)[:, :length]
    return _backbone_hidden(backbone, input_ids, attention_mask)


def _backbone_hidden(backbone: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    with variable_length_attention(input_ids.device):
        starts = None if bool(attention_mask.all()) else contiguous_starts(attention_mask)
        if starts is None:  # no padding (no mask built), or rows with holes (the mask it takes)
            positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
            return backbone(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                            use_cache=False).last_hidden_state
        moved = bool(starts.any())
        ids = _rotate(input_ids, starts) if moved else input_ids
        hidden = backbone(input_ids=ids, use_cache=False).last_hidden_state  # positions 0, 1, ...: causal, no mask
        return _rotate(hidden, -starts) if moved else hidden
