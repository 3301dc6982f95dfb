"""How a multi-process run averages gradients: torch's `DistributedDataParallel` or one all-reduce.

`TrainerConfig.data_parallel` picks it. With "ddp" the policy's decoder backbone (the module every
training forward pass runs through: `HFPolicy.data_parallel_module()`) is wrapped in DDP, and the
policy routes its grad-enabled backbone passes through the wrapper, so DDP's bucketed all-reduce runs
during the backward of a step's last micro-batch (the others run under `no_sync`). Trainable
parameters outside the backbone (an untied lm-head, a value head) are averaged by
`distributed.sync_gradients` after the backward. A policy without that seam falls back to "allreduce":
every gradient averaged by `sync_gradients` after the step's last backward. In one process both are
no-ops.

DDP is built with `broadcast_buffers=False` (the backbone's buffers are constant rotary tables) so its
forward holds no collective: ranks may run different numbers of micro-batches, and forward passes
without gradients (sampling, the reference, rank 0's evaluation) never touch the wrapper.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import ContextManager, Sequence

import torch

from algorithms import distributed as dist
from algorithms.config import DATA_PARALLEL_MODES


class GradientAverager:
    """Averages a trainer's gradients over processes, by `mode` ("ddp" or "allreduce")."""

    def __init__(self, policy, mode: str):
        if mode not in DATA_PARALLEL_MODES:
            raise ValueError(f"data_parallel must be one of {', '.join(DATA_PARALLEL_MODES)}, got {mode!r}")
        self.ddp: torch.nn.parallel.DistributedDataParallel | None = None
        self._wrapped: set[int] = set()  # ids of the parameters DDP averages
        several = dist.is_initialized() and dist.world_size() > 1
        if mode == "ddp" and several and hasattr(policy, "data_parallel_module"):
            self.ddp = wrap(policy.data_parallel_module())
            policy.use_data_parallel(self.ddp)
            self._wrapped = {id(p) for p in self.ddp.module.parameters() if p.requires_grad}

    @property
    def mode(self) -> str:
        """What averages the gradients here: "ddp", "allreduce", or "none" (one process)."""
        return "ddp" if self.ddp is not None else "allreduce" if dist.world_size() > 1 else "none"

    def micro_batch(self, last: bool) -> ContextManager:
        """Wrap a micro-batch's forward AND backward: DDP's `no_sync` unless it is the step's last."""
        return self.ddp.no_sync() if self.ddp is not None and not last else nullcontext()

    def finish(self, parameters: Sequence[torch.Tensor]) -> None:
        """After the last backward: average what DDP did not (every gradient without DDP)."""
        dist.sync_gradients([p for p in parameters if id(p) not in self._wrapped])


def wrap(module: torch.nn.Module) -> torch.nn.parallel.DistributedDataParallel:
    """`module` in DDP on this rank's device (its parameters and buffers start as rank 0's)."""
    device = next(module.parameters()).device
    return torch.nn.parallel.DistributedDataParallel(
        module, device_ids=[device.index] if device.type == "cuda" else None, broadcast_buffers=False)
