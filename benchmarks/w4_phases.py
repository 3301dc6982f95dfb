"""Where the wall time of a W4 workload goes (benchmarks/w4_multistep.py), in two views.

Phases: prefill, decode, stop_strings, sample_host (the sampler's own host work outside those three),
env (environment steps and tool calls, retrieval included), tokenize, train (the trainer's reference pass
and update), host (everything else). The library marks them with `torch.profiler.record_function` ranges:
lmgym.prefill, lmgym.decode, lmgym.stop_strings (the fast decoder), lmgym.extend (continuous play's pass over
an env turn's tokens: prefill), lmgym.sample, lmgym.env, lmgym.tokenize (the episode engine); the benchmark adds
w4.train and w4.chunk. Ranges nest: an instant belongs to the
innermost one; a range of another name (one added later, e.g. lmgym.retrieval inside lmgym.env) takes the
phase of the range around it.

- Host clock (`RangeClock`, no profiler: the whole measured run): `record_function` is wrapped so each range
  also adds its self time (its time less its children's) to its phase, on the main thread. It sees where the
  host was, so time the host spends waiting for the GPU lands in the range that waits (a stop-string check
  reading tokens back, the sampler's host sync).
- Profiled (`profile_chunk`, torch.profiler over one chunk): an instant when some CUDA kernel runs belongs to
  the phase that launched that kernel (the innermost range around its launch; kernels launched by the sampler
  outside its named ranges are decode); an instant when none runs belongs to the host's innermost range. So
  the GPU-busy share (the union of kernel intervals over the chunk's wall time) splits by phase, and the rest,
  the GPU idle, splits by what the host was doing.
"""
from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

PHASES = ("prefill", "decode", "stop_strings", "sample_host", "env", "tokenize", "train", "host")
HOST = PHASES.index("host")
RANGE_PHASES = {"lmgym.prefill": "prefill", "lmgym.extend": "prefill", "lmgym.decode": "decode",
                "lmgym.stop_strings": "stop_strings",
                "lmgym.sample": "sample_host", "lmgym.env": "env", "lmgym.tokenize": "tokenize",
                "lmgym.update": "train", "w4.train": "train", "w4.chunk": "host"}
TRACKED_PREFIXES = ("lmgym.", "w4.")
CHUNK_RANGE = "w4.chunk"


def phase_of(name: str, parent: int) -> int:
    """The phase index of a range named `name` inside a range of phase `parent`."""
    phase = RANGE_PHASES.get(name)
    return PHASES.index(phase) if phase is not None else parent


def shares(seconds: dict[str, float], wall: float) -> dict[str, float]:
    """Each phase's seconds over `wall` (0.0 for an empty wall)."""
    return {p: (seconds.get(p, 0.0) / wall if wall > 0 else 0.0) for p in PHASES}


# ---------------------------------------------------------------------------------------------- host clock
class RangeClock:
    """Self time of the named ranges per phase, on the main thread (see the module docstring)."""

    def __init__(self) -> None:
        self.seconds = [0.0] * len(PHASES)
        self._stack: list[list[Any]] = []  # [phase, start, children's seconds]
        self._main = threading.main_thread()

    def enter(self, name: str) -> None:
        if threading.current_thread() is not self._main:
            return
        parent = self._stack[-1][0] if self._stack else HOST
        self._stack.append([phase_of(name, parent), time.perf_counter(), 0.0])

    def exit(self) -> None:
        if threading.current_thread() is not self._main or not self._stack:
            return
        phase, start, children = self._stack.pop()
        spent = time.perf_counter() - start
        self.seconds[phase] += spent - children
        if self._stack:
            self._stack[-1][2] += spent

    def snapshot(self) -> list[float]:
        return list(self.seconds)

    @staticmethod
    def split(before: list[float], after: list[float], wall: float) -> dict[str, float]:
        """Seconds per phase between two snapshots over `wall` seconds; host takes what no range held."""
        spent = {p: after[i] - before[i] for i, p in enumerate(PHASES) if p != "host"}
        spent["host"] = max(wall - sum(spent.values()), 0.0)
        return spent


_REAL_RECORD_FUNCTION = torch.autograd.profiler.record_function


