"""Python's garbage collector during training: the set-up's objects out of its way, and its pauses counted.

A full (generation-2) collection walks every tracked object in the process. After set-up that is the model's
Python side, the tokenizer, the data set and a retrieval store's records: hundreds of thousands of objects that
live for the whole run, walked again at every full collection an iteration's own garbage triggers (about 0.3 s a
walk for the RAG agent's set-up on a CPU core). `frozen_setup` moves what is alive when training starts into the
permanent generation (`gc.freeze`, as serving engines such as SGLang do after their warm-up), so collections walk
only what the iterations themselves made; what it froze is unfrozen when training ends. `GcPauses` measures the
collector's pauses (for benchmarks).
"""
from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def frozen_setup() -> Iterator[None]:
    """Collect once, freeze everything alive into the permanent generation, unfreeze on exit. Re-entrant: an inner
    use (a trainer inside a trainer's callback) leaves the outer freeze in place."""
    if gc.get_freeze_count() > 0:  # frozen already (an outer use, or the caller's own): not ours to undo
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class GcPauses:
    """Seconds the collector paused this process, and how many full collections, while installed (`with`)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self.full_seconds = 0.0
        self._started = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        spent = time.perf_counter() - self._started
        self.seconds += spent
        self.collections[info["generation"]] += 1
        if info["generation"] == 2:
            self.full_seconds += spent

    def snapshot(self) -> dict:
        """What was counted so far: {"seconds", "full_seconds", "collections": [gen0, gen1, gen2]}."""
        return {"seconds": self.seconds, "full_seconds": self.full_seconds, "collections": list(self.collections)}

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self._callback)
