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
finishes nor fails within `HANG_LIMIT_S` (a deadlock waits forever) has both ranks stopped and is reported as
hung. The ranks' runs draw their end-of-training plots without rendering them (tests/unrendered_plots.py).
"""
from __future__ import annotations

import socket
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

HANG_LIMIT_S = 600  # one job's limit; a deadlock would wait forever: stop the ranks and fail instead


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


def launch(out: Path, jobs: tuple[Job, ...]) -> TwoRankJobs:
    """Run `jobs` on two spawned processes, watching for a job that hangs; the results under `out`."""
    import torch.multiprocessing as mp

    if not jobs:
        return TwoRankJobs(out, jobs, None)
    started_at = time.time()
    context = mp.spawn(run_jobs, args=(2, free_port(), str(out), jobs), nprocs=2, join=False)
    failure = None
    try:
        while not context.join(timeout=2):
            markers = list(out.glob("*/.started_rank*")) + list(out.glob("*/.finished_rank*"))
            if time.time() - max((m.stat().st_mtime for m in markers), default=started_at) > HANG_LIMIT_S:
                current = max(markers, key=lambda m: m.stat().st_mtime).parent.name if markers else "(start)"
                for process in context.processes:
                    process.kill()
                failure = f"job {current!r} did not finish in {HANG_LIMIT_S} s (deadlock): both ranks were stopped"
                break
    except Exception as err:  # a job raised (its traceback is in its folder) or a rank died
        failure = f"the launch failed: {type(err).__name__}: {str(err)[-2000:]}"
    return TwoRankJobs(out, jobs, failure)

