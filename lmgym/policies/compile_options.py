"""Inductor options for the training layers' `torch.compile` (HFPolicy.compile_layers).

Every micro-batch has its own length, so the layers are compiled with symbolic shapes. Inductor still
specialises some decisions on the sizes and guards them; crossing such a guard mid-run recompiles every
layer's code (5-7 s a step for W1's 135M model on an H100, several times a run). One of them is the
mix-order reduction fusion (the norms' backward), which Inductor applies only above 5 Mi elements unless its
non-strict mode is on: on, the fusion is chosen whatever the size, and no guard is made. Inductor's own note
on that option says it helps avoid recompilations. Options this torch does not have are left out.
"""
from __future__ import annotations

WANTED = {"triton.mix_order_reduction_non_strict_mode": True}


def inductor_options() -> dict[str, object] | None:
    """The options of WANTED this torch's Inductor knows (None when it knows none of them)."""
    try:
        from torch._inductor import config
    except ImportError:  # a torch without Inductor: the caller compiles with the backend's defaults
        return None
    known = {}
    for name, value in WANTED.items():
        section, _, leaf = name.rpartition(".")
        holder = getattr(config, section, None) if section else config
        if holder is not None and hasattr(holder, leaf):
            known[name] = value
    return known or None
