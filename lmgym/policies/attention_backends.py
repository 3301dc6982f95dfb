"""Which scaled-dot-product-attention kernels the variable-length passes may use.

cuDNN's attention builds an execution plan for each new shape on the host: in training and scoring
passes, where every micro-batch has another length, that planning cost more host time per layer call than
the GPU work it launched, with the GPU idle meanwhile (benchmarks/RESULTS.md has the profile). Those passes
(the policy's, a separate critic's and a PRM's backbones, and the decoder's prefill) use FlashAttention or
the memory-efficient kernel instead, which take any shape without planning; the fixed-shape decode step
inside a CUDA graph, where planning happens once at capture, keeps PyTorch's choice.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

def variable_length_attention(device: torch.device):
    """A context choosing FlashAttention, memory-efficient or math SDPA (not cuDNN) on CUDA; nothing elsewhere."""
    if torch.device(device).type != "cuda":
        return nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])
