"""The fast decoder's own copy of the projection weights: in the decode dtype, q/k/v and gate/up fused.

Under bf16 autocast every decode step cast each fp32 projection weight to bf16 again (a cast kernel per
weight and the memory traffic of a copy of the weights every step, inside the CUDA graph). Here the weights
are cast once per `generate` call into fixed buffers (so captured graphs stay valid) and the three
attention input projections, and the MLP's gate and up projections, become one matrix each: three
matmuls become one, two become one. A LoRA layer contributes its base weight plus its active adapters'
deltas (`get_delta_weight`, scaling included), so sampling computes with the merged weights.

Numerically this is what autocast computed: the same bf16 weights, the inputs cast to bf16, the
residual stream and the norms left in the model's dtype. Weights it cannot copy whole (4-bit layers,
DoRA, FSDP shards outside a gather) make `DecodeWeights.build` return None, and the decoder keeps
calling the model's own modules.

A refresh that would copy what the buffers already hold is skipped (`DecodeWeights.source_state`): a multi-step
run makes many decoding calls between two optimizer steps (each engine round, each host sync of a tree), and
merging every LoRA delta again each time was host work with the GPU idle. The copy is redone when any source
tensor moved or was changed in place (PyTorch's version counter: optimizer steps, `copy_`, `load_state_dict`),
when an optimizer anywhere in the process stepped (a fused optimizer's kernel does not count versions), or when
a LoRA layer's adapter settings changed. A change it cannot see (`param.data` edited in place) needs
`FastDecoder.weights_changed()`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

_ATTN = ("q_proj", "k_proj", "v_proj")
_MLP = ("gate_proj", "up_proj")
_step_count = [0]  # optimizer steps taken in this process since the hook was installed
_step_hook = None


def _count_optimizer_step(*_) -> None:
    _step_count[0] += 1


def _watch_optimizer_steps() -> None:
    """Count every optimizer step of the process (a global post-step hook, installed once)."""
    global _step_hook
    if _step_hook is None:
        _step_hook = register_optimizer_step_post_hook(_count_optimizer_step)


def _tensor_state(tensor: torch.Tensor | None) -> tuple | None:
    return None if tensor is None else (tensor.data_ptr(), tensor._version)


def _linear_state(linear: torch.nn.Module) -> tuple:
    """What `_effective_parts(linear)` is computed from: each tensor's address and in-place version, and a LoRA
    layer's adapter settings."""
    base = getattr(linear, "base_layer", None)
    if base is None:
        return _tensor_state(getattr(linear, "weight", None)), _tensor_state(getattr(linear, "bias", None))
    state = [_linear_state(base), bool(getattr(linear, "merged", False)),
             bool(getattr(linear, "disable_adapters", False)), tuple(linear.active_adapters)]
    for name in linear.active_adapters:
        if name in getattr(linear, "lora_A", {}):
            state += [linear.scaling.get(name), getattr(linear, "use_dora", {}).get(name, False),
                      _tensor_state(linear.lora_A[name].weight), _tensor_state(linear.lora_B[name].weight)]
    return tuple(state)


