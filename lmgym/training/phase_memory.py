"""Peak CUDA memory of each phase of a training iteration, logged with its metrics.

`memory_peak_gb_<phase>` is the most memory torch's caching allocator had allocated at any moment inside
the phase (`torch.cuda.max_memory_allocated`, weights and optimizer state included), and
`memory_reserved_peak_gb_<phase>` the most it held from the driver (`max_memory_reserved`, closer to what
nvidia-smi shows of this process); `memory_peak_gb` and `memory_reserved_peak_gb` are the same over the
whole iteration, and `memory_peak_gb_evaluate` over an evaluation (measured on its own, outside the
iteration). GB is 10^9 bytes, as benchmarks/ report peak memory. A phase entered several times in an
iteration (one optimizer step per minibatch) reports its highest peak. Phases nest, each inside the
iteration: torch's peak counters are reset at each phase's start, after what they held was credited to
every phase open then, so each phase and the iteration see their true peaks.

Only on a CUDA device, and only inside `iteration()` or a `top` phase (the trainer's loop): elsewhere,
e.g. a benchmark that calls `train_iteration()` itself around its own reading of torch's peak, nothing
is reset. On a CPU nothing is measured and no `memory_` key is logged. Each process measures its own
GPU (the run folder holds rank 0's).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import torch

GB = 1e9
ITERATION = ""  # the phase name under which the whole iteration's peak is kept


class PhaseMemory:
    """Peak allocated and reserved CUDA memory per phase of the current iteration (see the module doc)."""

    def __init__(self, device: torch.device | str) -> None:
        self.device = device = torch.device(device)
        self.enabled = device.type == "cuda"
        self._open: list[list[int]] = []           # [allocated, reserved] peak bytes of each open phase
        self._peaks: dict[str, tuple[int, int]] = {}  # closed phases, until `metrics()` reads them

    def iteration(self) -> AbstractContextManager[None]:
        """One iteration: it and the phases inside are measured; `metrics()` reads them after it ends."""
        return self.phase(ITERATION, top=True)

    @contextmanager
    def phase(self, name: str, top: bool = False) -> Iterator[None]:
        """Measure the block as phase `name`: a no-op off CUDA, and outside `iteration()` unless `top`."""
        if not self.enabled or not (top or self._open):
            yield
            return
        self._credit()
        torch.cuda.reset_peak_memory_stats(self.device)
        peak = [0, 0]
        self._open.append(peak)
        try:
            yield
        finally:
            self._credit()
            self._open.pop()
            before = self._peaks.get(name, (0, 0))
            self._peaks[name] = (max(before[0], peak[0]), max(before[1], peak[1]))

    def _credit(self) -> None:
        """The peaks since the last reset count in every phase open now."""
        allocated = torch.cuda.max_memory_allocated(self.device)
        reserved = torch.cuda.max_memory_reserved(self.device)
        for peak in self._open:
            peak[0], peak[1] = max(peak[0], allocated), max(peak[1], reserved)

    def metrics(self) -> dict[str, float]:
        """The peaks measured since the last call, in GB, keyed as in the module doc; {} when none was."""
        out = {}
        for name, (allocated, reserved) in self._peaks.items():
            suffix = f"_{name}" if name != ITERATION else ""
            out[f"memory_peak_gb{suffix}"] = allocated / GB
            out[f"memory_reserved_peak_gb{suffix}"] = reserved / GB
        self._peaks = {}
        return out
