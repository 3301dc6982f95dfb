"""torch.distributed helpers; every function is a no-op in a single process.

Launch with `torchrun --nproc_per_node N script.py`: each rank collects its own episodes (its own
seeds and group ids), token counts are all-reduced so the loss normaliser is global, and gradients
are averaged with one all-reduce per optimizer step.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as td


def is_initialized() -> bool:
    return td.is_available() and td.is_initialized()


def rank() -> int:
    return td.get_rank() if is_initialized() else 0


def world_size() -> int:
    return td.get_world_size() if is_initialized() else 1


def is_main() -> bool:
    return rank() == 0


def init_from_env() -> torch.device:
    """Initialise the process group when launched by torchrun; returns this rank's device."""
    if "RANK" in os.environ and not is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        td.init_process_group(backend)
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def all_reduce_sum(value: float) -> float:
    if not is_initialized():
        return value
    t = torch.tensor([value], dtype=torch.float64,
                     device="cuda" if td.get_backend() == "nccl" else "cpu")
    td.all_reduce(t)
    return float(t.item())


def sync_gradients(parameters) -> None:
    """Average gradients over ranks (flattened into one buffer per dtype)."""
    if not is_initialized() or world_size() == 1:
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    td.all_reduce(flat)
    flat /= world_size()
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset:offset + n].view_as(g))
        offset += n


def broadcast_parameters(parameters) -> None:
    """Make every rank start from rank 0's weights."""
    if not is_initialized():
        return
    for p in parameters:
        td.broadcast(p.data, src=0)