def _effective_parts(linear: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """(weight, bias) a linear layer computes with, LoRA adapters merged in; None if it can't be read whole."""
    base = getattr(linear, "base_layer", None)
    if base is None:
        weight, bias = getattr(linear, "weight", None), getattr(linear, "bias", None)
        if type(weight) not in (torch.Tensor, torch.nn.Parameter) or not weight.is_floating_point():
            return None
        return weight, bias
    parts = _effective_parts(base)
    if parts is None or getattr(linear, "merged", False):
        return None  # merged adapters: the base already holds them (rare while training; not handled)
    weight, bias = parts
    if getattr(linear, "disable_adapters", False):
        return weight, bias
    for name in linear.active_adapters:
        if name not in getattr(linear, "lora_A", {}):
            continue
        if getattr(linear, "use_dora", {}).get(name, False):
            return None
        weight = weight + linear.get_delta_weight(name).to(weight.dtype)
    return weight, bias


@dataclass
class LayerWeights:
    """One decoder layer's projection weights, in the decode dtype, and its norms' own weights."""

    qkv: torch.Tensor           # [(heads + 2 kv_heads) * head_dim, hidden]
    qkv_bias: torch.Tensor | None
    o: torch.Tensor
    o_bias: torch.Tensor | None
    gate_up: torch.Tensor       # [2 * intermediate, hidden]
    down: torch.Tensor
    input_norm: torch.Tensor | None = None      # the model's own parameters (re-read at each refresh)
    post_norm: torch.Tensor | None = None
    q_norm: torch.Tensor | None = None          # Qwen3's per-head norms, else None
    k_norm: torch.Tensor | None = None


class DecodeWeights:
    """Decode-dtype copies of every layer's projections and of the lm-head, refreshed in place."""

    def __init__(self, layers: list[torch.nn.Module], lm_head: torch.nn.Module, dtype: torch.dtype):
        self._layers, self._lm_head, self.dtype = layers, lm_head, dtype
        self.layers: list[LayerWeights] = []
        self.lm_head: torch.Tensor | None = None
        self.norm_eps = _eps(layers[0].input_layernorm)
        self.head_norm_eps = _eps(layers[0].self_attn.q_norm) if hasattr(layers[0].self_attn, "q_norm") else None
        self.copied_from: tuple | None = None  # `source_state()` at the last copy
        self.copies = 0  # refreshes that copied (the others found nothing changed)
        _watch_optimizer_steps()

    @classmethod
    def build(cls, layers: list[torch.nn.Module], lm_head: torch.nn.Module,
              dtype: torch.dtype) -> DecodeWeights | None:
        """The copies, or None when some layer's weights cannot be copied whole (see the module docstring)."""
        weights = cls(layers, lm_head, dtype)
        return weights if weights.refresh() else None

    def _sources(self):
        """Per layer ((q, k, v), o, (gate, up), down) as (weight, bias) pairs, then the lm-head; None if any
        cannot be read whole."""
        out = []
        for layer in self._layers:
            attn, mlp = layer.self_attn, layer.mlp
            if not all(hasattr(mlp, n) for n in (*_MLP, "down_proj")) or not _is_silu(mlp):
                return None
            norms = [layer.input_layernorm, layer.post_attention_layernorm]
            if any(_eps(n) != self.norm_eps
                   or type(getattr(n, "weight", None)) not in (torch.Tensor, torch.nn.Parameter) for n in norms):
                return None
            parts = [_effective_parts(getattr(attn, n)) for n in (*_ATTN, "o_proj")]
            parts += [_effective_parts(getattr(mlp, n)) for n in (*_MLP, "down_proj")]
            if any(p is None for p in parts) or any(p[1] is not None for p in parts[4:]):
                return None  # no MLP biases in the Llama family
            out.append(parts)
        head = _effective_parts(self._lm_head)
        if head is None or head[1] is not None:
            return None
        return out, head[0]

    def source_state(self) -> tuple | None:
        """What the copies are made from, read without touching the device: every source tensor's address and
        version, the LoRA layers' settings and the process's optimizer steps; None when it cannot be read
        (inference-mode tensors, tensor subclasses): then every refresh copies."""
        try:
            modules = [(layer.self_attn, layer.mlp, layer) for layer in self._layers]
            state = [_linear_state(getattr(attn, n)) for attn, _, _ in modules for n in (*_ATTN, "o_proj")]
            state += [_linear_state(getattr(mlp, n)) for _, mlp, _ in modules for n in (*_MLP, "down_proj")]
            state += [_tensor_state(getattr(getattr(layer, n, None), "weight", None)) for _, _, layer in modules
                      for n in ("input_layernorm", "post_attention_layernorm")]
            state += [_tensor_state(getattr(getattr(attn, n, None), "weight", None)) for attn, _, _ in modules
                      for n in ("q_norm", "k_norm")]
            return (_step_count[0], _linear_state(self._lm_head), *state)
        except (RuntimeError, AttributeError, TypeError):
            return None

    @torch.no_grad()
    def refresh(self) -> bool:
        """Copy the current weights in (the buffers keep their addresses, so captured graphs stay valid), unless
        nothing they are made from changed since the last copy; False if they cannot be copied whole."""
        state = self.source_state()
        if state is not None and state == self.copied_from:
            return True
        sources = self._sources()
        if sources is None:
            return False
        per_layer, head = sources
        if not self.layers:
            self.layers = [self._allocate(parts) for parts in per_layer]
            self.lm_head = torch.empty(head.shape, dtype=self.dtype, device=head.device)
        for mine, parts, layer in zip(self.layers, per_layer, self._layers):
            mine.input_norm, mine.post_norm = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
            if hasattr(layer.self_attn, "q_norm"):
                mine.q_norm, mine.k_norm = layer.self_attn.q_norm.weight, layer.self_attn.k_norm.weight
            _fill(mine.qkv, [w for w, _ in parts[:3]])
            if mine.qkv_bias is not None:
                _fill(mine.qkv_bias, [b for _, b in parts[:3]])
            mine.o.copy_(parts[3][0])
            if mine.o_bias is not None:
                mine.o_bias.copy_(parts[3][1])
            _fill(mine.gate_up, [parts[4][0], parts[5][0]])
            mine.down.copy_(parts[6][0])
        self.lm_head.copy_(head)
        self.copied_from = state
        self.copies += 1
        return True

    def forget(self) -> None:
        """Make the next refresh copy, whatever it finds (a change it cannot see: `param.data` edited in place)."""
        self.copied_from = None

    def _allocate(self, parts) -> LayerWeights:
        def empty(*tensors):
            rows = sum(t.shape[0] for t in tensors)
            return torch.empty((rows, *tensors[0].shape[1:]), dtype=self.dtype, device=tensors[0].device)

        (q, qb), (k, kb), (v, vb), (o, ob) = parts[:4]
        has_bias = any(b is not None for b in (qb, kb, vb))
        if has_bias and any(b is None for b in (qb, kb, vb)):
            raise ValueError("q/k/v projections with and without bias cannot be fused")
        return LayerWeights(qkv=empty(q, k, v), qkv_bias=empty(qb, kb, vb) if has_bias else None, o=empty(o),
                            o_bias=empty(ob) if ob is not None else None, gate_up=empty(parts[4][0], parts[5][0]),
                            down=empty(parts[6][0]))

    @property
    def nbytes(self) -> int:
        tensors = [t for w in self.layers for t in (w.qkv, w.qkv_bias, w.o, w.o_bias, w.gate_up, w.down)
                   if t is not None] + ([self.lm_head] if self.lm_head is not None else [])
        return sum(t.numel() * t.element_size() for t in tensors)


def _eps(norm: torch.nn.Module) -> float:
    """An RMSNorm's epsilon (transformers names it `variance_epsilon` or `eps`)."""
    return float(getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6)))


def _is_silu(mlp: torch.nn.Module) -> bool:
    """The Llama family's gated MLP activation (the decode step applies F.silu itself)."""
    act = getattr(mlp, "act_fn", None)
    return isinstance(act, torch.nn.SiLU) or type(act).__name__ in ("SiLU", "SiLUActivation")


def _fill(out: torch.Tensor, parts: list[torch.Tensor]) -> None:
    """Copy `parts` one after another along dim 0 of `out` (casting to its dtype)."""
    row = 0
    for part in parts:
        out[row:row + part.shape[0]].copy_(part)
        row += part.shape[0]
