"""The backbone's passes in training and scoring: no [batch, query, key] mask, no cuDNN attention, and
activation checkpointing.

Backbone passes over padded rows without a mask (`backbone_hidden`). Given a 2-D attention mask with
padding, transformers builds a [batch, 1, length, length] mask for SDPA, and
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

Which scaled-dot-product-attention kernels the variable-length passes may use (`variable_length_attention`).
cuDNN's attention builds an execution plan for each new shape on the host: in training and scoring
passes, where every micro-batch has another length, that planning cost more host time per layer call than
the GPU work it launched, with the GPU idle meanwhile (benchmarks/RESULTS.md has the profile). Those passes
(the policy's, a separate critic's and a PRM's backbones, and the decoder's prefill) use FlashAttention or
the memory-efficient kernel instead, which take any shape without planning; the fixed-shape decode step inside
a CUDA graph, where planning happens once at capture, keeps PyTorch's choice.

Activation checkpointing of a Hugging Face model's decoder layers (TRL's `gradient_checkpointing`,
`enable_activation_checkpointing`). It is transformers' own: each decoder layer (a `GradientCheckpointingLayer`)
runs under `torch.utils.checkpoint` with `use_reentrant=False` while it is in training mode with gradients on, so
its activations are recomputed in the backward pass instead of kept; passes without gradients (sampling,
the KL reference, scoring) run as before. Where transformers puts the checkpoint depends on its release (around
the layer's call up to 5.17, inside its `forward` later); module hooks (FSDP2's all-gathers) stay outside it.
A compiled layer (`HFPolicy.compile_layers`) checkpoints itself instead, inside its compiled code, so that the
compiler owns the recomputation (policies/compiled_layers.py says why). Either way the gradients are those of a
pass without it (tests/test_gradient_checkpointing.py, tests/test_compile_checkpointing.py). Non-reentrant
checkpointing differentiates LoRA adapters behind a frozen embedding; transformers also makes the embedding's
output require grad. Every uncompiled checkpoint recomputes under the attention kernels its forward could use
(`same_attention_kernels`): the backward runs outside `variable_length_attention`.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

USE_REENTRANT = False  # torch's recommended mode: no inputs that must require grad, works under DDP and FSDP2
COMPILED_CHECKPOINT = "lmgym_compiled_checkpoint"  # a compiled layer's flag: it checkpoints inside its compiled code


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


def variable_length_attention(device: torch.device):
    """A context choosing FlashAttention, memory-efficient or math SDPA (not cuDNN) on CUDA; nothing elsewhere."""
    if torch.device(device).type != "cuda":
        return nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


_KERNEL_FLAGS = ((SDPBackend.FLASH_ATTENTION, torch.backends.cuda.flash_sdp_enabled),
                 (SDPBackend.EFFICIENT_ATTENTION, torch.backends.cuda.mem_efficient_sdp_enabled),
                 (SDPBackend.MATH, torch.backends.cuda.math_sdp_enabled),
                 (SDPBackend.CUDNN_ATTENTION, torch.backends.cuda.cudnn_sdp_enabled))


def same_attention_kernels():
    """`context_fn` of a non-reentrant checkpoint: its recomputation, in the backward, may use only the SDPA
    kernels its forward could. The forward runs inside `variable_length_attention` (no cuDNN) and the backward
    outside it, where PyTorch may pick cuDNN's attention, which saves a log-sum-exp of another shape than the
    memory-efficient kernel: `torch.utils.checkpoint` then raised "Recomputed values ... have different metadata"
    (a one-row micro-batch of the RAG agent's GRPO on an H200)."""
    allowed = [backend for backend, enabled in _KERNEL_FLAGS if enabled()]
    return nullcontext(), (sdpa_kernel(allowed) if allowed else nullcontext())


def enable_activation_checkpointing(model: torch.nn.Module) -> None:
    """Checkpoint every decoder layer of `model` (a transformers model, or a peft model around one); its
    KV cache is turned off for forward passes (sampling turns it back on for itself). A model whose
    architecture does not support it is transformers' one-line ValueError."""
    kwargs = {"use_reentrant": USE_REENTRANT, "context_fn": same_attention_kernels}
    enable = getattr(model, "activation_checkpointing_enable", None)  # transformers 5.x: the old name warns there
    if enable is not None:
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    config = getattr(model, "config", None)
    if config is not None:
        config.use_cache = False


def checkpointed_layers(model: torch.nn.Module) -> int:
    """How many of `model`'s decoder layers checkpoint their activations (transformers' checkpoint, or a
    compiled layer's own: policies/compiled_layers.py)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    return sum(isinstance(m, GradientCheckpointingLayer)
               and (bool(m.gradient_checkpointing) or bool(getattr(m, COMPILED_CHECKPOINT, False)))
               for m in model.modules())
