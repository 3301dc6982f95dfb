"""One warm worker process whose every request is bounded in CPU time, not wall-clock time.

The parent forks the worker lazily (``os.fork`` + a pipe) and reuses it.  Before serving, the worker
runs ``preload`` (heavy imports, parser warm-up), so no request's budget is spent importing.  Per
request the worker bounds its own CPU time three ways:

* ``setitimer(ITIMER_PROF, budget)``: the SIGPROF handler raises :class:`CpuBudgetExceeded` (a
  ``BaseException``, so library ``except Exception`` clauses do not swallow it; re-raised every
  10 ms until the request ends);
* ``RLIMIT_CPU`` soft limit at used + budget + ``RLIMIT_SLACK_S``: SIGXCPU kills the worker if it is stuck in C
  code (a huge integer power, a regex) where Python signal handlers cannot run;
* ``RLIMIT_CPU`` hard limit ``WORKER_CPU_HARD`` for the worker's whole life (the kernel's SIGKILL);
  the parent retires a worker after ``WORKER_CPU_RECYCLE`` seconds of CPU, well before it.

Memory: ``RLIMIT_AS`` is set to the forked image plus ``WORKER_EXTRA_MEMORY``, so a runaway request
gets ``MemoryError`` (unequal) instead of growing into the host's memory.

The parent only waits wall-clock time as a backstop, ``max(10 s, 20 x budget)``, then kills the
worker (SIGKILL) and forks a fresh one on the next request. A worker that uses no CPU at all for ``STALL_S``
seconds while the parent waits on it is stuck, not slow: forked while another thread of the parent held a lock
(an import's), it waits on it forever. Such a worker is replaced at once (at birth: forked again; with a request:
the request is sent once more to a fresh one).  A machine under load therefore slows
a verdict down but does not change it.  The worker reports the CPU time each request used (read
back with ``wait4`` when the worker had to be killed): see :func:`worker_cpu_seconds`.
"""

from __future__ import annotations

import math
import os
import resource
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from multiprocessing import Pipe
from typing import Any

WORKER_CPU_HARD = 1200  # RLIMIT_CPU hard limit of one worker's life, seconds
WORKER_CPU_RECYCLE = 600  # the parent replaces a worker that has used this much CPU
READY_WALL_S = 120.0  # wall-clock wait for a fresh worker's preload (not part of any budget)
# a worker that uses no CPU at all for this long while the parent waits on it is blocked for good: forked while
# another thread of the parent held a lock (an import's), it waits on that lock forever (`_await`)
STALL_S = 10.0
PROF_REPEAT_S = 0.01
# the soft RLIMIT_CPU's seconds past a request's budget: some virtual machines charge stalls as CPU time in lumps (4.6 s
# read back where 2.2 s was the most possible), and a lump past a 1 s slack killed a worker the timer would have stopped
RLIMIT_SLACK_S = 2
WORKER_EXTRA_MEMORY = 4 << 30  # RLIMIT_AS headroom over the forked image: a runaway request gets MemoryError
# Python frames a request may nest past the worker's serving loop (CPython's default limit). The worker sets it from
# its own stack on start, because the fork inherits the parent's limit and stack. Others raise the limit (torch's
# inductor to 2,000; a test of ours to 10,000 for grimp), and with it the parser got through "-" * 450 + "1" and
# called it equal to 1, a verdict a worker forked under the default refused (a CI run failed on it, depending on
# which test ran first in its process)
WORKER_RECURSION_DEPTH = 1000


class CpuBudgetExceeded(BaseException):
    """Raised inside the worker when a request has used its CPU budget."""


MIN_WALL_S = 10.0
_GONE = object()  # _exchange's marker: the pipe to the worker broke


def wall_backstop(budget: float, min_wall_s: float = MIN_WALL_S) -> float:
    """Wall-clock seconds the parent waits for one answer before killing the worker."""
    return max(min_wall_s, 20.0 * budget)


