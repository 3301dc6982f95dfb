"""How a multi-process run averages gradients: torch's DDP, FSDP2 sharding (training/fsdp.py) or one all-reduce.

`TrainerConfig.data_parallel` picks it. With "ddp" the policy's decoder backbone (the module every
training forward pass runs through: `HFPolicy.data_parallel_module()`) is wrapped in DDP, and the
policy routes its grad-enabled backbone passes through the wrapper, so DDP's bucketed all-reduce runs
during the backward of a step's last micro-batch (the others run under `no_sync`). Trainable
parameters outside the backbone (an untied lm-head, a value head) are averaged by
`distributed.sync_gradients` after the backward. A policy without that seam falls back to "allreduce":
every gradient averaged by `sync_gradients` after the step's last backward. In one process both are
no-ops.

DDP does not sync buffers in its forward (the backbone's buffers are constant rotary tables), so its
forward holds no collective: ranks may run different numbers of micro-batches, and forward passes
without gradients (sampling, the reference, rank 0's evaluation) never touch the wrapper. torch 2.13
deprecates `broadcast_buffers` (a FutureWarning) for `forward_sync_buffers`, which still broadcasts the
buffers once at construction (harmless: every rank computed the same tables); older torch has only
`broadcast_buffers=False`, used there.

With "fsdp" the same backbone is sharded in place (training/fsdp.py says what and why); its sharded
gradients are reduce-scattered by FSDP in the step's last backward, the rest all-reduced in `finish`,
and `clip_grad_norm` takes the norm over both.
"""
from __future__ import annotations

import inspect
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext

import torch

from lmgym.policies.base import DataParallelPolicy
from lmgym.policies.contract import check_contract
from lmgym.training import distributed as dist
from lmgym.training import fsdp
from lmgym.training.config import DATA_PARALLEL_MODES


class GradientAverager:
    """Averages a trainer's gradients over processes, by `mode` ("ddp", "fsdp" or "allreduce")."""

    def __init__(self, policy, mode: str, keep_gathered: bool = False):
        if mode not in DATA_PARALLEL_MODES:
            raise ValueError(f"data_parallel must be one of {', '.join(DATA_PARALLEL_MODES)}, got {mode!r}")
        self.ddp: torch.nn.parallel.DistributedDataParallel | None = None
        self.sharded: list[torch.nn.Module] = []  # the FSDP2 modules (mode "fsdp")
        self._wrapped: set[int] = set()  # ids of the parameters DDP or FSDP averages
        self.keep_gathered = keep_gathered  # FSDP: layers stay gathered through a step's micro-batches
        several = dist.is_initialized() and dist.world_size() > 1
        if mode == "ddp" and several and isinstance(policy, DataParallelPolicy):
            self.ddp = wrap(policy.data_parallel_module())
            policy.use_data_parallel(self.ddp)
            self._wrapped = {id(p) for p in self.ddp.module.parameters() if p.requires_grad}
        elif mode == "fsdp" and several:
            check_contract(policy, DataParallelPolicy, "data_parallel='fsdp'")
            self.sharded = fsdp.shard(policy.data_parallel_module())
            policy.use_sampling_weights(lambda: fsdp.full_weights(self.sharded))
            self._wrapped = {id(p) for p in policy.parameters() if fsdp.is_sharded(p)}

    @property
    def mode(self) -> str:
        """What averages the gradients here: "ddp", "allreduce", or "none" (one process)."""
        if self.ddp is not None or self.sharded:
            return "ddp" if self.ddp is not None else "fsdp"
        return "allreduce" if dist.world_size() > 1 else "none"

    def micro_batch(self, last: bool) -> AbstractContextManager:
        """Wrap a micro-batch's forward AND backward: DDP's `no_sync` (FSDP: no reduce-scatter) unless it
        is the step's last; with `keep_gathered`, FSDP's layers stay whole until that backward."""
        if self.sharded:
            return fsdp.gradient_sync(self.sharded, enabled=last, keep_gathered=self.keep_gathered)
        return self.ddp.no_sync() if self.ddp is not None and not last else nullcontext()

    def finish(self, parameters: Sequence[torch.Tensor]) -> None:
        """After the last backward: average what DDP did not (every gradient without DDP)."""
        dist.sync_gradients([p for p in parameters if id(p) not in self._wrapped])

    def clip_grad_norm(self, parameters: Sequence[torch.Tensor], max_norm: float) -> float:
        """The gradient norm (clipped to `max_norm` when > 0), over FSDP shards too."""
        if self.sharded:
            return fsdp.clip_grad_norm(parameters, max_norm)
        grads = [p.grad for p in parameters if p.grad is not None]
        if max_norm > 0:
            return float(torch.nn.utils.clip_grad_norm_(parameters, max_norm))
        return float(torch.nn.utils.get_total_norm(grads))


def wrap(module: torch.nn.Module) -> torch.nn.parallel.DistributedDataParallel:
    """`module` in DDP on this rank's device (its parameters and buffers start as rank 0's), over the ranks
    `distributed` works over (the trainer ranks when rollout workers take some)."""
    device = next(module.parameters()).device
    return torch.nn.parallel.DistributedDataParallel(
        module, device_ids=[device.index] if device.type == "cuda" else None, process_group=dist.group(),
        **_no_forward_buffer_sync())


def _no_forward_buffer_sync() -> dict[str, bool]:
    """DDP's keyword for "no buffer broadcast in forward": `forward_sync_buffers` where torch has it (2.13+,
    where `broadcast_buffers` warns as deprecated), else `broadcast_buffers`."""
    parameters = inspect.signature(torch.nn.parallel.DistributedDataParallel.__init__).parameters
    return {"forward_sync_buffers": False} if "forward_sync_buffers" in parameters else {"broadcast_buffers": False}
