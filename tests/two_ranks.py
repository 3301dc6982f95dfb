"""One launch of two gloo ranks for every two-rank check of a test session.

Spawning two processes costs each an import of torch, transformers and the package (~10 s of CPU, so ~10 s of
wall time on two cores) before any work. The test modules that need two ranks name their jobs in
`TWO_RANK_JOBS` (a job: a folder name, a worker function `fn(rank, world, port, out_dir)` that joins its own
gloo group with `join_gloo` and leaves it, and the world size it runs in: 2, or 1 on rank 0 alone); the
session fixture `two_rank_jobs` (tests/conftest.py) runs the jobs of every collected module that uses it, one
after another, in ONE pair of spawned processes, and each test reads its job's folder, or fails with that
job's error.

Every job joins a group of its own over one TCP store that rank 0 hosts for the whole launch (no port is
picked per job, so none can be taken in between). A job that raises records its traceback and ends the launch
(the other rank may be waiting in a collective); the jobs after it are reported as not run. A job that neither
finishes nor fails has both ranks stopped and is reported as hung when the ranks sit idle (a deadlock waits in a
collective, using no CPU: less than `IDLE_CPU_S` of CPU in `IDLE_WINDOW_S`), or when it has used `JOB_CPU_LIMIT_S`
of CPU (a livelock spins): the work is bounded, not the clock, so a slow or loaded machine only takes longer.
The ranks' runs draw their end-of-training plots without rendering them (tests/unrendered_plots.py).
"""
from __future__ import annotations

import socket
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

IDLE_WINDOW_S = 180  # a job is hung when its ranks used less than IDLE_CPU_S of CPU in this many seconds
IDLE_CPU_S = 1.0
JOB_CPU_LIMIT_S = 1800  # one job's CPU seconds, both ranks together (~60-140 here on a quiet machine)


@dataclass(frozen=True)
class Job:
    """`fn(rank, world, port, out_dir)` run by ranks 0..world-1 (world 1 or 2) with `out_dir` its own folder."""

    name: str
    fn: Callable[[int, int, int, str], None]
    world: int = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _marker(out: Path, job: str, what: str, rank: int) -> Path:
    return out / job / f".{what}_rank{rank}"


def run_jobs(rank: int, world: int, port: int, out_dir: str, jobs: tuple[Job, ...]) -> None:
    """One spawned rank: host (rank 0) or join the launch's store, then run every job in turn."""
    import torch.distributed as td

    import lmgym.training.plots
    from tests import distributed_worker
    from tests.unrendered_plots import drawn

    lmgym.training.plots.plot_metrics = drawn  # no test reads the ranks' plots (tests/unrendered_plots.py)

    out = Path(out_dir)
    store = td.TCPStore("127.0.0.1", port, world, rank == 0)  # rank 0 hosts it: it leaves last
    for job in jobs:
        folder = out / job.name
        folder.mkdir(parents=True, exist_ok=True)
        _marker(out, job.name, "started", rank).touch()
        if rank < job.world:
            distributed_worker.use_store(td.PrefixStore(f"{job.name}/", store))
            try:
                job.fn(rank, job.world, port, str(folder))
            except BaseException:
                (folder / f"error_rank{rank}.txt").write_text(traceback.format_exc())
                raise
        _marker(out, job.name, "finished", rank).touch()
    store.set(f"done{rank}", "1")
    store.wait(["done0", "done1"])
    store.set(f"left{rank}", "1")
    if rank == 0:
        store.wait(["left1"])


class TwoRankJobs:
    """The launch's results: `folder(name)` is a finished job's folder; a failed, hung or skipped job fails
    the test that asks for it, with the reason."""

    def __init__(self, out: Path, jobs: Iterable[Job], failure: str | None):
        self.out, self.names, self.failure = out, [j.name for j in jobs], failure

    def folder(self, name: str) -> Path:
        if name not in self.names:
            pytest.fail(f"two-rank job {name!r} was not launched (is its module's TWO_RANK_JOBS missing it?)")
        folder = self.out / name
        errors = sorted(folder.glob("error_rank*.txt"))
        if errors:
            pytest.fail(f"two-rank job {name!r} failed:\n" + "\n".join(e.read_text() for e in errors), pytrace=False)
        if not all(_marker(self.out, name, "finished", r).exists() for r in (0, 1)):
            pytest.fail(f"two-rank job {name!r} did not finish: {self.failure or 'the launch ended before it'}",
                        pytrace=False)
        return folder


def cpu_seconds(pids: Iterable[int]) -> float:
    """The CPU time (user and system) the processes `pids` have used so far; a process that is gone counts 0."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


class HangWatch:
    """Says when the job running now is hung, from samples of the ranks' CPU seconds: idle (less than `idle_cpu_s`
    of CPU over the last `idle_window_s` of wall time: a deadlock) or over `job_cpu_limit_s` of CPU (a livelock)."""

    def __init__(self, idle_window_s: float = IDLE_WINDOW_S, idle_cpu_s: float = IDLE_CPU_S,
                 job_cpu_limit_s: float = JOB_CPU_LIMIT_S):
        self.idle_window_s, self.idle_cpu_s, self.job_cpu_limit_s = idle_window_s, idle_cpu_s, job_cpu_limit_s
        self.job: str | None = None
        self.job_cpu_start = 0.0
        self.samples: list[tuple[float, float]] = []  # (wall seconds, CPU seconds) within the last window

    def hung(self, now: float, cpu: float, job: str) -> str | None:
        """Why `job` is hung at wall time `now` with the ranks' CPU seconds `cpu`, or None."""
        if job != self.job:  # a job started: its CPU and its idleness count from here
            self.job, self.job_cpu_start, self.samples = job, cpu, []
        self.samples = [s for s in self.samples if now - s[0] <= self.idle_window_s] + [(now, cpu)]
        first_time, first_cpu = self.samples[0]
        if now - first_time >= 0.95 * self.idle_window_s and cpu - first_cpu < self.idle_cpu_s:
            return f"its ranks used no CPU for {self.idle_window_s:.0f} s (deadlock)"
        if cpu - self.job_cpu_start > self.job_cpu_limit_s:
            return f"it used over {self.job_cpu_limit_s:.0f} CPU s"
        return None


def launch(out: Path, jobs: tuple[Job, ...]) -> TwoRankJobs:
    """Run `jobs` on two spawned processes, watching for a job that hangs (`HangWatch`); the results under `out`."""
    import torch.multiprocessing as mp

    if not jobs:
        return TwoRankJobs(out, jobs, None)
    context = mp.spawn(run_jobs, args=(2, free_port(), str(out), jobs), nprocs=2, join=False)
    pids, watch, failure = [process.pid for process in context.processes], HangWatch(), None
    try:
        while not context.join(timeout=2):
            started = sorted(out.glob("*/.started_rank*"), key=lambda m: m.stat().st_mtime)
            job = started[-1].parent.name if started else "(start)"
            why = watch.hung(time.monotonic(), cpu_seconds(pids), job)
            if why:
                for process in context.processes:
                    process.kill()
                failure = f"job {job!r} did not finish: {why}; both ranks were stopped"
                break
    except Exception as err:  # a job raised (its traceback is in its folder) or a rank died
        failure = f"the launch failed: {type(err).__name__}: {str(err)[-2000:]}"
    return TwoRankJobs(out, jobs, failure)
