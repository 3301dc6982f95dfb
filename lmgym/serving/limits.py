"""How much one request may ask of the server, and the clock that bounds its compute.

The compute of a request is checked against its deadline before every sampling call and every scorer
call (the time spent waiting for the model counts), and during a sampling call at every decoding step (a
policy with the `cancelled_rows` hook, as HFPolicy has): the call's rows end there and the next call raises
`ComputeTimeout`. So a request runs at most about `timeout_seconds` plus one decoding step (one scorer call),
not one whole call more.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from lmgym.core.checked_config import CheckedConfig, setting


@dataclass
class ServerLimits(CheckedConfig):
    """What one request may ask for. A bad value is a one-line ConfigError naming the field."""

    max_prompt_chars: int = setting(4000, "characters of a /generate prompt or a /solve question at most")
    max_new_tokens: int = setting(512, "tokens a /generate request may ask for at most")
    max_budget: int = setting(32, "a /solve budget at most (samples: maj, best_of_n; beams: beam; simulations: mcts)")
    timeout_seconds: float = setting(60.0, "compute time of one request at most (waiting for the model included)")
    max_body_bytes: int = setting(1_000_000, "bytes of a request body at most (checked before the JSON is parsed)")

    def __post_init__(self) -> None:
        super().__post_init__()
        for f in dataclasses.fields(self):
            self.require(f.name, getattr(self, f.name) > 0, "> 0")


class ComputeTimeout(Exception):
    """A request's compute ran past its deadline."""


class Deadline:
    """A point in time (time.monotonic) that a request's compute may not pass."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left (0 when past)."""
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        """Whether the deadline has passed."""
        return time.monotonic() >= self.at

    def check(self) -> None:
        """Raise ComputeTimeout when the deadline has passed."""
        if self.passed():
            raise ComputeTimeout(f"the request ran over this server's timeout of {self.seconds:g} s "
                                 f"(timeout_seconds); ask for a smaller budget or fewer tokens")


class Limit(Protocol):
    """What bounds a computation: a `Deadline`, or whatever else says when nobody waits for it any more."""

    def passed(self) -> bool: ...

    def check(self) -> None: ...


@contextmanager
def ending_rows(policy, cancelled_rows: Callable[[], Collection[int]]) -> Iterator[None]:
    """While inside, `policy`'s sampling ends the rows `cancelled_rows()` names at its next decoding step
    (its `cancelled_rows` hook); a policy without the hook runs its calls whole."""
    if not hasattr(policy, "cancelled_rows"):
        yield
        return
    previous = policy.cancelled_rows
    policy.cancelled_rows = cancelled_rows
    try:
        yield
    finally:
        policy.cancelled_rows = previous


class TimedPolicy:
    """`policy` with every `sample` call checked against `limit` first, and its rows ended at the next decoding
    step once the limit passes; everything else is the policy's."""

    def __init__(self, policy, limit: Limit):
        self._policy, self._limit = policy, limit

    def __getattr__(self, name: str):
        return getattr(self._policy, name)

    def sample(self, prompts, n=1, *args, **kwargs):
        self._limit.check()
        rows = range(len(prompts) * n)
        with ending_rows(self._policy, lambda: rows if self._limit.passed() else ()):
            return self._policy.sample(prompts, n, *args, **kwargs)


class TimedScorer:
    """A step scorer whose `score_branches` calls are checked against `limit` first."""

    def __init__(self, scorer, deadline: Limit):
        self._scorer, self._deadline = scorer, deadline

    def score_branches(self, branches):
        self._deadline.check()
        return self._scorer.score_branches(branches)
