"""An unsharded copy of an FSDP-sharded `HFPolicy`, rebuilt from its gathered state dict, to save from.

FSDP modules cannot be deep-copied and their parameters are shards, so `HFPolicy.save` (which merges a
LoRA adapter into a copy and calls `save_pretrained`) cannot run on the sharded model itself. Rank 0
rebuilds the same architecture on the CPU from the model's config (and the same LoRA adapter), loads the
whole state dict gathered from every rank, and saves that: the folder is what `save` writes on one
process. It costs one more copy of the weights in rank 0's CPU memory, for the duration.
"""
from __future__ import annotations

import copy

import torch

from lmgym.policies.base import TrainablePolicy
from lmgym.policies.reference_adapter import REFERENCE_ADAPTER


def unsharded_copy(policy, state: dict[str, torch.Tensor]) -> TrainablePolicy:
    """A copy of the HFPolicy `policy` (`HFPolicy.with_model`) around a plain CPU rebuild of `policy.model`
    holding `state` (the model's whole state dict). The KL reference adapter, if any, is left out (`save` never
    writes it)."""
    model = policy.model
    is_peft = hasattr(model, "peft_config")
    base = model.get_base_model() if is_peft else model
    dtype = next(iter(state.values())).dtype if state else None
    rebuilt = type(base)._from_config(base.config, dtype=dtype)
    rebuilt.generation_config = copy.deepcopy(base.generation_config)
    if is_peft:
        from peft import get_peft_model

        active = model.active_adapter
        rebuilt = get_peft_model(rebuilt, copy.deepcopy(model.peft_config[active]), adapter_name=active)
    wanted = rebuilt.state_dict()
    missing = [k for k in wanted if k not in state]
    unexpected = [k for k in state if k not in wanted and f".{REFERENCE_ADAPTER}." not in k]
    if missing or unexpected:
        raise ValueError(f"unsharded_copy: the gathered state does not fit a rebuilt {type(base).__name__} "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    rebuilt.load_state_dict({k: state[k] for k in wanted})
    rebuilt.eval()
    return policy.with_model(rebuilt, "cpu")
