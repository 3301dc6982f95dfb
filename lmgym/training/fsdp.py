"""FSDP2 (`torch.distributed.fsdp.fully_shard`) for `TrainerConfig.data_parallel = "fsdp"`.

What is sharded: each decoder layer gets its own `fully_shard` (its weights, LoRA layers included, are
all-gathered for its forward and backward and its gradients reduce-scattered), then the backbone root
holds the final norm. The input embedding is left out (`ignored_params`): the policy's log-probs read
the lm-head weight raw (`chunked_token_logprobs(h, head.weight, ...)`), and a head tied to the embedding
would otherwise be a sharded DTensor there. The embedding (and an untied head) stays a plain replicated
tensor whose gradient the trainer all-reduces, as DDP's path does for parameters outside the backbone:
the layers, where the memory is, are sharded; one embedding table is the price of an untouched head.

Every forward of a sharded layer is a collective, so every rank must run the same number of forward
passes: training micro-batch counts must match across ranks (the trainer's groups are split evenly),
and evaluation runs on every rank under FSDP (rank 0 alone would wait forever). Sampling runs on full
weights: `full_weights` all-gathers each layer once and keeps it whole until the sampling ends, so the
token-by-token decode (generation.decode on CPU, fast_decode's direct submodule calls on CUDA) does no
collective per token and ranks may stop at different lengths.

Activation checkpointing (`gradient_checkpointing`, policies/padded_passes.py) is per decoder layer, the
unit each `fully_shard` covers, and is set before sharding. transformers 5.x checkpoints the layer's
`forward`, inside FSDP's hooks, so the recompute runs on the layer the pre-backward hook has gathered;
4.x checkpoints the layer's call, around the hooks, which FSDP2 then skips in the recompute (its pre- and
post-forward hooks do nothing during the backward). A compiled layer checkpoints inside its `forward` whatever
the release (policies/compiled_layers.py). tests/test_gradient_checkpointing.py checks two ranks against one
process without it.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from lmgym.training import distributed as dist


def shard(backbone: torch.nn.Module) -> list[torch.nn.Module]:
    """`fully_shard` each of `backbone.layers`, then `backbone` (its input embedding kept whole) on a
    1-D mesh of every rank; returns the sharded modules (the layers, then the root)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    layers = getattr(backbone, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList) or len(layers) == 0:
        raise ValueError(f"data_parallel='fsdp' needs a decoder backbone with .layers, got {type(backbone).__name__}")
    device = next(backbone.parameters()).device
    mesh = init_device_mesh(device.type, (dist.world_size(),))
    embedding = backbone.get_input_embeddings()
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(backbone, mesh=mesh, ignored_params=set(embedding.parameters()))
    return [*layers, backbone]


def is_sharded(p: torch.Tensor) -> bool:
    """Whether `p` is a DTensor shard (its gradient is reduce-scattered by FSDP, not all-reduced by us)."""
    from torch.distributed.tensor import DTensor

    return isinstance(p, DTensor)


def whole_state_dict(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """`module.state_dict()`, with every FSDP shard gathered whole on every rank (then a collective)."""
    if not any(is_sharded(p) for p in module.parameters()):
        return module.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(module, options=StateDictOptions(full_state_dict=True))


@contextmanager
def gradient_sync(modules: Sequence[torch.nn.Module], enabled: bool, keep_gathered: bool = False) -> Iterator[None]:
    """Reduce-scatter in this backward only when `enabled` (FSDP2's counterpart of DDP's `no_sync`).

    keep_gathered: each module stays whole after its forward, and after its backward unless `enabled` (the
    step's last micro-batch), so a step all-gathers each layer once instead of twice per micro-batch
    (`TrainerConfig.fsdp_reshard_after_forward = False`: for models whose gathered layers fit beside the rest,
    where the gathers, not the memory, bound the update)."""
    _set_sync(modules, enabled, keep_gathered, after_forward=False)
    try:
        yield
    finally:
        _set_sync(modules, True, keep_gathered, after_forward=True)


def _set_sync(modules: Sequence[torch.nn.Module], enabled: bool, keep_gathered: bool, after_forward: bool) -> None:
    """Each module's gradient sync `enabled`; with `keep_gathered`, it reshards after its forward when
    `after_forward` and after its backward when `enabled`."""
    for m in modules:
        m.set_requires_gradient_sync(enabled, recurse=False)
        if keep_gathered:
            m.set_reshard_after_forward(after_forward, recurse=False)
            m.set_reshard_after_backward(enabled, recurse=False)


@contextmanager
def full_weights(modules: Sequence[torch.nn.Module]) -> Iterator[None]:
    """Every sharded module whole for the duration (one all-gather each, on every rank), resharded after."""
    for m in modules:
        m.set_reshard_after_forward(False, recurse=False)
        m.unshard()
    try:
        yield
    finally:
        for m in modules:
            m.reshard()
            m.set_reshard_after_forward(True, recurse=False)


def clip_grad_norm(parameters: Sequence[torch.Tensor], max_norm: float) -> float:
    """The global gradient norm over sharded and whole gradients, clipped to `max_norm` (0: not clipped)
    as `torch.nn.utils.clip_grad_norm_` does on one process; whole gradients are equal on every rank."""
    grads = [p.grad for p in parameters if p.grad is not None]
    shards = [g.to_local() for g in grads if is_sharded(g)]
    local = sum((float(s.detach().double().pow(2).sum()) for s in shards), 0.0)
    whole = sum((float(g.detach().double().pow(2).sum()) for g in grads if not is_sharded(g)), 0.0)
    norm = (dist.all_reduce_sum(local) + whole) ** 0.5
    if max_norm > 0:
        coef = min(1.0, max_norm / (norm + 1e-6))
        for g in grads:
            g.mul_(coef)
    return norm


def optimizer_foreach(groups: Sequence[dict]) -> bool | None:
    """AdamW's `foreach` for these parameter groups: False where they mix DTensor shards and whole tensors
    (FSDP here keeps the embedding whole), since torch's multi-tensor kernels refuse the mix ("got mixed
    torch.Tensor and DTensor"; the default picks them on CUDA); None, torch's default, otherwise."""
    params = [p for group in groups for p in group["params"]]
    kinds = {is_sharded(p) for p in params}
    return False if len(kinds) > 1 else None

