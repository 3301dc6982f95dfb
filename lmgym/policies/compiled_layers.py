"""Compiled decoder layers (`HFPolicy.compile_layers`), with activation checkpointing inside the compiled code.

Each layer's `forward` is replaced by `LayerCompilation.forward`, which runs the class's own forward through one
of two `torch.compile`d entries:
- without a checkpoint (passes without gradients, evaluation mode, checkpointing off): `plain`, as Dynamo
  pleases (a recompile limit or a graph break runs part of it eagerly, which changes nothing but speed);
- with a checkpoint (training passes of a checkpointed layer): `checkpointed`, which calls
  `torch.utils.checkpoint` inside the compiled code, with `fullgraph=True`. Dynamo captures the checkpoint as a
  higher-order op and AOTAutograd recomputes the layer inside the compiled backward, so the forward and its
  recomputation are one graph: there is no second cache lookup in the backward at all.

Why (issue 35): transformers up to 5.17 (the GPU image's) checkpoints a layer's call, around a layer compiled
with `Module.compile`, so the recomputation looked the compiled forward up again, in the backward. On CUDA that
runs on autograd's device thread, whose intra-op thread count, part of the global state Dynamo guards, differs
from the main thread's (ecmwf/anemoi-core#1330 logged `GLOBAL_STATE changed: num_threads` there): the
recomputation needs a graph of its own. A fresh process had room for it; after a first stage (SFT) had put its
graphs in the same code object's cache, the recomputation met the recompile limit (8), ran eagerly, saved other
tensors than the compiled forward had, and `torch.utils.checkpoint` raised "Recomputed values for the following
tensors have different metadata" (tests/test_compile_checkpointing.py reproduces it on the CPU). Here
transformers' own checkpoint is switched off for compiled layers (`take_over_checkpointing`), which checkpoint
themselves as above, whatever the transformers release.

A pass of a single row runs uncompiled while such passes are rare. Dynamo's dynamic shapes specialise a size of 1,
so the first one-row micro-batch (an item longer than the token budget, or a lone last one) compiled both entries
again: about 15 s of an H200 (issue 35's W4b), for a pass that eager code runs in milliseconds. `RowTiering`
compiles the one-row shape only once it is common: at least `HOT_AFTER` one-row model passes that are half or more of
the entry's passes (a run with `micro_batch_size` 1). A one-row pass runs eagerly whole: forward and recomputation
(under the same uncompiled checkpoint as the fallback below), so the two always see one graph; the
recomputation, in the backward, runs under the attention kernels the forward could use
(`padded_passes.same_attention_kernels`).

Where the checkpointed entry cannot be compiled whole (the recompile limit, a graph break), Dynamo raises
before anything runs (`fullgraph=True`): the layers' checkpointed passes then run uncompiled from that call on,
forward and recomputation both with Dynamo disabled, and one RuntimeWarning says so. Each compilation (one per
`compile_layers` call: a new stage's policy gets its own) compiles its own copies of the two entry functions,
so its graphs live in caches of their own: an earlier stage's graphs neither count against its recompile limit
nor outlive their policy.
"""
from __future__ import annotations

import types
import warnings
from collections.abc import Callable, Iterable
from functools import partial

import torch
from torch.utils.checkpoint import checkpoint

from lmgym.policies.padded_passes import COMPILED_CHECKPOINT, USE_REENTRANT, same_attention_kernels

COMPILATION = "lmgym_compilation"  # the attribute holding a compiled layer's LayerCompilation
CACHE_ARGUMENTS = ("past_key_values", "cache", "layer_past")  # a KV cache's names across transformers releases


def _class_forward(layer: torch.nn.Module, *args, **kwargs):
    """The layer class's own forward (the instance's `forward` attribute is `LayerCompilation.forward`)."""
    return type(layer).forward(layer, *args, **kwargs)


def _checkpointed_forward(layer: torch.nn.Module, *args, **kwargs):
    """The class's forward under a non-reentrant checkpoint (compiled: Dynamo's checkpoint higher-order op)."""
    return checkpoint(partial(type(layer).forward, layer, **kwargs), *args, use_reentrant=USE_REENTRANT)


