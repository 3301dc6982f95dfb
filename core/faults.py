"""Fault injection for the kill-and-resume tests: a no-op unless `RLGYM_CRASH_AT` is set.

`RLGYM_CRASH_AT="<point>:<n>"` kills this process with SIGKILL the n-th time (1-based) it reaches
`crash_point("<point>")`, as a power cut or `kill -9` would at that exact file-operation boundary.
`torn_write` writes only the first half of its data before dying there, like a kill inside a write.
"""
from __future__ import annotations

import os
import signal
from typing import IO

ENV_VAR = "RLGYM_CRASH_AT"
_seen: dict[str, int] = {}


def _armed(name: str) -> bool:
    """Count one arrival at `name`; True when this arrival is the one `RLGYM_CRASH_AT` names."""
    spec = os.environ.get(ENV_VAR)
    if not spec:
        return False
    point, _, count = spec.rpartition(":")
    if point != name:
        return False
    _seen[name] = _seen.get(name, 0) + 1
    return _seen[name] == int(count)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(name: str) -> None:
    """Die here (SIGKILL) when fault injection names this point and occurrence; otherwise nothing."""
    if _armed(name):
        _die()


def torn_write(fh: IO[str], data: str, name: str) -> None:
    """`fh.write(data)`; when fault injection names `name`, write half of it to disk and die."""
    if _armed(name):
        fh.write(data[: len(data) // 2])
        fh.flush()
        os.fsync(fh.fileno())
        _die()
    fh.write(data)