def install_clock(clock: RangeClock) -> None:
    """Make every `record_function` (torch's names and the ones lmgym modules imported) also feed `clock`;
    a second call re-scans the modules loaded since."""
    real = _REAL_RECORD_FUNCTION

    if getattr(torch.profiler.record_function, "_w4_clock", None) is not clock:
        class timed_record_function(real):  # noqa: N801 - stands in for torch's class of that name
            _w4_clock = clock

            def __enter__(self):
                clock.enter(self.name)
                return super().__enter__()

            def __exit__(self, *exc):
                try:
                    return super().__exit__(*exc)
                finally:
                    clock.exit()

        torch.profiler.record_function = timed_record_function
        torch.autograd.profiler.record_function = timed_record_function
    timed = torch.profiler.record_function
    for name, module in list(sys.modules.items()):
        if (name.startswith("lmgym") or name.startswith("w4_")) and getattr(module, "record_function", None) is real:
            module.record_function = timed


def named_range(name: str):
    """A `record_function` range (the clock's, once installed)."""
    return torch.profiler.record_function(name)


# ---------------------------------------------------------------------------------------------- the collector
class GcPauses:
    """Seconds Python's garbage collector paused the process, and its collections per generation, while
    installed (`with`): a full collection walks every object the set-up made (about 0.3 s for the RAG agent's
    on a CPU core), so a chunk slower than its neighbours is checked against it."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full_seconds = 0.0
        self.collections = [0, 0, 0]
        # each full collection: its seconds, the objects frozen when it began (the interpreter's own only, 375 on
        # Python 3.12.1 and 0 on 3.11: it walked the whole heap; the labelling freezes the heap before it,
        # policy_labels.frozen_heap) and what it collected
        self.full: list[dict] = []
        self._started = 0.0
        self._frozen = 0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._frozen = gc.get_freeze_count() if info["generation"] == 2 else 0
            self._started = time.perf_counter()
            return
        spent = time.perf_counter() - self._started
        self.seconds += spent
        self.collections[info["generation"]] += 1
        if info["generation"] == 2:
            self.full_seconds += spent
            self.full.append({"seconds": round(spent, 4), "frozen": self._frozen, "collected": info["collected"]})

    def snapshot(self) -> dict:
        """What was counted so far: {"seconds", "full_seconds", "collections": [gen0, gen1, gen2], "full": the full
        collections' records}."""
        return {"seconds": self.seconds, "full_seconds": self.full_seconds, "collections": list(self.collections),
                "full": list(self.full)}

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self._callback)


# ---------------------------------------------------------------------------------------------- the profiler
def profile_chunk(run: Callable[[], Any], device: torch.device) -> tuple[Any, dict]:
    """`run()` under torch.profiler (CPU, and CUDA on a GPU) inside a w4.chunk range; (its result, the
    profiled split: `split_wall` of the chunk's events)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    synchronize(device)
    with profile(activities=activities, record_shapes=False, with_stack=False, profile_memory=False) as prof:
        with named_range(CHUNK_RANGE):
            result = run()
            synchronize(device)
    clock = time.perf_counter()
    events = trace_events(prof)
    report = split_wall(*events)
    report["host_ops"] = host_ops_by_phase(prof, events[0], events[2])
    report["kernels_by_phase"] = kernels_by_phase(prof, events[0], events[2])
    report["analysis_s"] = time.perf_counter() - clock
    report["gpu_traced"] = device.type == "cuda"
    if not report["gpu_traced"]:  # no kernels to see: the split is the host's alone
        report["gpu_busy_share"] = None
    return result, report


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def activity(ev, annotations: frozenset[str] = frozenset()) -> str:
    """A raw Kineto event's kind: "kernel", "user_annotation", "gpu_user_annotation", "cpu_op", "cuda_runtime", ...
    Torch releases without `activity_type` (2.11 has none) are read from the device type, the annotation flag and
    the name; there every GPU event (copies and fills too) counts as a kernel, except one named like a host-side
    range (`annotations`): that is the range's mirror on the GPU lane (spanning its kernels), not a kernel."""
    if hasattr(ev, "activity_type"):
        kind = ev.activity_type()
        return kind if isinstance(kind, str) else str(kind)
    if "CUDA" in str(ev.device_type()):
        return "gpu_user_annotation" if ev.name() in annotations else "kernel"
    if ev.is_user_annotation():
        return "user_annotation"
    return "cuda_runtime" if ev.name().startswith(("cuda", "cu")) else "cpu_op"


def classified(prof) -> list[tuple[Any, str]]:
    """A finished profile's raw Kineto events, each with its kind (`activity`), classified once a profile (the
    three readings below share it: the chunk's events run to hundreds of thousands)."""
    cached = getattr(prof, "_w4_classified", None)
    if cached is not None:
        return cached
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if results is None:
        raise RuntimeError("this torch's profiler keeps no kineto_results: cannot read its raw events")
    events = results.events()
    annotations = frozenset(ev.name() for ev in events if activity(ev) == "user_annotation")
    prof._w4_classified = [(ev, activity(ev, annotations)) for ev in events]
    return prof._w4_classified


