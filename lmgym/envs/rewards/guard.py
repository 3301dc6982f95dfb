"""Calling a reward function on one sample (or one batch: ``call_batch_reward``) without letting it crash
or stall the episode.

``call_reward`` passes a number through as a float and ``None`` ("not applicable")
as is, and turns an exception, a non-number or non-finite value, or a run
past a CPU-time bound into a 0.0 score plus a one-line error
(``"ExceptionType: message"``) that the env reports in ``info["reward_errors"]``.

The CPU-time bound uses ``signal.setitimer(signal.ITIMER_PROF)`` and a SIGPROF
handler that raises :class:`RewardTimeout`; signals can only be handled in the
main thread, so the bound applies only when ``call_reward`` runs there (and the
platform has ``setitimer``).  Elsewhere a reward function runs unbounded.  The
timer counts the CPU time of the whole process (all its threads) while the
reward function runs; a process it forks is not counted.  The previous SIGPROF
handler and timer are restored afterwards.
"""

from __future__ import annotations

import math
import numbers
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from lmgym.core.messages import error_line

__all__ = ["RewardTimeout", "call_batch_reward", "call_reward", "cpu_time_limit"]

MAX_ERROR_CHARS = 200
_REPEAT_S = 0.05  # the timer fires again every 50 ms if a reward function swallows the first exception


class RewardTimeout(BaseException):
    """A reward function ran past its CPU-time bound.

    A ``BaseException`` so that a reward function's own ``except Exception``
    cannot swallow it.
    """


def _can_time(timeout: float | None) -> bool:
    return (
        timeout is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )


class cpu_time_limit:  # noqa: N801 - used as a function-like context manager: ``with cpu_time_limit(2.0):``
    """Raise :class:`RewardTimeout` in the block once it has used ``timeout`` CPU seconds.

    A no-op for ``timeout=None`` or outside the main thread.

    A class, not a generator: a second SIGPROF that lands as the block exits (the timer repeats every 50 ms)
    would raise at the first instruction of ``contextlib``'s ``__exit__``, skip the clean-up and leave the timer
    raising anywhere in the program. The handler never raises while this class's ``__enter__``/``__exit__`` is on
    the stack, so ``__exit__`` always runs whole.
    """

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._armed = False
        self._previous: tuple[Any, float, float, float] | None = None  # handler, delay, interval, CPU start

    def _on_sigprof(self, signum: int, frame: Any) -> None:
        if self._armed and not _inside_enter_or_exit(frame):
            raise RewardTimeout(f"exceeded {self.timeout:g} s of CPU time")

    def __enter__(self) -> cpu_time_limit:
        if not _can_time(self.timeout):
            return self
        handler = signal.signal(signal.SIGPROF, self._on_sigprof)
        cpu_start = time.process_time()
        self._armed = True
        delay, interval = signal.setitimer(signal.ITIMER_PROF, float(self.timeout), _REPEAT_S)
        self._previous = (handler, delay, interval, cpu_start)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._armed = False
        if self._previous is None:
            return
        handler, delay, interval, cpu_start = self._previous
        self._previous = None
        signal.setitimer(signal.ITIMER_PROF, 0.0)
        signal.signal(signal.SIGPROF, handler)
        if delay > 0:  # a timer someone else set keeps counting the CPU time used meanwhile
            used = time.process_time() - cpu_start
            signal.setitimer(signal.ITIMER_PROF, max(delay - used, 1e-6), interval)


_OWN_CODES = (cpu_time_limit.__enter__.__code__, cpu_time_limit.__exit__.__code__)


def _inside_enter_or_exit(frame: Any) -> bool:
    """Whether ``frame`` or a caller of it is ``cpu_time_limit.__enter__``/``__exit__`` (arming or cleaning up)."""
    while frame is not None:
        if frame.f_code in _OWN_CODES:
            return True
        frame = frame.f_back
    return False


def _as_reward(value: Any) -> float | None:
    """``value`` as a finite float (None stays None); ValueError/TypeError naming what is wrong otherwise."""
    if value is None:
        return None
    if not isinstance(value, numbers.Real):
        raise TypeError(f"reward must be a real number or None; got {type(value).__name__}")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"reward must be finite; got {result!r}")
    return result


def call_reward(
    fn: Callable[[str, str, dict], Any],
    completion: str,
    gold: str,
    context: dict,
    timeout: float | None,
) -> tuple[float | None, str | None]:
    """``(score, None)`` (a None score: not applicable), or ``(0.0, "ExceptionType: one-line message")``
    if ``fn`` fails on this sample."""
    try:
        with cpu_time_limit(timeout):
            value = fn(completion, gold, context)
        return _as_reward(value), None
    except (Exception, RewardTimeout) as error:  # noqa: BLE001 - contained per sample, reported in info
        return 0.0, error_line(error, MAX_ERROR_CHARS)


def call_batch_reward(
    fn: Callable[[], Any], size: int, timeout: float | None
) -> list[tuple[float | None, str | None]]:
    """``call_reward`` for one call scoring ``size`` samples at once (``fn()`` returns their list of rewards):
    the CPU-time bound is ``timeout`` per sample; a call that fails scores every sample 0.0 with its error,
    a bad value only its own sample."""
    try:
        with cpu_time_limit(None if timeout is None else timeout * size):
            values = fn()
    except (Exception, RewardTimeout) as error:  # noqa: BLE001 - contained per batch, reported in info
        return [(0.0, error_line(error, MAX_ERROR_CHARS))] * size
    results: list[tuple[float | None, str | None]] = []
    for value in values:
        try:
            results.append((_as_reward(value), None))
        except (TypeError, ValueError) as error:
            results.append((0.0, error_line(error, MAX_ERROR_CHARS)))
    return results
