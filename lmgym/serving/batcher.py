"""The request queue: concurrent requests collected for a few milliseconds and run as one batched engine call.

`Batcher.submit(key, payload, rows, deadline)` queues a `Job` (its `future` gets the result). One worker
thread takes the first waiting job, keeps collecting for `BatchSettings.window_ms` (or until `max_batch_rows`
sequences are waiting), groups the jobs by `key` (jobs that can share one sampling call: the same temperature
and top_p, or the same search method and budget), and hands each group to `run(key, payloads, ended)` in
chunks of at most `max_batch_rows` rows. `run` returns one result per payload, in order; an exception fails
every job of that call. `ended()` says, for each payload, whether nobody waits for it any more (cancelled, or
past its deadline): the engine asks it at every decoding step and stops those rows. Jobs that arrive while a
call runs wait for the next one, as in the serving stacks (vLLM, TGI) that batch the same way.

The queue is bounded (`max_queue`: `submit` raises `QueueFull`, the server's 503). `Batcher.cancel(job)` (a
timed-out request, a client gone) takes a waiting job out of the queue at once, freeing its place, and marks a
running one so its rows stop at the engine's next step; a job whose deadline passed while it waited is failed
with `ComputeTimeout` without computing. `lock`, when given, is held around every call (the server's other
routes share the model).

Why not a library: the queue is what vLLM and TGI build into their engines; none ships on its own over a
plain `policy.sample`, and this one is about a hundred lines of the standard library's deque, condition and
futures.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from lmgym.core.checked_config import CheckedConfig, setting
from lmgym.serving.limits import ComputeTimeout, Deadline


@dataclass
class BatchSettings(CheckedConfig):
    """How the queues collect requests: the continuous engine (serving/stream_engine.py) and the round-based
    queue here. A bad value is a one-line ConfigError naming the field."""

    window_ms: float = setting(5.0, "milliseconds the round-based queue (search requests) keeps collecting after "
                                    "the first waiting request")
    max_queue: int = setting(256, "requests waiting at most; one more is refused with 503")
    max_batch_rows: int = setting(64, "sequences (prompts x n) decoded together at most: the continuous engine's "
                                      "batch, a round's engine call")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("window_ms", self.window_ms >= 0, ">= 0")
        self.require("max_queue", self.max_queue >= 1, ">= 1")
        self.require("max_batch_rows", self.max_batch_rows >= 1, ">= 1")


class QueueFull(Exception):
    """The queue holds `max_queue` requests already."""


Ended = Callable[[], list[bool]]  # per payload of a call: whether nobody waits for it any more
Run = Callable[[Hashable, list[Any], Ended], list[Any]]


@dataclass(eq=False)  # a job is itself: the queue finds it by identity
class Job:
    """One request waiting for the engine: `rows` sequences, grouped with others of the same `key`."""

    key: Hashable
    payload: Any
    rows: int
    deadline: Deadline
    future: Future = field(default_factory=Future)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def ended(self) -> bool:
        """Whether nobody waits for this job's result any more: cancelled, or past its deadline."""
        return self.cancelled.is_set() or self.deadline.left() <= 0


class Batcher:
    """A bounded queue and the worker thread that runs its jobs in batches through `run(key, payloads, ended)`."""

    def __init__(self, run: Run, settings: BatchSettings | None = None, lock: threading.Lock | None = None):
        self.settings = settings if settings is not None else BatchSettings()
        if not isinstance(self.settings, BatchSettings):
            raise TypeError(f"Batcher: settings must be a BatchSettings, got {type(self.settings).__name__}")
        self._run, self._lock = run, lock if lock is not None else threading.Lock()
        self._waiting: deque[Job] = deque()
        self._changed = threading.Condition()
        self._start = threading.Lock()
        self._worker: threading.Thread | None = None
        self.calls = 0  # engine calls run so far (batches)

    def submit(self, key: Hashable, payload: Any, rows: int, deadline: Deadline) -> Job:
        """Queue one job; its future gets `run`'s result for `payload`. QueueFull when the queue is full."""
        job = Job(key, payload, rows, deadline)
        with self._changed:
            if len(self._waiting) >= self.settings.max_queue:
                raise QueueFull(f"the server's queue holds {self.settings.max_queue} requests already (max_queue); "
                                f"try again shortly")
            self._waiting.append(job)
            self._changed.notify()
        self._ensure_worker()
        return job

    def cancel(self, job: Job) -> None:
        """Nobody waits for `job` any more: out of the queue now if it waits there, else its rows stop at the
        engine's next step (its future is cancelled where it has not started)."""
        with self._changed:
            job.cancelled.set()
            if job in self._waiting:
                self._waiting.remove(job)
        job.future.cancel()

    def waiting(self) -> int:
        """Jobs queued and not yet taken by the worker."""
        with self._changed:
            return len(self._waiting)

    def _ensure_worker(self) -> None:
        with self._start:
            if self._worker is None:
                self._worker = threading.Thread(target=self._serve, name="serving-batcher", daemon=True)
                self._worker.start()

    def _serve(self) -> None:
        while True:
            jobs = self._collect()
            groups: dict[Hashable, list[Job]] = {}
            for job in jobs:
                groups.setdefault(job.key, []).append(job)
            for key, group in groups.items():
                for chunk in self._chunks(group):
                    self._call(key, chunk)

    def _next(self, until: float | None) -> Job | None:
        """The next waiting job; waits for one until `until` (time.monotonic; None: for ever)."""
        with self._changed:
            while not self._waiting:
                left = None if until is None else until - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._changed.wait(left)
            return self._waiting.popleft()

    def _collect(self) -> list[Job]:
        """The first waiting job (blocking) and whatever else arrives within the window."""
        jobs = [self._next(None)]
        rows = jobs[0].rows
        until = time.monotonic() + self.settings.window_ms / 1000
        while rows < self.settings.max_batch_rows:
            job = self._next(until)
            if job is None:
                break
            jobs.append(job)
            rows += job.rows
        return jobs

    def _chunks(self, group: list[Job]) -> list[list[Job]]:
        """`group` cut into runs of at most max_batch_rows rows (a job larger than that runs alone)."""
        chunks, current, rows = [], [], 0
        for job in group:
            if current and rows + job.rows > self.settings.max_batch_rows:
                chunks.append(current)
                current, rows = [], 0
            current.append(job)
            rows += job.rows
        return chunks + [current] if current else chunks

    def _call(self, key: Hashable, jobs: list[Job]) -> None:
        live = []
        for job in jobs:
            if job.cancelled.is_set() or not job.future.set_running_or_notify_cancel():
                continue  # cancelled: nobody waits for it
            if job.deadline.left() <= 0:
                job.future.set_exception(ComputeTimeout(
                    f"the request waited in the queue past this server's timeout of {job.deadline.seconds:g} s "
                    f"(timeout_seconds); try again"))
                continue
            live.append(job)
        if not live:
            return
        try:
            with self._lock:
                self.calls += 1
                results = list(self._run(key, [job.payload for job in live], lambda: [job.ended() for job in live]))
            if len(results) != len(live):
                raise RuntimeError(f"the batch runner gave {len(results)} results for {len(live)} requests")
        except BaseException as error:  # noqa: BLE001 - the error belongs to the requests, not the worker
            for job in live:
                job.future.set_exception(error)
            return
        for job, result in zip(live, results):
            job.future.set_result(result)