def trace_events(prof) -> tuple[list, list, int]:
    """(ranges, kernels, main thread) from a finished profile's raw Kineto events.

    ranges: (start_ns, end_ns, thread, name) of the tracked ranges; kernels: (start_ns, end_ns, launch_ns,
    launch thread or -1) of every CUDA kernel, the launch found through the CPU op or range it is linked to,
    else through the runtime call of the same correlation id (-1, -1 when neither is found)."""
    ranges, kernels, cpu_by_id, runtime_by_id = [], [], {}, {}
    for ev, kind in classified(prof):
        if kind == "kernel":
            kernels.append((ev.start_ns(), ev.end_ns(), ev.correlation_id(), ev.linked_correlation_id()))
        elif kind in ("cpu_op", "user_annotation"):
            cpu_by_id[ev.correlation_id()] = (ev.start_ns(), ev.start_thread_id())
            name = ev.name()
            if kind == "user_annotation" and name.startswith(TRACKED_PREFIXES):
                ranges.append((ev.start_ns(), ev.end_ns(), ev.start_thread_id(), name))
        elif kind in ("cuda_runtime", "cuda_driver"):
            runtime_by_id[ev.correlation_id()] = ev.start_ns()
    main = next((r[2] for r in ranges if r[3] == CHUNK_RANGE), None)
    if main is None:
        raise RuntimeError(f"the profile has no {CHUNK_RANGE} range")
    launched = []
    for start, end, corr, linked in kernels:
        if linked in cpu_by_id:
            launch, thread = cpu_by_id[linked]
        elif corr in runtime_by_id:
            launch, thread = runtime_by_id[corr], -1
        else:
            launch, thread = -1, -1
        launched.append((start, end, launch, thread))
    return ranges, launched, main


SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
              "cudaMemcpyAsync")
LAUNCH_CALLS = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaGraphLaunch")


def host_ops_by_phase(prof, ranges: list, main: int, top: int = 12) -> dict:
    """What the host did in each phase of the profiled chunk (the main thread's phase at the time, so CUDA's
    autograd thread's backward counts in train): CPU ops' and CUDA runtime calls' counts and total seconds (ops
    nest, so totals overlap), the `top` names by total time, and the launch and sync calls (count, seconds)
    apart: a phase whose GPU idles while the host launches many small kernels is launch-bound; one that idles in
    sync calls waits for the GPU."""
    segments = flatten([(s, e, n) for s, e, t, n in ranges if t == main])
    rows: list[tuple[int, int, str, str]] = []  # (start, duration, name, kind)
    for ev, kind in classified(prof):
        if kind in ("cpu_op", "cuda_runtime", "cuda_driver"):
            rows.append((ev.start_ns(), ev.end_ns() - ev.start_ns(), ev.name(), kind))
    if not rows:
        return {}
    phases = labels_at(segments, np.array([r[0] for r in rows], dtype=np.int64))
    out: dict[str, dict] = {}
    for (_, duration, name, _kind), phase in zip(rows, phases.tolist()):
        entry = out.setdefault(PHASES[phase] if phase >= 0 else "host", {"ops": {}, "launches": [0, 0.0],
                                                                          "syncs": [0, 0.0]})
        count_s = entry["ops"].setdefault(name, [0, 0.0])
        count_s[0] += 1
        count_s[1] += duration / 1e9
        for calls, key in ((LAUNCH_CALLS, "launches"), (SYNC_CALLS, "syncs")):
            if name in calls:
                entry[key][0] += 1
                entry[key][1] += duration / 1e9
    for entry in out.values():
        ranked = sorted(entry["ops"].items(), key=lambda item: -item[1][1])
        entry["ops_total"] = sum(c for c, _ in entry["ops"].values())
        entry["ops"] = {name: [c, round(s, 6)] for name, (c, s) in ranked[:top]}
    return out


