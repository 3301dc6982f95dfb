"""A LoRA policy's re-syncable KL reference: a second peft adapter, `REFERENCE_ADAPTER`, on the same model.

Until the first sync a LoRA policy's reference is its base (the adapter disabled), which is what a freshly
added adapter (B = 0) computes, so no adapter is added before it is needed (under FSDP it is added before
sharding: algorithms/reference.prepare_sharded_resync). `sync_reference_adapter` adds
the reference adapter the first time and copies the policy's active adapter into it each time; scoring
under `reference_adapter_active` then uses it. Its weights are part of the model's state_dict (so of every
checkpoint's policy state) but never of a saved model folder (`HFPolicy.save` leaves it out).
"""
from __future__ import annotations

import copy
from contextlib import contextmanager

import torch

REFERENCE_ADAPTER = "reference"


def has_reference_adapter(model) -> bool:
    """Whether the (peft) model carries the reference adapter."""
    return REFERENCE_ADAPTER in (getattr(model, "peft_config", None) or {})


def add_reference_adapter(model) -> None:
    """Add the reference adapter, configured as the active one (rank, alpha, targets), frozen, its B zero
    (so it computes the base until a sync); the active adapter and what trains stay as they were."""
    if has_reference_adapter(model):
        return
    active = model.active_adapter
    config = copy.deepcopy(model.peft_config[active])
    config.inference_mode = True
    model.add_adapter(REFERENCE_ADAPTER, config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if f".{REFERENCE_ADAPTER}." in name:
                param.requires_grad_(False)
                if "lora_B" in name:  # the base exactly, whatever initialisation the config asks for
                    param.zero_()
    model.set_adapter(active)


def remove_reference_adapter(model) -> None:
    """Delete the reference adapter (the reference is the base again); nothing without one."""
    if has_reference_adapter(model):
        model.delete_adapter(REFERENCE_ADAPTER)


@torch.no_grad()
def sync_reference_adapter(model) -> None:
    """Copy the active adapter's weights into the reference adapter (added the first time)."""
    from peft.utils import get_peft_model_state_dict, set_peft_model_state_dict

    active = model.active_adapter
    if active == REFERENCE_ADAPTER:
        raise ValueError("sync_reference_adapter: the reference adapter is active; activate the policy's adapter")
    add_reference_adapter(model)
    weights = get_peft_model_state_dict(model, adapter_name=active)
    set_peft_model_state_dict(model, {k: v.detach().clone() for k, v in weights.items()},
                              adapter_name=REFERENCE_ADAPTER)


@contextmanager
def reference_adapter_active(model):
    """Score with the reference adapter (no gradients), then the previously active adapter again. peft's
    `set_adapter` marks only the active adapter trainable: switching back freezes the reference again."""
    previous = model.active_adapter
    model.set_adapter(REFERENCE_ADAPTER)
    try:
        with torch.no_grad():
            yield
    finally:
        model.set_adapter(previous)
