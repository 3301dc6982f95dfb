"""CPU time of a grading call: this process's CPU time plus the grading worker's CPU time for it."""
from __future__ import annotations

import time
from typing import Any, Callable

from envs.answers import worker_cpu_seconds


def cpu_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``(fn(*args, **kwargs), CPU seconds used by this process and the grading worker)``."""
    parent, worker = time.process_time(), worker_cpu_seconds()
    result = fn(*args, **kwargs)
    return result, (time.process_time() - parent) + (worker_cpu_seconds() - worker)