def _cpu_ticks(pid: int) -> int | None:
    """User + system CPU time of process `pid`, in clock ticks (None where /proc cannot tell)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def _await(conn, pid: int, wall: float) -> str:
    """Wait up to `wall` seconds for a message from worker `pid`: "ready" (one is there), "timeout", or "stalled"
    when the worker used no CPU at all for STALL_S seconds. A loaded machine slows a worker but leaves it some CPU;
    a worker forked while another thread of the parent held a lock that the worker then takes (an import's, in its
    preload or a lazy import of a request) never gets it, and used none."""
    now = time.monotonic()
    deadline, last, since = now + wall, _cpu_ticks(pid), now
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return "timeout"
        if conn.poll(min(1.0, left)):
            return "ready"
        ticks = _cpu_ticks(pid)
        if ticks is None or ticks != last:
            last, since = ticks, time.monotonic()
        elif time.monotonic() - since >= STALL_S:
            return "stalled"


_armed = False


def _on_sigprof(signum, frame) -> None:  # noqa: ARG001
    # not inside _disarm: a repeat landing at its first instruction would skip it and escape the request
    if _armed and frame.f_code is not _disarm.__code__:
        signal.setitimer(signal.ITIMER_PROF, PROF_REPEAT_S)  # again, should a library swallow it
        raise CpuBudgetExceeded


def _disarm() -> None:
    global _armed
    _armed = False
    signal.setitimer(signal.ITIMER_PROF, 0)


def _serve_one(serve: Callable[[Any], Any], request: Any, budget: float) -> Any:
    global _armed
    start = time.process_time()
    soft = min(math.ceil(start + budget) + RLIMIT_SLACK_S, WORKER_CPU_HARD)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, WORKER_CPU_HARD))
    try:
        try:
            _armed = True
            signal.setitimer(signal.ITIMER_PROF, max(budget, 1e-3))
            return serve(request)
        finally:
            _disarm()
    except BaseException:  # noqa: BLE001 - CpuBudgetExceeded, RecursionError, MemoryError, ...
        _disarm()
        return None
    finally:  # idle until the next request: no soft limit that a poll loop could cross
        resource.setrlimit(resource.RLIMIT_CPU, (WORKER_CPU_HARD, WORKER_CPU_HARD))


def _limit_memory() -> None:
    """Address space: what the (forked) worker already maps plus ``WORKER_EXTRA_MEMORY`` bytes."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            vm_kib = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
        limit = vm_kib * 1024 + WORKER_EXTRA_MEMORY
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        if hard == resource.RLIM_INFINITY or limit < hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (OSError, StopIteration, ValueError):
        pass  # no /proc: CPU bounds only


def _child_main(conn, parent_pid: int, serve: Callable[[Any], Any], preload: Callable[[], None]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)  # never run the host's handlers (e.g. a trainer's save-on-SIGTERM)
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    signal.signal(signal.SIGPROF, _on_sigprof)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (WORKER_CPU_HARD, WORKER_CPU_HARD))
    sys.setrecursionlimit(_stack_depth() + WORKER_RECURSION_DEPTH)  # the same for every fork (see the constant)
    try:
        preload()
        _limit_memory()
    except Exception:  # noqa: BLE001 - requests will then fail (False), the worker still answers
        pass
    conn.send(("ready", time.process_time()))
    while os.getppid() == parent_pid:
        try:
            if not conn.poll(1.0):
                continue
            request, budget = conn.recv()
        except (EOFError, OSError):
            return
        start = time.process_time()
        result = _serve_one(serve, request, budget)
        now = time.process_time()
        conn.send((result, now - start, now))


def _stack_depth() -> int:
    """Python frames on the calling thread's stack, the caller's included."""
    depth, frame = 0, sys._getframe(1)
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def _child_cpu(rusage) -> float:
    return rusage.ru_utime + rusage.ru_stime


