"""Asynchronous sends still in flight, with the tensors they read kept alive until they complete."""
from __future__ import annotations

import torch


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
