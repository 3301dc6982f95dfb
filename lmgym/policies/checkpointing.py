"""Activation checkpointing of a Hugging Face model's decoder layers (TRL's `gradient_checkpointing`).

It is transformers' own: each decoder layer (a `GradientCheckpointingLayer`) runs under
`torch.utils.checkpoint` with `use_reentrant=False` while it is in training mode with gradients on, so
its activations are recomputed in the backward pass instead of kept; passes without gradients (sampling,
the KL reference, scoring) run as before. Where the checkpoint sits depends on the transformers release:
5.x checkpoints the layer's `forward`, so module hooks (FSDP2's all-gathers) stay outside it and a layer
compiled with `Module.compile` compiles the checkpoint inside its graph (the partitioner recomputes);
4.x checkpoints the layer's call, around the compiled layer. Either way the gradients are those of a pass
without it (tests/test_gradient_checkpointing.py). Non-reentrant checkpointing differentiates LoRA
adapters behind a frozen embedding; transformers also makes the embedding's output require grad.
"""
from __future__ import annotations

import torch

USE_REENTRANT = False  # torch's recommended mode: no inputs that must require grad, works under DDP and FSDP2


def enable_activation_checkpointing(model: torch.nn.Module) -> None:
    """Checkpoint every decoder layer of `model` (a transformers model, or a peft model around one); its
    KV cache is turned off for forward passes (sampling turns it back on for itself). A model whose
    architecture does not support it is transformers' one-line ValueError."""
    kwargs = {"use_reentrant": USE_REENTRANT}
    enable = getattr(model, "activation_checkpointing_enable", None)  # transformers 5.x: the old name warns there
    if enable is not None:
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    config = getattr(model, "config", None)
    if config is not None:
        config.use_cache = False


def checkpointed_layers(model: torch.nn.Module) -> int:
    """How many of `model`'s decoder layers checkpoint their activations."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    return sum(isinstance(m, GradientCheckpointingLayer) and bool(m.gradient_checkpointing) for m in model.modules())