class CpuBoundedWorker:
    """A lazily forked, reused worker running ``serve(request)`` under a per-request CPU budget."""

    def __init__(self, serve: Callable[[Any], Any], preload: Callable[[], None],
                 min_wall_s: float = MIN_WALL_S) -> None:
        self._serve, self._preload, self._min_wall_s = serve, preload, min_wall_s
        self.total_request_cpu = 0.0  # CPU seconds the worker spent on requests (all workers so far)
        self.requests = 0  # requests sent to a worker (all workers so far)
        self.last_exit_signal: int | None = None  # the signal the last reaped worker died of
        self._forget()

    def _forget(self) -> None:
        """Drop all state (also run in forked children: the worker is not theirs)."""
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._conn = None
        self._cpu_at_last_answer = 0.0

    @property
    def pid(self) -> int | None:
        return self._pid

    def start(self) -> bool:
        """Fork the worker now if none is alive (True once one is ready).

        ``call`` starts one lazily; starting it early keeps the fork, and the parent's copy-on-write
        page faults after it, out of the first request's time (and forks a smaller image before a
        model is loaded)."""
        with self._lock:
            if self._pid is not None and self._reap(os.WNOHANG):  # died while idle
                self._pid = None
                self.stop()
            return self._pid is not None or self._start()

    def _start(self, attempts: int = 3) -> bool:
        """Fork a worker and wait for its preload; a worker stalled at birth (see `_await`) is replaced, up to
        `attempts` forks in all."""
        for _ in range(attempts):
            parent_conn, child_conn = Pipe()
            parent_pid = os.getpid()
            with warnings.catch_warnings():  # Python >= 3.12 warns about fork with threads
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:  # child: serve requests until the parent goes away
                try:
                    parent_conn.close()
                    _child_main(child_conn, parent_pid, self._serve, self._preload)
                finally:
                    os._exit(0)
            child_conn.close()
            self._pid, self._conn = pid, parent_conn
            state = _await(parent_conn, pid, READY_WALL_S)
            if state == "ready":
                _, self._cpu_at_last_answer = parent_conn.recv()
                return True
            self.stop()
            if state == "timeout":
                return False
        return False

    def _reap(self, flags: int) -> bool:
        """wait4 the worker; account the CPU time of its unfinished request. True if it was reaped."""
        try:
            pid, status, rusage = os.wait4(self._pid, flags)
        except OSError:
            return True  # already gone
        if pid == 0:
            return False  # still running
        self.total_request_cpu += max(_child_cpu(rusage) - self._cpu_at_last_answer, 0.0)
        self.last_exit_signal = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        return True

    def stop(self) -> None:
        """Kill the worker (if any), adding the CPU time of its unfinished request to the total."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except OSError:
                pass
            self._reap(0)
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
        self._pid = self._conn = None

    def call(self, request: Any, budget: float) -> Any:
        """``serve(request)`` in the worker within ``budget`` CPU seconds; None if it failed or ran out.

        A worker found gone when the request is sent or read back, not by its own CPU limit (SIGXCPU:
        the request's doing), was killed from outside (SIGKILL from a user or the OOM killer, which a
        loaded machine may deliver only after the parent thought it idle and alive): it is replaced and
        the request sent once more, so the verdict does not depend on when an outside kill landed."""
        budget = max(float(budget), 0.0)
        if not self._lock.acquire(timeout=wall_backstop(budget, self._min_wall_s) + READY_WALL_S):
            return None
        try:
            for _ in range(2):
                answered, result = self._exchange(request, budget)
                if answered:
                    return result
                self.stop()  # timed out or died: kill (reaping it adds its CPU time); a new worker is forked next
                if result is not _GONE or self.last_exit_signal == signal.SIGXCPU:
                    return None
            return None
        finally:
            self._lock.release()

    def _exchange(self, request: Any, budget: float) -> tuple[bool, Any]:
        """``(True, result)``, or ``(False, _GONE)`` if the pipe broke, or ``(False, None)`` on another failure."""
        try:
            if self._pid is not None and self._cpu_at_last_answer > WORKER_CPU_RECYCLE:
                self.stop()
            if self._pid is not None and self._reap(os.WNOHANG):  # died while idle (killed from outside)
                self._pid = None
                self.stop()
            if self._pid is None and not self._start():
                return False, None
            self._conn.send((request, budget))
            self.requests += 1
            state = _await(self._conn, self._pid, wall_backstop(budget, self._min_wall_s))
            if state != "ready":  # a stalled worker is one killed from outside in effect: the request is sent again
                return False, _GONE if state == "stalled" else None
            result, used, total = self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):  # the worker is gone (SIGXCPU, SIGKILL, ...)
            return False, _GONE
        except Exception:  # noqa: BLE001 - fork failure, unpicklable answer, ...
            return False, None
        self.total_request_cpu += used
        self._cpu_at_last_answer = total
        return True, result
