"""The fast sampling path: a static KV cache, one CUDA graph per decode step, few host syncs.

`model.generate` and the plain loop in generation.py spend most of a small model's decode step
launching kernels from Python (30 layers x ~15 kernels). Here the one-token decode step of a
Llama-family model (Llama, SmolLM2, Mistral, Qwen2/3) runs against preallocated key/value buffers, so
it has fixed shapes and addresses. The step's sampling and bookkeeping (the sampled token and its
log-prob, end-of-sequence, the next input) run on device tensors too (policies/decoding/step.py), so the
whole step is captured as a CUDA graph once per (batch, length) bucket (again when the sampling settings
change), and between host syncs the loop only replays it. The host looks every `sync_every` steps (stop
strings, all-done, progress), and when half the rows are finished the survivors are compacted into a
smaller batch bucket.
Memory is bounded: a call with more prompts than `max_batch`, or than fit 1/KV_SHARE of the GPU, is sampled in
chunks (a prompt's rows together), and the buckets kept for reuse (KV buffers and graphs) hold at most
`cache_bytes` of KV buffers, the least recently used dropped first (tree search and Math-Shepherd rollouts ask
for many (batch, length) shapes); with `admit_by_use` (off by default), once the budget is full a new bucket pushes
kept ones out only when they were asked for less often, else it serves its call alone
(policies/decoding/bucket_admission.py).
Rows that share a prompt prefix decode from one copy of it when that reads fewer key columns
(policies/decoding/shared_prefix.py); stop strings are checked only at tokens that can complete one
(policies/decoding/stop_tokens.py).
The prefill holds nothing that grows with the square of the prompts' length: they are right-padded, so one
causal pass without a mask (FlashAttention on CUDA) fills the KV buffers, and the decode steps skip each
row's padding columns through their [batch, 1, 1, length] mask.
On the CPU the same code runs eagerly (no graphs): tests compare it with the plain path token by token.

Each call first copies the projection weights into a decode-dtype copy with q/k/v and gate/up fused
(policies/decoding/weights.py; LoRA adapters merged in), so the step casts no weight and runs fewer
matmuls; on CUDA the layer's elementwise work (norms, rotary, SiLU gate, residuals) is compiled into a
few kernels (policies/decoding/layers.py). Where the weights cannot be copied whole (4-bit layers, DoRA)
the step calls the model's own submodules (projections, norms, MLP, rotary embedding) under autocast.
Either way, weights the trainer updates in place are what the graph computes with.
"""
from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

import torch
import torch._dynamo
import torch.nn.functional as F
from torch.profiler import record_function

from lmgym.policies.decoding.bucket_admission import UseCounts, victims_for
from lmgym.policies.decoding.generation import (
    Generation,
    RowKeys,
    StopChecker,
    StopLists,
    _eos_ids,
    assemble,
    right_pad,
    stop_lists,
)
from lmgym.policies.decoding.layers import (
    attention_inputs,
    attention_output_and_mlp,
    compiled_layer_functions,
    rotate_half,
)
from lmgym.policies.decoding.shared_prefix import (
    GROUPED_COST,
    GroupedBuffers,
    GroupSlice,
    grouped_attention,
    grouped_columns,
    plan_groups,
    round_groups,
)
from lmgym.policies.decoding.step import (
    _NO_PROMPT,
    LoopState,
    Outputs,
    Sampling,
    continue_and_record,
    round_batch,
    row_columns,
    sample_and_record,
)
from lmgym.policies.decoding.stop_tokens import StopTokens
from lmgym.policies.decoding.weights import DecodeWeights
from lmgym.policies.padded_passes import variable_length_attention
from lmgym.policies.prompting import pad_id as padding_id

_REQUIRED = ("q_proj", "k_proj", "v_proj", "o_proj")
# Buckets kept between calls hold at most this share of the GPU: a quarter kept 35 GB of KV buffers alive through
# a multi-turn RAG run's update on a 141 GB card (the floor of every phase); a sixteenth keeps the common
# (batch, length) buckets and their graphs for reuse while leaving the rest to training.
KEPT_CACHE_SHARE = 16
OWN_PREFILL_BYTES = 1 << 30  # attention scores of one part of a grouped bucket's own-token prefill, at most
PREFILL_ROWS = 256  # rows of one prefill pass at most
KV_SHARE = 8  # one call's KV buffers take at most this share of the GPU (more prompts are sampled in chunks)


def _unwrap(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def supports_fast_decode(model) -> bool:
    """True for decoder-only models laid out like Llama (no sliding window, standard RoPE)."""
    base = _unwrap(model)
    inner = getattr(base, "model", None)
    layers = getattr(inner, "layers", None)
    if inner is None or layers is None or not hasattr(base, "lm_head") or not hasattr(inner, "rotary_emb"):
        return False
    cfg = base.config
    if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True):
        return False
    attn = getattr(layers[0], "self_attn", None)
    return attn is not None and all(hasattr(attn, n) for n in _REQUIRED) and hasattr(layers[0], "mlp")


