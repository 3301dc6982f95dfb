"""Versioned weights from trainer rank 0 to the rollout ranks, over the weights group (broadcasts).

Each message starts with a header [kind, version, values]: FULL (every parameter, and a picklable payload: the run's
start state; sent once as a run starts), WEIGHTS (the trainable parameters only: a LoRA adapter's when training
LoRA) or END (no tensors; the payload is the run's metrics rows). Tensors travel as one flat buffer per dtype.
Trainer rank 0 publishes without waiting (`async_op`), on copies, so it trains on while the rollout ranks take each
version between batches; the broadcasts of one group run in the order they were issued."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as td

from lmgym.training.rollout_workers.transport import PendingWorks

FULL, WEIGHTS, END = 0, 1, 2
KINDS = {FULL: "full", WEIGHTS: "weights", END: "end"}


@dataclass
class Message:
    """What a rollout rank received: the kind, the policy version and the payload (FULL and END only)."""

    kind: int
    version: int
    payload: Any = None


def _device(group) -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if td.get_backend(group) == "nccl" else torch.device("cpu")


def buckets(tensors: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """`tensors` grouped by dtype, in the order each dtype first appears (one flat buffer each)."""
    out: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in tensors:
        out.setdefault(t.dtype, []).append(t)
    return list(out.values())


class WeightPublisher:
    """Trainer rank 0's side: `publish` a version; `wait` until every rollout rank has taken each one."""

    def __init__(self, group):
        self.group = group
        self.device = _device(group)
        self._pending = PendingWorks()  # the sends in flight

    def publish(self, kind: int, version: int, tensors: list[torch.Tensor] = (), payload: Any = None) -> None:
        """Send `tensors` (copied now) as `version`, and for FULL/END the picklable `payload` (this call waits
        for the payload's broadcast; the tensors' go on in the background)."""
        with torch.no_grad():
            flats = [torch.cat([t.detach().reshape(-1) for t in bucket]).to(self.device)
                     for bucket in buckets(list(tensors))] if kind != END else []
        values = sum(f.numel() for f in flats)
        header = torch.tensor([kind, version, values], dtype=torch.int64, device=self.device)
        works = [td.broadcast(header, src=0, group=self.group, async_op=True)]
        if kind in (FULL, END):
            td.broadcast_object_list([payload], src=0, group=self.group)
        works += [td.broadcast(flat, src=0, group=self.group, async_op=True) for flat in flats]
        self._pending.add(works, [header, *flats])

    def wait(self) -> None:
        """Block until every published message has reached every rollout rank."""
        self._pending.wait()


def receive_weights(group, full: list[torch.Tensor], trainable: list[torch.Tensor]) -> Message:
    """A rollout rank's side: the next message, its tensors copied into `full` (FULL) or `trainable` (WEIGHTS)
    in place; a size that differs from this rank's is a one-line RuntimeError."""
    device = _device(group)
    header = torch.empty(3, dtype=torch.int64, device=device)
    td.broadcast(header, src=0, group=group)
    kind, version, values = (int(x) for x in header.tolist())
    payload = None
    if kind in (FULL, END):
        box: list[Any] = [None]
        td.broadcast_object_list(box, src=0, group=group)
        payload = box[0]
    if kind == END:
        return Message(kind, version, payload)
    targets = full if kind == FULL else trainable
    mine = sum(t.numel() for t in targets)
    if mine != values:
        raise RuntimeError(f"trainer rank 0 sent {KINDS.get(kind, kind)} weights of {values} values, this rollout "
                           f"rank's policy has {mine}: build the same policy (and LoRA settings) on every rank")
    with torch.no_grad():
        for bucket in buckets(targets):
            flat = torch.empty(sum(t.numel() for t in bucket), dtype=bucket[0].dtype, device=device)
            td.broadcast(flat, src=0, group=group)
            offset = 0
            for t in bucket:
                t.copy_(flat[offset:offset + t.numel()].view_as(t))
                offset += t.numel()
    return Message(kind, version, payload)
