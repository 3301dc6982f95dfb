"""Sampling completions: the plain batched decode loop and the fast decoder.

- `generation`: batched sampling with a KV cache on the CPU and the GPU (left-padded prompts, Gumbel-max or
  batch-invariant keyed sampling, stop strings), recording each sampled token's log-probability;
- `fast`: the fast path for Llama-family models: a static KV cache, one CUDA graph per decode step, few host
  syncs;
- `step`: the fast decoder's per-step sampling and bookkeeping on device tensors;
- `layers`: a decoder layer as two pure functions of tensors, over the fast decoder's fused weights;
- `weights`: the fast decoder's own copy of the projection weights, in the decode dtype, q/k/v and gate/up fused.

Only `generation` is imported here: the fast decoder loads when a policy first uses it.
"""
from lmgym.policies.decoding.generation import Generation, RowKeys, StopLists

__all__ = ["Generation", "RowKeys", "StopLists"]