class _Buffers(LoopState):
    """Static tensors for one (batch, length) bucket: the KV cache and the decode loop's state."""

    def __init__(self, batch: int, length: int, n_layers: int, kv_heads: int, head_dim: int, dtype, device):
        super().__init__(batch, length, device)
        shape = (batch, kv_heads, length, head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.graph: torch.cuda.CUDAGraph | None = None
        self.captured: Sampling | None = None  # the settings `graph` was captured with (it reads their eos tensor)
        self.nbytes = sum(t.numel() * t.element_size() for t in self.keys + self.values)


class _RowView:
    """Rows [first, last) of KV buffers (views: writes land in the bucket)."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], first: int, last: int):
        self.keys = [k[first:last] for k in keys]
        self.values = [v[first:last] for v in values]


class FastDecoder:
    """Samples completions for a Llama-family model with a static cache (and CUDA graphs on GPU)."""

    compile_backend = "inductor"  # torch.compile's backend for the layer functions (tests use "aot_eager")

    def __init__(self, model, use_cuda_graphs: bool | None = None, sync_every: int = 8, length_bucket: int = 256,
                 max_batch: int = 2048, cache_bytes: int | None = None, fused_weights: bool | None = None,
                 compile_layers: bool | None = None, share_prefill: bool = True, compile_prefill: bool | None = None):
        """max_batch: most prompts decoded at once (more are sampled in chunks); cache_bytes: most bytes of KV
        buffers kept in reusable buckets (None: 1/KEPT_CACHE_SHARE of the device's memory on CUDA, unbounded on CPU);
        fused_weights: decode with a decode-dtype copy of the projections, q/k/v and gate/up fused
        (policies/decoding/weights.py; None: when the copy takes at most an eighth of the device's memory,
        or 1 GiB on the CPU); compile_layers: `torch.compile` the decode step's layer functions
        (policies/decoding/layers.py; with fused weights only; None: on CUDA, where it shortens sampling for
        a one-time compilation per process; benchmarks/RESULTS.md has the figures); share_prefill: rows that share a
        prompt prefix decode from one copy of it when that reads fewer key columns (policies/decoding/
        shared_prefix.py), and rows with the same prompt otherwise share one prefill row (their keys and values
        are copied); compile_prefill: passes of many tokens (prefills, appended turns) run the layer functions
        compiled for dynamic shapes (None: as compile_layers; a failing compilation warns once and runs them
        eagerly)."""
        if not supports_fast_decode(model):
            raise ValueError(f"{type(_unwrap(model)).__name__} is not supported by the fast decoder")
        self.model = model
        base = _unwrap(model)
        self.inner, self.lm_head, cfg = base.model, base.lm_head, base.config
        self.layers = list(self.inner.layers)
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.n_heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.device = next(model.parameters()).device
        self.use_graphs = (self.device.type == "cuda") if use_cuda_graphs is None else use_cuda_graphs
        self.dtype = torch.bfloat16 if self.device.type == "cuda" else next(model.parameters()).dtype
        self.sync_every = sync_every
        self.length_bucket = length_bucket
        self.max_batch = max_batch
        if cache_bytes is None and self.device.type == "cuda":
            cache_bytes = torch.cuda.get_device_properties(self.device).total_memory // KEPT_CACHE_SHARE
        self.cache_bytes = cache_bytes
        self._buckets: OrderedDict[tuple[int, int], _Buffers] = OrderedDict()  # least recently used first
        self._uses = UseCounts()  # which new bucket may push kept ones out (bucket_admission.py)
        # True: the admission rule (bucket_admission.py); off until a GPU run shows it (benchmarks/w4a_bucket_rules.sh):
        # on CUDA its transient buckets add graph captures and memory above the budget that no GPU run has measured
        self.admit_by_use = False
        self.bucket_trace: list[dict] | None = None  # a list: each bucket request recorded (bucket_admission.replay)
        # a dict (benchmarks): bucket key -> [decode steps, rows playing x steps (continuous play)], where steps went
        self.shape_steps: dict[str, list[int]] | None = None
        self._captured_with: tuple = ()  # the weights' addresses (and the path) the captured graphs read
        if fused_weights is None:
            copy_bytes = sum(p.numel() for p in model.parameters()) * self.dtype.itemsize
            limit = (torch.cuda.get_device_properties(self.device).total_memory // 8 if self.device.type == "cuda"
                     else 1 << 30)
            fused_weights = copy_bytes <= limit
        self.fused_weights = fused_weights
        self.compile_layers = self.device.type == "cuda" if compile_layers is None else compile_layers
        self.compile_prefill = self.compile_layers if compile_prefill is None else compile_prefill
        self.weights: DecodeWeights | None = None
        self.share_prefill = share_prefill
        # continuous play (continuous.py): the host settles a sync's actions while the next steps decode (on CUDA);
        # prompts past the bucket join it as rows free up (False: they wait for a call of their own)
        self.overlap_host = self.device.type == "cuda"
        self.join_waiting = True
        # steps between host syncs in a continuous-play bucket of TAIL_ROWS rows or fewer (None: sync_every); off until
        # a GPU run measures it (benchmarks: --decoder_set tail_sync_every=2)
        self.tail_sync_every: int | None = None
        # counters for benchmarks: prompt tokens prefilled, prompt tokens copied from a shared row instead, decode
        # graphs captured, buckets made, buckets dropped to fit the budget (made - evicted - transient = kept),
        # buckets made for one call and not kept (bucket_admission.py: the budget was full of more used ones), tokens
        # of the env's turns fed in one pass mid-call (extension.py), copies of the weights made (weights.py: a
        # call whose weights did not change since the last copy makes none); the decode steps' occupancy: bucket
        # rows x steps, of them rows playing for a prompt x steps (continuous play), and env tokens fed one a step
        # (continuous play: a step that samples nothing for its row). Sampled tokens / row_steps = rows put to use
        self.stats = {"prefill_tokens": 0, "prefill_tokens_shared": 0, "graph_captures": 0, "buckets_made": 0,
                      "buckets_evicted": 0, "buckets_transient": 0, "extended_tokens": 0, "weight_copies": 0,
                      "row_steps": 0, "playing_row_steps": 0, "fed_tokens": 0, "rows_joined": 0}

    def _refresh_weights(self) -> None:
        """Copy the current weights into the fused decode copy (made on first use; None where it cannot be),
        unless they did not change since the last copy."""
        if not self.fused_weights:
            return
        copies = self.weights.copies if self.weights is not None else 0
        if self.weights is None or not self.weights.refresh():
            self.weights, copies = DecodeWeights.build(self.layers, self.lm_head, self.dtype), 0
        self.stats["weight_copies"] += (self.weights.copies - copies) if self.weights is not None else 0

    def weights_changed(self) -> None:
        """Copy the weights again at the next call: needed only after a change PyTorch does not count (a parameter's
        `.data` edited in place); optimizer steps, `copy_`, `load_state_dict` and moved weights are seen."""
        if self.weights is not None:
            self.weights.forget()

    def _forget_moved_weights(self) -> None:
        """Drop every captured graph if any weight now lives at another address than at capture: a graph
        replays fixed addresses, and FSDP2 frees and re-allocates the whole weights at each gather (so does
        `load_state_dict(assign=True)` or `.to()`); an in-place update keeps them and the graphs."""
        addresses = (self.weights is not None, *(p.data_ptr() for p in self.model.parameters()))
        if addresses != self._captured_with:
            for buf in self._buckets.values():
                buf.graph, buf.captured = None, None
            self._captured_with = addresses

    # ------------------------------------------------------------------ the model, written for a static cache
    def _autocast(self):
        # cache_enabled=False: autocast's weight-cast cache is freed when the context exits, but a
        # captured graph would keep writing to those addresses (PyTorch's CUDA-graph notes require it)
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
        return torch.autocast("cpu", enabled=False)

    def _forward(self, ids: torch.Tensor, positions: torch.Tensor, buf: _Buffers, start: int | torch.Tensor,
                 mask: torch.Tensor | None, last: torch.Tensor | None = None) -> torch.Tensor:
        """Run tokens ids [B, T] at `positions`, writing their keys/values at columns start..start+T-1 (`start`
        [B, T]: each row's own columns).

        mask: [B, 1, T, L] boolean, True where a query may attend a key column; None for the prefill (start 0,
        rows right-padded: each query attends the columns up to its own, causally, with no mask). Returns the
        logits of each row's token in column `last` [B] (None: the last column).
        """
        B, T = ids.shape
        h = self.inner.embed_tokens(ids)
        cos, sin = self.inner.rotary_emb(h, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        columns = start if isinstance(start, torch.Tensor) else torch.arange(start, start + T, device=ids.device)
        if self.weights is not None:
            return self._fused_forward(h, cos, sin, buf, columns, mask, last)
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q = attn.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
            k = attn.k_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
            v = attn.v_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
            if hasattr(attn, "q_norm"):  # Qwen3-style per-head norms
                q, k = attn.q_norm(q), attn.k_norm(k)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            _write(buf.keys[i], columns, k)
            _write(buf.values[i], columns, v)
            out = self._attend_layer(q.to(buf.keys[i].dtype), buf, i, mask)
            h = h + attn.o_proj(out.transpose(1, 2).reshape(B, T, -1).to(h.dtype))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        h = self.inner.norm(_take(h, last))
        return self.lm_head(h).float()

    def _fused_forward(self, h, cos, sin, buf: _Buffers, columns: torch.Tensor, mask: torch.Tensor | None,
                       last: torch.Tensor | None) -> torch.Tensor:
        """`_forward` with the fused decode copy of the weights: compiled layer functions for one-token steps
        (`compile_layers`) and, compiled for dynamic shapes, for passes of many tokens of more than one row
        (`compile_prefill`: a one-row pass would compile a second graph, specialised to one row, mid-run)."""
        if h.shape[0] > 1 and h.shape[1] > 1 and self.compile_prefill:  # one row: eager (dynamo specialises size 1)
            try:
                return self._fused_layers(h, cos, sin, buf, columns, mask, last,
                                          compiled_layer_functions(self.compile_backend, dynamic=True))
            except torch._dynamo.exc.TorchDynamoException as err:  # rerun eagerly: the cache writes are redone
                warnings.warn(f"compiling the prefill failed, prefilling without it: {str(err).splitlines()[0]}",
                              stacklevel=2)
                self.compile_prefill = False
        functions = (compiled_layer_functions(self.compile_backend) if self.compile_layers and h.shape[1] == 1
                     else (attention_inputs, attention_output_and_mlp))
        return self._fused_layers(h, cos, sin, buf, columns, mask, last, functions)

    def _fused_layers(self, h, cos, sin, buf: _Buffers, columns: torch.Tensor, mask: torch.Tensor | None,
                      last: torch.Tensor | None, functions) -> torch.Tensor:
        """The layers and the head with the given (attention_inputs, attention_output_and_mlp) functions."""
        B, T, _ = h.shape
        w = self.weights
        attention_in, attention_out = functions
        bias = None if mask is None else _additive(mask, self.dtype)
        for i, layer_weights in enumerate(w.layers):
            q, k, v = attention_in(h, layer_weights, cos, sin, self.n_heads, self.kv_heads, self.head_dim,
                                   w.norm_eps, w.head_norm_eps)
            _write(buf.keys[i], columns, k)
            _write(buf.values[i], columns, v)
            out = self._attend_layer(q, buf, i, bias)
            h = attention_out(h, out.transpose(1, 2).reshape(B, T, -1), layer_weights, w.norm_eps)
        h = self.inner.norm(_take(h, last))
        return F.linear(h.to(w.lm_head.dtype), w.lm_head).float()

    def _attend_layer(self, q: torch.Tensor, buf, layer: int, mask: torch.Tensor | None) -> torch.Tensor:
        """Layer `layer`'s attention over the bucket's cache: its group's prompt and its own tokens in a grouped
        bucket, else the row's own columns."""
        if hasattr(buf, "prefix_keys"):  # a GroupedBuffers or a GroupSlice of one
            bias = mask if mask.dtype != torch.bool else _additive(mask, torch.float32)
            return grouped_attention(q, buf, layer, bias, self.scaling)
        return self._attend(q, buf.keys[layer], buf.values[layer], mask)

    def _attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None
                ) -> torch.Tensor:
        """Attention of queries q [B, heads, T, D] over a layer's KV buffers: with `mask` (boolean or additive,
        [B, 1, T, L]), or without one for the prefill, causally over the first T columns (no [B, T, L] mask and
        no per-head scores: FlashAttention on CUDA)."""
        if mask is None:
            T = q.shape[2]
            return F.scaled_dot_product_attention(q, keys[:, :, :T], values[:, :, :T], is_causal=True,
                                                  scale=self.scaling, enable_gqa=True)
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=self.scaling, enable_gqa=True)

    def _decode_step(self, buf: _Buffers, per_row: bool = False) -> torch.Tensor:
        """Logits of each row's next input, its keys and values written at `column` (per_row: each row's own)."""
        mask = buf.valid[:, None, None, :]
        columns = row_columns(buf)[:, None] if per_row else buf.column
        return self._forward(buf.tokens[:, None], buf.positions[:, None], buf, columns, mask)

    def _decode_and_sample(self, buf: _Buffers, sampling: Sampling) -> None:
        """One whole decode step on the bucket's tensors: the forward pass of each row's next input, then
        sampling and bookkeeping (what a bucket's graph captures)."""
        with self._autocast():
            logits = self._decode_step(buf, per_row=sampling.per_row)
        (continue_and_record if sampling.continuous else sample_and_record)(buf, logits, sampling)

    # ------------------------------------------------------------------ buckets and graphs
    def _bucket(self, batch: int, length: int, keep=None) -> _Buffers:
        """The (batch, length) bucket, made if needed (see `_cached`)."""
        need = 2 * len(self.layers) * batch * self.kv_heads * length * self.head_dim * self.dtype.itemsize
        return self._cached((batch, length), need, keep, lambda: _Buffers(
            batch, length, len(self.layers), self.kv_heads, self.head_dim, self.dtype, self.device))

    def _grouped_bucket(self, groups: int, members: int, prefix_length: int, suffix_length: int,
                        keep=None) -> GroupedBuffers:
        """The bucket of `groups` prompts of `members` rows each (policies/decoding/shared_prefix.py)."""
        columns = groups * prefix_length + groups * members * suffix_length
        need = 2 * len(self.layers) * columns * self.kv_heads * self.head_dim * self.dtype.itemsize
        return self._cached(("grouped", groups, members, prefix_length, suffix_length), need, keep,
                            lambda: GroupedBuffers(groups, members, prefix_length, suffix_length, len(self.layers),
                                                   self.kv_heads, self.head_dim, self.dtype, self.device))

    def _cached(self, key: tuple, need: int, keep, make):
        """The bucket `key`: a kept one, or one made by `make()`. A new bucket is kept (dropping least recently
        used ones, never `keep`, the bucket in use, until the cache fits `cache_bytes` with its `need` bytes);
        with `admit_by_use`, only when it fits or when each bucket it would drop was asked for less often than it
        (bucket_admission.py), otherwise it serves this call only (transient)."""
        self._uses.asked(key)
        if key in self._buckets:
            self._buckets.move_to_end(key)
            self._trace(key, need, keep, "hit", None)
            return self._buckets[key]
        self.stats["buckets_made"] += 1
        victims = victims_for(self._kept_sizes(keep), self.cached_bytes, need, self.cache_bytes)
        if not self.admit_by_use or self._uses.admits(key, victims):
            self._drop(victims)
            buf = self._buckets[key] = make()
        else:
            self.stats["buckets_transient"] += 1
            buf = make()
        buf.bucket_key = key  # a transient bucket's too: the trace names the bucket in use by it
        self._trace(key, need, keep, "kept" if key in self._buckets else "transient", buf.nbytes)
        return buf

    def _trace(self, key: tuple, need: int, keep, outcome: str, nbytes: int | None) -> None:
        """One request in `bucket_trace` when it is a list (`keep`: the bucket in use, by its key)."""
        if self.bucket_trace is not None:
            keep_key = getattr(keep, "bucket_key", None)
            self.bucket_trace.append({"key": list(key), "need": need, "bytes": nbytes, "budget": self.cache_bytes,
                                      "keep": None if keep_key is None else list(keep_key), "outcome": outcome})

    def _kept_sizes(self, keep=None) -> Iterator[tuple[tuple, int]]:
        """(key, bytes) of the kept buckets, least recently used first, `keep` (the bucket in use) left out."""
        return ((k, b.nbytes) for k, b in self._buckets.items() if b is not keep)

    def _drop(self, keys: list[tuple]) -> None:
        for old in keys:
            del self._buckets[old]  # its graph and private memory pool go with it
            self.stats["buckets_evicted"] += 1

    @contextmanager
    def keeping(self, cache_bytes: int | None) -> Iterator[None]:
        """Keep up to `cache_bytes` of buckets inside the block (at least the usual budget; None: no bound): for
        a sampling-only phase that visits more shapes than the usual budget holds, so that least recently used
        eviction does not make them anew each time (Monte-Carlo step labels: ~50 GB of buckets at SmolLM2-135M
        with the gpu preset; benchmarks/RESULTS.md, nineteenth session). After it the usual budget is back and the
        least recently used buckets beyond it are dropped (without asking the use counts: the block's shapes are
        done with)."""
        usual = self.cache_bytes
        if usual is not None:
            self.cache_bytes = None if cache_bytes is None else max(usual, cache_bytes)
        try:
            yield
        finally:
            self.cache_bytes = usual
            self._drop(victims_for(self._kept_sizes(), self.cached_bytes, 0, usual))
            if self.bucket_trace is not None:
                self.bucket_trace.append({"event": "trim", "budget": usual})

    def device_bytes(self, share: float) -> int | None:
        """`share` of the device's memory in bytes on CUDA; None (no bound) on the CPU, as the CPU's kept buckets."""
        if self.device.type != "cuda":
            return None
        return int(share * torch.cuda.get_device_properties(self.device).total_memory)

    @property
    def cached_bytes(self) -> int:
        """Bytes of KV buffers held by the reusable buckets."""
        return sum(b.nbytes for b in self._buckets.values())

    def _step(self, buf: _Buffers, sampling: Sampling) -> None:
        if self.shape_steps is not None:
            self.shape_steps.setdefault(str(getattr(buf, "bucket_key", None)), [0, 0])[0] += 1
        try:
            self._replay_or_capture(buf, sampling)
        except torch._dynamo.exc.TorchDynamoException as err:  # Inductor missing or failing here: decode eagerly
            if not self.compile_layers:
                raise
            warnings.warn(f"compiling the decode step failed, decoding without it: {str(err).splitlines()[0]}",
                          stacklevel=2)
            self.compile_layers, buf.graph, buf.captured = False, None, None
            self._replay_or_capture(buf, sampling)

    def _replay_or_capture(self, buf: _Buffers, sampling: Sampling) -> None:
        """Run one decode step: eagerly, or by replaying the bucket's graph, captured anew when there is none or
        it was captured with other sampling settings (it bakes in the temperature, top_p, eos and pad ids and
        the generator it advances)."""
        if not self.use_graphs:
            self._decode_and_sample(buf, sampling)
            return
        if buf.graph is None or buf.captured is None or buf.captured.key != sampling.key:
            buf.graph = buf.captured = None  # free the old graph's memory pool first
            buf.graph, buf.captured = self._capture(buf, sampling), sampling
        buf.graph.replay()

    def _capture(self, buf: _Buffers, sampling: Sampling) -> torch.cuda.CUDAGraph:
        """Capture `_decode_and_sample` on this bucket as a CUDA graph (a private memory pool per graph); the
        loop state is left as found."""
        # warm-up outside the graph (compiles, initializes libraries), then the state as it was; the keys and
        # values it wrote are in the step's own column (written again) or the next (not attended before that)
        saved = buf.snapshot()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self._decode_and_sample(buf, sampling)
        finally:
            torch.cuda.current_stream().wait_stream(stream)
            buf.restore(saved)
        graph = torch.cuda.CUDAGraph()
        self.stats["graph_captures"] += 1
        if sampling.noise_generator is not None:  # each replay then advances it (the default one is implied)
            graph.register_generator_state(sampling.noise_generator)
        with torch.cuda.graph(graph):
            self._decode_and_sample(buf, sampling)
        return graph

    # ------------------------------------------------------------------ sampling
    @torch.no_grad()
    def generate(self, tokenizer, prompts: list[list[int]], max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, stop: StopLists = None, generator: torch.Generator | RowKeys | None = None,
                 on_tokens=None, cancelled_rows: Callable[[], Collection[int]] | None = None) -> list[Generation]:
        """Same contract as generation.decode: one sampled completion per prompt, in order (`stop`: None,
        one list for all prompts or one per prompt; `on_tokens(n)` hears of the tokens sampled at each host
        sync, every `sync_every` steps; `cancelled_rows()` is asked at each host sync which rows to end there,
        finish_reason "cancelled")."""
        rows = min(self.max_batch, self._rows_that_fit(max(map(len, prompts)) + max_new_tokens))
        if len(prompts) > rows:  # in chunks: the KV buffers grow with the batch
            return self._in_chunks(tokenizer, prompts, rows, max_new_tokens, temperature, top_p, stop, generator,
                                   on_tokens, cancelled_rows)
        self._refresh_weights()
        self._forget_moved_weights()
        eos_ids = _eos_ids(tokenizer, self.model)
        pad_id = padding_id(tokenizer)
        sampling = Sampling(temperature, top_p, generator, eos_ids, pad_id, self.device)
        n = len(prompts)
        buf, logits = self._start_call(prompts, max_new_tokens, generator, pad_id)
        sample_and_record(buf, logits, sampling)  # token 0; each later one by a whole decode step
        outputs = Outputs(n, max_new_tokens, pad_id, self.device)
        stopper = StopChecker(tokenizer, stop, n)
        marks = StopTokens(tokenizer, {s for row in stopper.stops for s in row}, self.device) if stopper.any else None
        stopped, cancelled = [False] * n, [False] * n
        checked = reported = 0
        for t in range(max_new_tokens):  # tokens [0, t] are sampled
            last = t == max_new_tokens - 1
            if (t + 1) % self.sync_every == 0 or last:
                if stopper.any:
                    with record_function("lmgym.stop_strings"):
                        self._apply_stop_strings(stopper, marks, buf, n, checked, t + 1, stopped, pad_id)
                    checked = t + 1
                if cancelled_rows is not None:
                    self._end_rows(set(cancelled_rows()), buf, n, t + 1, cancelled, pad_id)
                if on_tokens is not None:
                    emitted = outputs.emitted(buf, n, t + 1)  # a stop string may cut some back
                    on_tokens(max(emitted - reported, 0))
                    reported = max(emitted, reported)
                live_count = int((~buf.done).sum())
                if last or live_count == 0:
                    break
                buf = self._shrink(buf, outputs, n, live_count, pad_id)
            with record_function("lmgym.decode"):
                self._step(buf, sampling)
            self.stats["row_steps"] += len(buf.rows)
        outputs.take(buf, buf.rows < n)
        tokens, logp, eos = outputs.lists()
        return assemble(tokenizer, prompts, tokens, logp,
                        ["eos" if eos[r] else "stop" if stopped[r] else "cancelled" if cancelled[r] else "length"
                         for r in range(n)])

    def _start_call(self, prompts: list[list[int]], columns: int, generator, pad_id: int):
        """The call's bucket (`bucket_key`'s shape, room for `columns` columns past the prompts) with the prompts
        prefilled and every row set up to sample its first token from the logits returned beside it."""
        key, groups = self.bucket_key(prompts, columns)
        if key[0] == "grouped":
            return self._start_grouped(prompts, groups, key[1:], columns, generator, pad_id)
        n, P = len(prompts), max(len(p) for p in prompts)
        buf = self._bucket(*key)
        logits, last = self._prefill(list(prompts) + [[pad_id]] * (len(buf.rows) - n), P, buf, pad_id)
        buf.start(n, last, P - 1, columns, generator)
        return buf, logits

    def _rows_that_fit(self, length: int) -> int:
        """Most rows of `length` columns whose keys and values take at most 1/KV_SHARE of the device's memory (a
        power of two, at least 8; unbounded on the CPU)."""
        if self.device.type != "cuda":
            return self.max_batch
        budget = torch.cuda.get_device_properties(self.device).total_memory // KV_SHARE
        per_row = 2 * len(self.layers) * self.kv_heads * self.head_dim * self.dtype.itemsize * length
        return max(8, 1 << max((budget // per_row).bit_length() - 1, 0))

    def _in_chunks(self, tokenizer, prompts, size: int, max_new_tokens, temperature, top_p, stop, generator,
                   on_tokens, cancelled_rows) -> list[Generation]:
        """`generate` over chunks of at most `size` prompts, the rows of one prompt kept together (they share its
        prefill and, grouped, its cache); results in the prompts' order."""
        stops = stop_lists(stop, len(prompts))
        order = sorted(range(len(prompts)), key=prompts.__getitem__) if self.share_prefill else range(len(prompts))
        out: list[Generation | None] = [None] * len(prompts)
        for start in range(0, len(order), size):
            part = list(order[start:start + size])
            noise = RowKeys([generator.keys[i] for i in part]) if isinstance(generator, RowKeys) else generator
            sampled = self.generate(tokenizer, [prompts[i] for i in part], max_new_tokens, temperature, top_p,
                                    [stops[i] for i in part], noise, on_tokens, _rows_from(cancelled_rows, part))
            for i, generation in zip(part, sampled):
                out[i] = generation
        return out

    def bucket_key(self, prompts: list[list[int]], max_new_tokens: int) -> tuple[tuple, list]:
        """The decode shape of one call (at most one chunk of prompts): ("grouped", groups, members, prefix columns,
        own columns) with the groups (policies/decoding/shared_prefix.py), or (rows, columns) of a cache per row
        and no groups. Each comes from a small set of buckets, so graphs are captured once and replayed."""
        rows = round_batch(len(prompts))
        length = int(math.ceil((max(map(len, prompts)) + max_new_tokens) / self.length_bucket) * self.length_bucket)
        groups = plan_groups(prompts) if self.share_prefill else []
        if any(shared for _, shared in groups):
            # grouped when it reads at most GROUPED_COST of the key columns a cache per row reads per decode step,
            # with at most twice its rows
            count, m, prefix_length, own_length = grouped_columns(groups, prompts, max_new_tokens)
            reads = count * prefix_length + count * m * own_length
            if reads <= GROUPED_COST * rows * length and count * m <= 2 * rows:
                return ("grouped", count, m, prefix_length, own_length), groups
        return (rows, length), []

    def _start_grouped(self, prompts: list[list[int]], groups: list[tuple[list[int], int]], shape: tuple[int, ...],
                       max_new_tokens: int, generator, pad_id: int) -> tuple[GroupedBuffers, torch.Tensor]:
        """The grouped bucket of `shape` (`bucket_key`'s; policies/decoding/shared_prefix.py) with each group's
        shared prefix prefilled once, each row's own prompt tokens prefilled against it, and every row set up to
        sample its first token from the logits returned beside it."""
        n = len(prompts)
        buf = self._grouped_bucket(*shape)
        m, rows = buf.members, buf.groups * buf.members
        prompt_of = torch.full((rows,), _NO_PROMPT, dtype=torch.long)
        shared_of = torch.zeros(rows, dtype=torch.long)
        own = [[pad_id]] * rows  # filler rows: one pad token
        for u, (members, shared) in enumerate(groups):
            prompt_of[u * m:u * m + len(members)] = torch.tensor(members)
            shared_of[u * m:(u + 1) * m] = shared
            for j, i in enumerate(members):
                own[u * m + j] = prompts[i][shared:]
        with record_function("lmgym.prefill"), self._autocast(), variable_length_attention(self.device):
            self._prefill_prefixes(buf, [prompts[members[0]][:shared] for members, shared in groups], pad_id)
            logits, positions = self._prefill_own(buf, own, shared_of.to(self.device), pad_id)
        self.stats["prefill_tokens"] += sum(shared for _, shared in groups) + sum(
            len(prompts[i]) - shared for members, shared in groups for i in members)
        self.stats["prefill_tokens_shared"] += sum(shared * (len(members) - 1) for members, shared in groups)
        buf.start(n, positions, max(map(len, own)) - 1, max_new_tokens, generator)
        prompt_of = prompt_of.to(self.device)
        buf.rows.copy_(prompt_of)
        buf.done.copy_(prompt_of >= n)
        if isinstance(generator, RowKeys):
            buf.row_keys.copy_(generator.row_keys(buf.rows))
        return buf, logits

    def _prefill_prefixes(self, buf: GroupedBuffers, prefixes: list[list[int]], pad_id: int) -> None:
        """Each group's shared prefix into its prefix buffers (one causal pass, right-padded) and `prefix_bias`."""
        buf.prefix_bias.fill_(-math.inf)
        if not any(prefixes):
            return
        ids, valid = right_pad([p or [pad_id] for p in prefixes], pad_id, self.device)
        valid = valid.bool() & torch.tensor([bool(p) for p in prefixes], device=self.device)[:, None]
        positions = torch.arange(ids.shape[1], device=self.device).expand(len(prefixes), -1)
        self._causal_prefill(ids, positions, buf.prefix_keys, buf.prefix_values,
                             torch.zeros(len(prefixes), dtype=torch.long, device=self.device))
        buf.prefix_bias[:len(prefixes), 0, 0, :ids.shape[1]].masked_fill_(valid, 0.0)

    def _prefill_own(self, buf: GroupedBuffers, own: list[list[int]], shared_of: torch.Tensor,
                     pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's own prompt tokens into its own columns [0, R), attending to its group's prefix and causally
        to its own; returns the logits and the position of each row's last prompt token. Groups are run in parts
        whose attention scores take at most OWN_PREFILL_BYTES."""
        ids, valid = right_pad(own, pad_id, self.device)
        valid = valid.bool()
        R, m = ids.shape[1], buf.members
        positions = shared_of[:, None] + torch.arange(R, device=self.device)
        last = (valid.sum(-1) - 1).clamp(min=0)
        causal = torch.ones((R, R), dtype=torch.bool, device=self.device).tril()
        mask = torch.zeros((len(own), 1, R, buf.valid.shape[1]), dtype=torch.bool, device=self.device)
        mask[:, 0, :, :R] = causal & valid[:, None, :]
        row_bytes = 4 * self.n_heads * R * (buf.prefix_keys[0].shape[2] + buf.valid.shape[1])
        step = max(1, min(OWN_PREFILL_BYTES // max(row_bytes * m, 1), PREFILL_ROWS // m))
        logits = []
        for first in range(0, buf.groups, step):
            last_group = min(first + step, buf.groups)
            part = slice(first * m, last_group * m)
            logits.append(self._forward(ids[part], positions[part], GroupSlice(buf, first, last_group), 0,
                                        mask[part], last[part]))
        buf.valid.zero_()
        buf.valid[:, :R] = valid
        return torch.cat(logits), positions.gather(1, last[:, None]).squeeze(1)

    def _shrink(self, buf, outputs: Outputs | None, n: int, live_count: int, pad_id: int):
        """`buf`, or the live rows moved into a smaller bucket once at most half of its rows (groups, in a grouped
        bucket) are live (the finished rows it drops go to `outputs`, when given)."""
        if isinstance(buf, GroupedBuffers):
            live_groups = (~buf.done).view(buf.groups, buf.members).any(-1).nonzero().squeeze(-1)
            smaller = round_groups(len(live_groups))
            if smaller >= buf.groups:
                return buf
            if outputs is not None:  # finished rows (those of dropped groups among them)
                outputs.take(buf, (buf.rows < n) & buf.done)
            return self._compact_groups(buf, live_groups, smaller, pad_id)
        smaller = round_batch(live_count)
        if smaller >= len(buf.rows):
            return buf
        if outputs is not None:
            outputs.take(buf, (buf.rows < n) & buf.done)  # the rows compaction drops
        return self._compact(buf, smaller, buf.valid.shape[1], live_count, pad_id)

    def _compact_groups(self, buf: GroupedBuffers, live_groups: torch.Tensor, groups: int,
                        pad_id: int) -> GroupedBuffers:
        """Move the groups with a live row into a bucket of `groups` groups (padded with duplicates of the first,
        finished at once)."""
        keep = torch.cat([live_groups, live_groups[:1].repeat(groups - len(live_groups))])
        small = self._grouped_bucket(groups, buf.members, buf.prefix_keys[0].shape[2], buf.keys[0].shape[2], keep=buf)
        for src, dst in zip(buf.prefix_keys + buf.prefix_values, small.prefix_keys + small.prefix_values):
            torch.index_select(src, 0, keep, out=dst)
        torch.index_select(buf.prefix_bias, 0, keep, out=small.prefix_bias)
        rows = (keep[:, None] * buf.members + torch.arange(buf.members, device=keep.device)).reshape(-1)
        for src, dst in zip(buf.keys + buf.values, small.keys + small.values):
            torch.index_select(src, 0, rows, out=dst)
        small.select(buf, rows, len(live_groups) * buf.members, pad_id)
        return small

    def _prefill(self, prompts: list[list[int]], P: int, buf: _Buffers,
                 pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Fill the bucket's KV columns [0, P) with `prompts` (one per bucket row; padding rows hold one pad token)
        and return the logits of each row's last prompt token and its column.

        Prompts are right-padded, so one causal pass needs no mask (a row's padding comes after its tokens; decode
        steps skip those columns through `valid`). Rows with the same prompt (a group's samples, the k rollouts
        of one step prefix) share one prefill row: only distinct prompts are run, then their keys and values
        are copied to every row that has them (`share_prefill`)."""
        if self.share_prefill:
            distinct: dict[tuple[int, ...], int] = {}
            source = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
            unique = [list(p) for p in distinct]
        else:
            source, unique = list(range(len(prompts))), prompts
        ids, valid = right_pad(unique, pad_id, self.device)
        valid = valid.bool()
        last = (valid.sum(-1) - 1).clamp(min=0)  # each row's last prompt token: its column and position
        positions = torch.arange(P, device=self.device).expand(len(ids), P)
        shared = len(unique) < len(prompts)
        with record_function("lmgym.prefill"), self._autocast(), variable_length_attention(self.device):
            logits = self._causal_prefill(ids, positions, buf.keys, buf.values, last)
        self.stats["prefill_tokens"] += int(valid.sum())
        self.stats["prefill_tokens_shared"] += sum(len(p) for p in prompts) - int(valid.sum())
        if shared:
            index = torch.tensor(source, device=self.device)
            with record_function("lmgym.prefill"):
                for cache in buf.keys + buf.values:
                    cache[:, :, :P].copy_(cache[:len(unique), :, :P].index_select(0, index))
            valid, last, logits = valid[index], last[index], logits[index]
        buf.valid.zero_()
        buf.valid[:, :P] = valid
        return logits, last

    def _causal_prefill(self, ids: torch.Tensor, positions: torch.Tensor, keys: list[torch.Tensor],
                        values: list[torch.Tensor], last: torch.Tensor) -> torch.Tensor:
        """Right-padded prompts ids [N, P] into rows [0, N) of the KV buffers `keys`/`values` (one causal pass per
        PREFILL_ROWS rows: a pass's activations grow with its rows times P); the logits at each row's `last`."""
        return torch.cat([self._forward(ids[a:a + PREFILL_ROWS], positions[a:a + PREFILL_ROWS],
                                        _RowView(keys, values, a, min(a + PREFILL_ROWS, len(ids))), 0, None,
                                        last[a:a + PREFILL_ROWS])
                          for a in range(0, len(ids), PREFILL_ROWS)])

    def _end_rows(self, ended: set[int], buf: _Buffers, n: int, upto: int, cancelled: list[bool],
                  pad_id: int) -> None:
        """Finish each live row whose prompt is in `ended` after its first `upto` tokens (a cancelled request)."""
        live = ((buf.rows < n) & ~buf.done).nonzero().squeeze(-1)
        hits = [i for i, r in zip(live.tolist(), buf.rows[live].tolist()) if r in ended]
        if not hits:
            return
        for i in hits:
            cancelled[int(buf.rows[i])] = True
        index = torch.tensor(hits, device=buf.rows.device)
        buf.lengths[index] = torch.minimum(buf.lengths[index], torch.full_like(buf.lengths[index], upto))
        buf.done[index] = True
        buf.tokens[index] = pad_id

    def _apply_stop_strings(self, stopper: StopChecker, marks: StopTokens, buf: _Buffers, n: int, checked: int,
                            upto: int, stopped: list[bool], pad_id: int) -> None:
        """Finish each live row at the first token completing a stop string among positions [checked, upto):
        text is decoded only where `marks` says a token may complete one (policies/decoding/stop_tokens.py)."""
        live = ((buf.rows < n) & ~buf.done).nonzero().squeeze(-1)
        if live.numel() == 0:
            return
        candidates: dict[int, list[int]] = {}  # index into `live` -> the token counts to check, in order
        for index, column in marks.positions(buf.out_tokens[live, checked:upto]):
            candidates.setdefault(index, []).append(checked + column + 1)
        if not candidates:
            return
        chosen = sorted(candidates)
        picked = live[torch.tensor(chosen, device=live.device)]
        hits, ends = [], []
        for index, i, r, toks in zip(chosen, picked.tolist(), buf.rows[picked].tolist(),
                                     buf.out_tokens[picked, :upto].tolist()):
            for end in candidates[index]:
                if stopper.hit(r, toks[:end]):
                    hits.append(i)
                    ends.append(end)
                    stopped[r] = True
                    break
        if hits:
            index = torch.tensor(hits, device=buf.rows.device)
            buf.lengths[index] = torch.tensor(ends, device=buf.rows.device)
            buf.done[index] = True
            buf.tokens[index] = pad_id  # its next input, as for a row that sampled EOS

    def _compact(self, buf: _Buffers, batch: int, length: int, live_count: int, pad_id: int,
                 keep: torch.Tensor | None = None) -> _Buffers:
        """Move the live rows (or the rows `keep`) into the smaller bucket (padded with duplicates of the first,
        finished at once)."""
        keep = (~buf.done).nonzero().squeeze(-1) if keep is None else keep
        keep = torch.cat([keep, keep[:1].repeat(batch - keep.numel())])
        small = self._bucket(batch, length, keep=buf)
        for src, dst in zip(buf.keys + buf.values, small.keys + small.values):
            torch.index_select(src, 0, keep, out=dst)
        small.select(buf, keep, live_count, pad_id)
        return small


def _rows_from(cancelled_rows: Callable[[], Collection[int]] | None,
               part: list[int]) -> Callable[[], list[int]] | None:
    """`cancelled_rows` for the chunk of prompts `part` (its rows numbered from 0 in that order)."""
    if cancelled_rows is None:
        return None
    position = {r: i for i, r in enumerate(part)}
    return lambda: [position[r] for r in cancelled_rows() if r in position]


def _write(cache: torch.Tensor, columns: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Keys or values x [B, heads, T, D] into cache [B, heads, L, D] at `columns`: [T] for every row, or [B, T]."""
    x = x.to(cache.dtype)
    if columns.dim() == 1:
        return cache.index_copy_(2, columns, x)
    return cache.scatter_(2, columns[:, None, :, None].expand_as(x), x)


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean attention mask (True: may attend) as an additive one: 0 where True, -inf elsewhere."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, -math.inf)


def _take(h: torch.Tensor, last: torch.Tensor | None) -> torch.Tensor:
    """Each row's hidden state [B, H] in column `last` [B] of h [B, T, H] (None: the last column)."""
    return h[:, -1] if last is None else h[torch.arange(len(h), device=h.device), last]
