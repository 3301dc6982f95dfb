"""The KL reference model: scoring with it, re-syncing it to the policy (`ReferenceSync`, the callback an
RLAlgorithm adds when `ref_sync_every` > 0), and its part of a checkpoint.

A checkpoint stores the reference weights only when they can be found nowhere else: never synced, the
reference is the model the algorithm was built with (rebuilt the same way to resume); synced at the
checkpoint's iteration, it equals the stored policy (a sharded FSDP checkpoint stores no whole policy: the
reference is copied from the policy once its shards are loaded); synced earlier, its weights are stored.
Under FSDP the reference is a whole copy on every rank, synced from the gathered policy.

A LoRA policy's reference shares its model: the base (adapter disabled) until the first sync, then a second
adapter copied from the policy's at each sync (policies/reference_adapter.py; under FSDP that adapter is
added before sharding, computing the base until the first sync). That adapter's weights are
in the policy's state_dict; a checkpoint marks it "adapter" so that loading adds it before the policy loads.
"""
from __future__ import annotations

from typing import Any

import torch

from lmgym.policies import reference_adapter as adapter
from lmgym.policies.logprobs import sampled_token_outputs
from lmgym.training import distributed as dist
from lmgym.training import fsdp
from lmgym.training.callbacks import TrainerCallback
from lmgym.training.checkpoints import CheckpointError


def is_lora(ref_policy) -> bool:
    """A LoRA policy's reference: the policy's own (peft) model."""
    return getattr(ref_policy, "is_lora", False) and hasattr(getattr(ref_policy, "model", None), "disable_adapter")


def reference_context(ref_policy):
    """LoRA policies share weights with their reference: score with the reference adapter once synced,
    with the adapters disabled before."""
    if is_lora(ref_policy):
        if adapter.has_reference_adapter(ref_policy.model):
            return adapter.reference_adapter_active(ref_policy.model)
        return ref_policy.model.disable_adapter()
    return torch.no_grad()


def reference_logprobs(ref_policy, batch, temperature: float) -> torch.Tensor:
    """The reference's log-probs [B, C] of a batch's sampled tokens, 0 where `loss_mask` is not set (no
    gradients)."""
    with reference_context(ref_policy):
        return sampled_token_outputs(ref_policy, batch, temperature)[0]


def prepare_sharded_resync(ref_policy, data_parallel: str, ref_sync_every: int) -> None:
    """Before FSDP shards the layers: a LoRA policy that will re-sync its reference gets the reference
    adapter now (its B zero: the base, as before a first sync), since none can be added to sharded layers."""
    if data_parallel == "fsdp" and dist.world_size() > 1 and ref_sync_every > 0 and is_lora(ref_policy):
        adapter.add_reference_adapter(ref_policy.model)


def has_own_weights(ref_policy) -> bool:
    """False without a reference, or for a LoRA policy's (its frozen base, inside the policy)."""
    return ref_policy is not None and not getattr(ref_policy, "is_lora", False)


def sync_reference(ref_policy, policy) -> bool:
    """Copy the policy's weights into the reference (LoRA: its adapter into the reference adapter); False
    (nothing copied) without a reference."""
    if is_lora(ref_policy):
        adapter.sync_reference_adapter(ref_policy.model)
        return True
    if not has_own_weights(ref_policy):
        return False
    ref_policy.model.load_state_dict(fsdp.whole_state_dict(policy.model))  # FSDP: gathered on every rank
    return True


class ReferenceSync(TrainerCallback):
    """Copies the policy into the reference every `ref_sync_every` iterations (REINFORCE-stable's reset), when
    an iteration ends; the trainer's `ref_synced_at` records the last copy (a checkpoint reads it)."""

    def on_iteration_end(self, trainer, metrics: dict[str, Any]) -> None:
        every = trainer.config.ref_sync_every
        if every and trainer.iteration % every == 0 and sync_reference(trainer.ref_policy, trainer.policy):
            trainer.ref_synced_at = trainer.iteration


def reference_source(ref_policy, synced_at: int | None, iteration: int) -> str:
    """Where a checkpoint finds the reference weights: "none" (no own weights: none, or LoRA's base),
    "adapter" (LoRA's reference adapter, in the policy's state), "initial" (never synced), "policy" (synced
    at this iteration) or "stored"."""
    if is_lora(ref_policy) and adapter.has_reference_adapter(ref_policy.model):
        return "adapter"
    if not has_own_weights(ref_policy):
        return "none"
    if synced_at is None:
        return "initial"
    return "policy" if synced_at == iteration else "stored"


def reference_state(ref_policy, synced_at: int | None, iteration: int) -> dict[str, Any]:
    """The reference's entries of a checkpoint's state.pt."""
    source = reference_source(ref_policy, synced_at, iteration)
    return {"reference": ref_policy.state_dict() if source == "stored" else None, "reference_source": source,
            "ref_synced_at": synced_at}


def load_reference(ref_policy, state: dict[str, Any], synced_at: int | None) -> int | None:
    """Restore the reference as `reference_state` described it (older checkpoints always stored it);
    returns the iteration it was last synced at. `synced_at`: this run's, before loading."""
    source = state.get("reference_source", "stored" if state.get("reference") is not None else "none")
    if source == "initial" and synced_at is not None:
        raise CheckpointError("its reference is the initial model, but this algorithm's reference was already "
                              "synced; load it into a freshly built algorithm")
    if is_lora(ref_policy):  # the reference adapter's weights come with the policy's, loaded next
        if source == "adapter":
            adapter.add_reference_adapter(ref_policy.model)
        else:
            adapter.remove_reference_adapter(ref_policy.model)
    elif ref_policy is not None and source == "stored":
        ref_policy.load_state_dict(state["reference"])
    elif has_own_weights(ref_policy) and source == "policy" and "policy" in state:  # sharded: `resync_after_load`
        ref_policy.load_state_dict(state["policy"])
    return state.get("ref_synced_at")


def resync_after_load(ref_policy, policy, state: dict[str, Any]) -> None:
    """A sharded checkpoint (FSDP) whose reference equals its policy holds no whole policy to copy from:
    once the policy's shards are loaded, copy it into the reference (every rank)."""
    if has_own_weights(ref_policy) and state.get("reference_source") == "policy" and "policy" not in state:
        sync_reference(ref_policy, policy)