_uncompiled_forward = torch.compiler.disable(_class_forward)  # the fallback: nothing under it compiles


def _own_copy(function: Callable) -> Callable:
    """`function` with a code object of its own: Dynamo keeps graphs, and counts recompilations, per code object."""
    copy = types.FunctionType(function.__code__.replace(), function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    return copy


def _give_up_errors() -> tuple[type[BaseException], ...]:
    """What Dynamo raises when a `fullgraph=True` entry cannot be compiled whole (names vary across releases)."""
    from torch._dynamo import exc

    names = ("Unsupported", "FailOnRecompileLimitHit", "FailOnCacheLimitHit", "RecompileLimitExceeded",
             "CacheLimitExceeded")
    return tuple(getattr(exc, name) for name in names if isinstance(getattr(exc, name, None), type))


def _reason(err: BaseException) -> str:
    """One line on why Dynamo gave up."""
    if "Limit" in type(err).__name__:
        return f"torch._dynamo.config.recompile_limit ({torch._dynamo.config.recompile_limit}) reached"
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def _without_cache(layer: torch.nn.Module, kwargs: dict) -> dict:
    """A checkpointed pass writes no KV cache (the recomputation would write it again), as transformers does."""
    kwargs = dict(kwargs)
    if kwargs.get("use_cache"):
        kwargs["use_cache"] = False
    if not getattr(layer, "_can_checkpoint_with_cache", False):
        for name in CACHE_ARGUMENTS:
            if kwargs.get(name) is not None:
                kwargs[name] = None
    return kwargs


class RowTiering:
    """Whether a layer call of one entry runs compiled, by its row count: calls of two rows or more always; one-row
    calls once they are common (`HOT_AFTER` model passes' worth, `layers` calls each, and at least half of the
    entry's calls), and from then on."""

    HOT_AFTER = 8

    def __init__(self, layers: int):
        self.hot_after = self.HOT_AFTER * max(1, layers)
        self.passes = 0
        self.single_rows = 0
        self.single_row_compiled = False

    def compiles(self, rows: int | None) -> bool:
        """Counts a pass of `rows` rows (None: unknown, compiled) and says whether it runs compiled."""
        self.passes += 1
        if rows != 1 or self.single_row_compiled:
            return True
        self.single_rows += 1
        self.single_row_compiled = self.single_rows >= self.hot_after and 2 * self.single_rows >= self.passes
        return self.single_row_compiled


class OneGraphInputs:
    """The call's inputs as every pass of the entry gives them, so that one graph serves them (the same values):
    hidden states that carry `requires_grad` into a pass without gradients (a LoRA model's input embeddings
    require grad for checkpointing, so layer 0's do and layer 1's do not) detached, and rotary tables of one row
    shared by every row (passes without padding) expanded to the call's rows (padded passes have a row each).
    Either difference is a guard Dynamo checks: each doubled the graphs compiled (4 instead of 1 without
    gradients in a LoRA GRPO step, 2 instead of 1 with them). A model passes every layer the same tables, so
    they are expanded once a forward (the last expansion is kept, with the tables it came from)."""

    def __init__(self) -> None:
        self._last: tuple[tuple, int, tuple] | None = None  # (tables given, rows, tables expanded)

    def __call__(self, rows: int | None, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if args and isinstance(args[0], torch.Tensor) and args[0].requires_grad and not torch.is_grad_enabled():
            args = (args[0].detach(), *args[1:])
        tables = kwargs.get("position_embeddings")
        if rows is not None and rows > 1 and isinstance(tables, tuple) and all(
                isinstance(t, torch.Tensor) and t.dim() == 3 and t.shape[0] == 1 for t in tables):
            last = self._last
            if last is None or last[1] != rows or len(last[0]) != len(tables) or any(
                    a is not b for a, b in zip(last[0], tables)):
                last = self._last = (tables, rows, tuple(t.expand(rows, -1, -1).contiguous() for t in tables))
            kwargs = {**kwargs, "position_embeddings": last[2]}
        return args, kwargs


def _rows(args: tuple, kwargs: dict) -> int | None:
    """The batch size of a layer call: its hidden states' first dimension (None when there are none)."""
    hidden = args[0] if args else kwargs.get("hidden_states")
    return hidden.shape[0] if isinstance(hidden, torch.Tensor) and hidden.dim() == 3 else None


class LayerCompilation:
    """One `compile_layers` call's compiled entries, shared by the layers it compiled, and whether their
    checkpointed passes fell back to running uncompiled (`eager_reason`: why, None while compiled)."""

    def __init__(self, backend: str, options: dict | None, layers: int = 1):
        settings = dict(backend=backend, dynamic=True, options=options)  # every micro-batch's length differs
        self.plain = torch.compile(_own_copy(_class_forward), **settings)
        self.checkpointed = torch.compile(_own_copy(_checkpointed_forward), fullgraph=True, **settings)
        self.eager_reason: str | None = None
        self.tiering = {"plain": RowTiering(layers), "checkpointed": RowTiering(layers)}
        self._give_up = _give_up_errors()
        self.one_graph_inputs = OneGraphInputs()

    def __deepcopy__(self, memo: dict) -> LayerCompilation:
        return self  # a copied model's layers share the compiled entries, as their forward does

    def forward(self, layer: torch.nn.Module, *args, **kwargs):
        """A compiled layer's forward: checkpointed (inside the compiled code) in its training passes with
        gradients when it checkpoints, plain otherwise."""
        rows = _rows(args, kwargs)
        if not (getattr(layer, COMPILED_CHECKPOINT, False) and layer.training and torch.is_grad_enabled()):
            if self.tiering["plain"].compiles(rows):
                args, kwargs = self.one_graph_inputs(rows, args, kwargs)
                return self.plain(layer, *args, **kwargs)
            return _uncompiled_forward(layer, *args, **kwargs)
        kwargs = _without_cache(layer, kwargs)
        if self.tiering["checkpointed"].compiles(rows) and self.eager_reason is None:
            try:
                args, kwargs = self.one_graph_inputs(rows, args, kwargs)
                return self.checkpointed(layer, *args, **kwargs)
            except self._give_up as err:  # raised while compiling, before any of the layer ran
                self.eager_reason = _reason(err)
                warnings.warn(f"{type(layer).__name__}: the checkpointed forward could not be compiled whole "
                              f"({self.eager_reason}); checkpointed passes of these layers run uncompiled from "
                              f"here, passes without a checkpoint stay compiled", RuntimeWarning, stacklevel=2)
        return checkpoint(partial(_uncompiled_forward, layer, **kwargs), *args, use_reentrant=USE_REENTRANT,
                          context_fn=same_attention_kernels)


def compile_decoder_layers(layers: Iterable[torch.nn.Module], backend: str, options: dict | None) -> None:
    """Compile `layers` (decoder layers of one model, of one class) in place: their `forward` becomes one shared
    `LayerCompilation`'s; checkpointing, if on, moves inside the compiled code (`take_over_checkpointing`)."""
    layers = list(layers)
    compilation = LayerCompilation(backend, options, len(layers))
    for layer in layers:
        layer.forward = types.MethodType(compilation.forward, layer)
        setattr(layer, COMPILATION, compilation)
    take_over_checkpointing(layers)


def take_over_checkpointing(layers: Iterable[torch.nn.Module]) -> None:
    """Compiled layers that transformers checkpoints (`gradient_checkpointing`) checkpoint inside their compiled
    code instead: transformers' flag off (its checkpoint sits around the compiled call up to 5.17), ours on.
    Layers that are not compiled keep transformers' checkpoint."""
    for layer in layers:
        if getattr(layer, COMPILATION, None) is not None and getattr(layer, "gradient_checkpointing", False):
            layer.gradient_checkpointing = False
            setattr(layer, COMPILED_CHECKPOINT, True)


def compiled_layers(model: torch.nn.Module) -> int:
    """How many of `model`'s modules run through a `compile_decoder_layers` compilation."""
    return sum(getattr(m, COMPILATION, None) is not None for m in model.modules())
