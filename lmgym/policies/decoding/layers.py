"""A Llama-family decoder layer as two pure functions of tensors, for the fast decoder's fused weights.

`attention_inputs` (norm, fused q/k/v projection, per-head norms, rotary) and `attention_output_and_mlp`
(output projection, residual, norm, fused gate/up, SiLU gate, down projection, residual) take every
weight as an argument, so one compiled version of each serves all layers and batch sizes
(`compiled_layer_functions`); the KV-cache writes and attention run between them, outside compilation.
Their dtypes follow what bf16 autocast did with the model's modules: projections in `w.qkv.dtype`, the
residual stream and the norms in the model's dtype.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from lmgym.policies.decoding.weights import LayerWeights


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm: normalise in float32, scale in the weight's dtype."""
    dtype = x.dtype
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attention_inputs(h: torch.Tensor, w: LayerWeights, cos: torch.Tensor, sin: torch.Tensor, n_heads: int,
                     kv_heads: int, head_dim: int, eps: float, head_eps: float | None):
    """(q [B, H, T, D], k, v [B, KV, T, D]) in the projection dtype, for hidden states h [B, T, hidden]."""
    B, T, _ = h.shape
    dtype = w.qkv.dtype
    x = rms_norm(h, w.input_norm, eps).to(dtype)
    qkv = F.linear(x, w.qkv, w.qkv_bias)
    q, k, v = qkv.split([n_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    q = q.view(B, T, n_heads, head_dim).transpose(1, 2)
    k = k.view(B, T, kv_heads, head_dim).transpose(1, 2)
    v = v.view(B, T, kv_heads, head_dim).transpose(1, 2)
    if w.q_norm is not None:  # Qwen3-style per-head norms
        q, k = rms_norm(q, w.q_norm, head_eps), rms_norm(k, w.k_norm, head_eps)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    return q.to(dtype), k.to(dtype), v


def attention_output_and_mlp(h: torch.Tensor, attended: torch.Tensor, w: LayerWeights, eps: float) -> torch.Tensor:
    """The layer's output: h plus the projected attention `attended` [B, T, H*D], then plus the gated MLP."""
    dtype = w.o.dtype
    h = h + F.linear(attended.to(dtype), w.o, w.o_bias)
    x = rms_norm(h, w.post_norm, eps).to(dtype)
    gate, up = F.linear(x, w.gate_up).chunk(2, dim=-1)
    return h + F.linear(F.silu(gate) * up, w.down)


_COMPILED: dict = {}


def _prefill_attention_inputs(*args):
    return attention_inputs(*args)


def _prefill_attention_output_and_mlp(*args):
    return attention_output_and_mlp(*args)


def compiled_layer_functions(backend: str = "inductor", dynamic: bool = False):
    """`torch.compile`d versions of the two functions (made once per process, backend and `dynamic`): Inductor
    fuses each norm, the rotary embedding, the SiLU gate and the residual adds into a few kernels.

    dynamic=False: the decode step's one-token passes (a graph per batch shape at most, under CUDA graphs);
    dynamic=True: passes of many tokens (prefills, appended turns), whose batch and length change at every call,
    compiled once for symbolic shapes. They compile wrappers of their own, so the two kinds keep apart caches
    and recompilation counts in dynamo (which keys both on a function's code)."""
    key = (backend, dynamic)
    if key not in _COMPILED:
        inputs, output = ((_prefill_attention_inputs, _prefill_attention_output_and_mlp) if dynamic
                          else (attention_inputs, attention_output_and_mlp))
        _COMPILED[key] = (torch.compile(inputs, fullgraph=True, backend=backend, dynamic=dynamic or None),
                          torch.compile(output, fullgraph=True, backend=backend, dynamic=dynamic or None))
    return _COMPILED[key]