def kernels_by_phase(prof, ranges: list, main: int, top: int = 10) -> dict:
    """The GPU's time in each phase of the profiled chunk by kernel name: per phase (of the main thread's range
    when the kernel was launched; "unlinked" when its launch is not found) the kernels' count and seconds, and
    the `top` names by seconds ([count, seconds] each): what a GPU-bound phase spends its time on."""
    segments = flatten([(s, e, n) for s, e, t, n in ranges if t == main])
    events = classified(prof)
    launch_at = {ev.correlation_id(): ev.start_ns() for ev, kind in events
                 if kind in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")}
    kernels = [(ev.name(), ev.end_ns() - ev.start_ns(), launch_at.get(ev.linked_correlation_id(),
                                                                       launch_at.get(ev.correlation_id(), -1)))
               for ev, kind in events if kind == "kernel"]
    if not kernels:
        return {}
    phases = labels_at(segments, np.array([k[2] for k in kernels], dtype=np.int64)).tolist()
    out: dict[str, dict] = {}
    for (name, duration, launch), phase in zip(kernels, phases):
        label = "unlinked" if launch < 0 else (PHASES[phase] if phase >= 0 else "host")
        entry = out.setdefault(label, {"kernels": 0, "seconds": 0.0, "top": {}})
        entry["kernels"] += 1
        entry["seconds"] += duration / 1e9
        count_s = entry["top"].setdefault(name, [0, 0.0])
        count_s[0] += 1
        count_s[1] += duration / 1e9
    for entry in out.values():
        ranked = sorted(entry["top"].items(), key=lambda item: -item[1][1])[:top]
        entry["top"] = {name[:160]: [c, round(s, 6)] for name, (c, s) in ranked}
    return out


def flatten(ranges: list[tuple[int, int, str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One thread's nested ranges (start, end, name) as non-overlapping segments (starts, ends, phase of the
    innermost range); time outside every range has no segment."""
    ordered = sorted(ranges, key=lambda r: (r[0], -r[1]))
    segments: list[tuple[int, int, int]] = []
    stack: list[tuple[int, int]] = []  # (end, phase)
    cursor = 0

    def close_until(t: int) -> None:
        nonlocal cursor
        while stack and stack[-1][0] <= t:
            end, phase = stack.pop()
            if end > cursor:
                segments.append((cursor, end, phase))
            cursor = max(cursor, end)

    for start, end, name in ordered:
        close_until(start)
        if stack and start > cursor:
            segments.append((cursor, start, stack[-1][1]))
        parent = stack[-1][1] if stack else HOST
        end = min(end, stack[-1][0]) if stack else end  # a range that outlives its parent is cut there
        stack.append((end, phase_of(name, parent)))
        cursor = max(cursor, start)
    close_until(np.iinfo(np.int64).max)
    array = np.array(segments, dtype=np.int64).reshape(-1, 3)
    return array[:, 0], array[:, 1], array[:, 2]


def labels_at(segments: tuple[np.ndarray, np.ndarray, np.ndarray], times: np.ndarray) -> np.ndarray:
    """The phase of the segment holding each time (-1: none)."""
    starts, ends, phases = segments
    if len(starts) == 0:
        return np.full(len(times), -1, dtype=np.int64)
    index = np.searchsorted(starts, times, side="right") - 1
    safe = np.clip(index, 0, len(starts) - 1)
    inside = (index >= 0) & (times < ends[safe])
    return np.where(inside, phases[safe], -1)


def split_wall(ranges: list, kernels: list, main: int) -> dict:
    """The profiled split of the chunk (the module docstring): `ranges` (start, end, thread, name),
    `kernels` (start, end, launch time, launch thread), times in ns; `main` the chunk range's thread."""
    chunk = [r for r in ranges if r[3] == CHUNK_RANGE and r[2] == main]
    t0, t1 = chunk[0][0], chunk[0][1]
    by_thread: dict[int, list] = {}
    for start, end, thread, name in ranges:
        by_thread.setdefault(thread, []).append((start, end, name))
    segments = {thread: flatten(items) for thread, items in by_thread.items()}
    main_segments = segments[main]
    kernel_phase = np.full(len(kernels), -1, dtype=np.int64)
    kernel_array = np.array(kernels, dtype=np.int64).reshape(-1, 4)
    linked = kernel_array[:, 2] >= 0
    for thread in set(kernel_array[linked, 3].tolist()):
        rows = linked & (kernel_array[:, 3] == thread)
        own = labels_at(segments[thread], kernel_array[rows, 2]) if thread in segments else None
        on_main = labels_at(main_segments, kernel_array[rows, 2])
        kernel_phase[rows] = np.where(own >= 0, own, on_main) if own is not None else on_main
    kernel_phase[linked & (kernel_phase < 0)] = HOST
    kernel_phase[kernel_phase == PHASES.index("sample_host")] = PHASES.index("decode")  # the sampler's kernels
    kernel_phase[~linked] = len(PHASES)  # "unlinked"
    gpu = _busy_segments(kernel_array[:, 0], kernel_array[:, 1], kernel_phase, t0, t1)
    points = [np.array([t0, t1], dtype=np.int64), gpu[0], gpu[1]]
    for seg in segments.values():
        points += [seg[0], seg[1]]
    edges = np.unique(np.clip(np.concatenate(points), t0, t1))
    mids, widths = (edges[:-1] + edges[1:]) // 2, np.diff(edges).astype(np.float64) / 1e9
    gpu_label = labels_at(gpu, mids)
    host_label = labels_at(main_segments, mids)
    host_label[host_label < 0] = HOST
    for thread, seg in segments.items():  # the main thread idle or in its own bookkeeping: another thread's phase
        if thread != main:
            other = labels_at(seg, mids)
            take = (host_label == HOST) & (other >= 0) & (other != HOST)
            host_label[take] = other[take]
    busy = gpu_label >= 0
    wall = (t1 - t0) / 1e9
    names = (*PHASES, "unlinked")
    gpu_s = np.bincount(gpu_label[busy], weights=widths[busy], minlength=len(names))
    idle_s = np.bincount(host_label[~busy], weights=widths[~busy], minlength=len(names))
    total = gpu_s + idle_s
    total[HOST] += total[len(PHASES)]  # kernels whose launch was not found: host
    return {"wall_s": wall, "gpu_busy_share": float(widths[busy].sum() / wall) if wall > 0 else 0.0,
            "phases": {p: float(total[i] / wall) if wall > 0 else 0.0 for i, p in enumerate(PHASES)},
            "phases_s": {p: float(total[i]) for i, p in enumerate(PHASES)},
            "gpu_busy_by_phase": {n: float(gpu_s[i] / wall) for i, n in enumerate(names) if gpu_s[i] > 0},
            "gpu_idle_by_phase": {p: float(idle_s[i] / wall) for i, p in enumerate(PHASES) if idle_s[i] > 0},
            "kernels": len(kernels), "kernels_linked_share": float(linked.mean()) if len(kernels) else None,
            "ranges": len(ranges)}


def _busy_segments(starts: np.ndarray, ends: np.ndarray, phases: np.ndarray, t0: int, t1: int):
    """Kernel intervals inside [t0, t1] as non-overlapping segments (a kernel overlapping earlier ones keeps
    only its part after them), each with its kernel's phase."""
    keep = (ends > t0) & (starts < t1)
    order = np.argsort(starts[keep], kind="stable")
    s, e, p = starts[keep][order], ends[keep][order], phases[keep][order]
    if len(s) == 0:
        return s, e, p
    before = np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(e)[:-1]])
    s = np.maximum(s, before)
    valid = e > s
    return s[valid], e[valid], p[valid]


# ---------------------------------------------------------------------------------------------- NVML
class NvmlBusy:
    """The GPU's own utilisation counter (NVML: the share of time some kernel ran), polled every `every`
    seconds from a thread while started; no profiler, so it can watch a whole measured run. None where NVML
    or the device cannot be read."""

    class _Utilization(ctypes.Structure):
        _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

    def __init__(self, device: torch.device, every: float = 0.05):
        self.every, self.samples, self._handle, self._lib = every, [], None, None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if device.type != "cuda":
            return
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            handle = ctypes.c_void_p()
            props = torch.cuda.get_device_properties(device)
            bus = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0".encode()
            if lib.nvmlDeviceGetHandleByPciBusId_v2(ctypes.c_char_p(bus), ctypes.byref(handle)) != 0:
                return
            self._lib, self._handle = lib, handle
        except (OSError, AttributeError):
            return

    def _poll(self) -> None:
        util = self._Utilization()
        while not self._stop.is_set():
            if self._lib.nvmlDeviceGetUtilizationRates(self._handle, ctypes.byref(util)) == 0:
                self.samples.append(util.gpu)
            self._stop.wait(self.every)

    def __enter__(self) -> NvmlBusy:
        self.samples = []
        if self._handle is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    @property
    def share(self) -> float | None:
        return sum(self.samples) / len(self.samples) / 100 if self.samples else None


def cupti_settings() -> None:
    """Profiling several chunks of a process that replays CUDA graphs: keep CUPTI set up between sessions
    (torch does the same when it knows of graphs)."""
    os.environ.setdefault("TEARDOWN_CUPTI", "0")
