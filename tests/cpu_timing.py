"""CPU time of a call: this process's CPU time plus the grading worker's CPU time for it.

The garbage collector is paused during the call: a full collection walks the whole test process's heap
(torch, sympy, hypothesis), and its cost belongs to the process, not to the function measured.
"""
from __future__ import annotations

import gc
import time
from typing import Any, Callable

from envs.answers import worker_cpu_seconds


def cpu_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``(fn(*args, **kwargs), CPU seconds used by this process and the grading worker)``."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        parent, worker = time.process_time(), worker_cpu_seconds()
        result = fn(*args, **kwargs)
        return result, (time.process_time() - parent) + (worker_cpu_seconds() - worker)
    finally:
        if was_enabled:
            gc.enable()
