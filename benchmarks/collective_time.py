"""Time a rank spends in collectives during one profiled step (issue 38: "the time in collectives").

`profiled_collectives(step)` runs `step()` under torch.profiler and returns the wall seconds of the step and the
seconds covered by collective work, counted as the union of the intervals of matching events (nested and
overlapping events count once):
- on CUDA, NCCL's kernels (names holding "nccl"): the time the GPU spends in communication, overlapped with
  compute or not;
- on the CPU (gloo), the host-side collective ops (names starting "gloo:", "nccl:" or "c10d::"), which block the
  calling thread.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import torch

HOST_PREFIXES = ("gloo:", "nccl:", "c10d::")


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """Seconds covered by the union of (start_us, end_us) intervals."""
    covered, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        covered += stop - max(start, end)
        end = stop
    return covered / 1e6


def collective_intervals(events, on_gpu: bool) -> list[tuple[float, float]]:
    """(start_us, end_us) of each collective event of a profile's `events()`."""
    out = []
    for e in events:
        name = e.name.lower()
        device_side = e.device_type == torch.autograd.DeviceType.CUDA
        if (on_gpu and device_side and "nccl" in name) or (
                not on_gpu and not device_side and name.startswith(HOST_PREFIXES)):
            start = e.time_range.start
            out.append((start, start + max(e.time_range.elapsed_us(), 0)))
    return out


def profiled_collectives(step: Callable[[], object]) -> dict:
    """{"step_s", "collective_s", "collective_share"} of one call of `step` under the profiler."""
    on_gpu = torch.cuda.is_available()
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if on_gpu else [])
    with torch.profiler.profile(activities=activities) as prof:
        started = time.perf_counter()
        step()
        if on_gpu:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
    collective = union_seconds(collective_intervals(prof.events(), on_gpu))
    return {"step_s": seconds, "collective_s": collective, "collective_share": collective / seconds if seconds else 0.0}
