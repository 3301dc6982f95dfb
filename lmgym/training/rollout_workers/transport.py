"""Trajectories from rollout ranks to trainer ranks: pickled, point to point, over the gloo transport group.

A rollout rank sends each trainer rank one `Batch` per batch index (that trainer's groups of it, possibly none)
without waiting (`isend`); a trainer rank receives from each rollout rank in turn, in batch order."""
from __future__ import annotations

import pickle
from dataclasses import dataclass, field

import torch
import torch.distributed as td

from lmgym.buffers import Trajectory


class PendingWorks:
    """The works of each asynchronous send (`torch.distributed` isend/broadcast with async_op) and their tensors."""

    def __init__(self):
        self._pending: list[tuple[list, list[torch.Tensor]]] = []

    def add(self, works: list, tensors: list[torch.Tensor]) -> None:
        """Keep `tensors` alive until `works` complete; forget the sends that already completed."""
        self._pending.append((works, tensors))
        self._pending = [(w, keep) for w, keep in self._pending if not all(x.is_completed() for x in w)]

    def wait(self) -> None:
        """Block until every send has completed."""
        for works, _ in self._pending:
            for work in works:
                work.wait()
        self._pending = []


@dataclass
class Batch:
    """One rollout rank's share of batch `index` for one trainer: its trajectories (each tagged with the policy
    version that sampled it, `Trajectory.iteration`) and the seconds the rollout rank spent sampling the batch."""

    index: int
    trajectories: list[Trajectory] = field(default_factory=list)
    seconds: float = 0.0


class TrajectorySender:
    """A rollout rank's side: `send` without waiting; `wait` before leaving."""

    def __init__(self, group):
        self.group = group
        self._pending = PendingWorks()  # the sends in flight

    def send(self, dst: int, batch: Batch) -> None:
        """Start sending `batch` to global rank `dst`."""
        data = torch.frombuffer(bytearray(pickle.dumps(batch)), dtype=torch.uint8)
        size = torch.tensor([data.numel()], dtype=torch.int64)
        works = [td.isend(size, dst, group=self.group), td.isend(data, dst, group=self.group)]
        self._pending.add(works, [size, data])

    def wait(self) -> None:
        """Block until every batch sent has been received."""
        self._pending.wait()


class TrajectoryReceiver:
    """A trainer rank's side: the next `Batch` from a rollout rank."""

    def __init__(self, group):
        self.group = group

    def receive(self, src: int, index: int) -> Batch:
        """The next batch from global rank `src`; one that is not batch `index` is a one-line RuntimeError."""
        size = torch.empty(1, dtype=torch.int64)
        td.recv(size, src, group=self.group)
        data = torch.empty(int(size.item()), dtype=torch.uint8)
        td.recv(data, src, group=self.group)
        batch = pickle.loads(data.numpy().tobytes())  # noqa: S301 - sent by a rank of this launch
        if not isinstance(batch, Batch) or batch.index != index:
            got = batch.index if isinstance(batch, Batch) else type(batch).__name__
            raise RuntimeError(f"rollout rank {src} sent batch {got} where the trainers expected batch {index}")
        return batch
