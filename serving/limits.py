"""How much one request may ask of the server, and the clock that bounds its compute.

The compute of a request is checked against its deadline before every sampling call and every scorer
call (the time spent waiting for the model counts): a call in progress finishes, the next one raises
`ComputeTimeout`. So a request runs at most about `timeout_seconds` plus one call, and a call is itself
bounded by `max_new_tokens` and `max_budget`.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from core.checked_config import CheckedConfig, setting


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

    def check(self) -> None:
        """Raise ComputeTimeout when the deadline has passed."""
        if time.monotonic() >= self.at:
            raise ComputeTimeout(f"the request ran over this server's timeout of {self.seconds:g} s "
                                 f"(timeout_seconds); ask for a smaller budget or fewer tokens")


class TimedPolicy:
    """`policy` with every `sample` call checked against `deadline` first; everything else is the policy's."""

    def __init__(self, policy, deadline: Deadline):
        self._policy, self._deadline = policy, deadline

    def __getattr__(self, name: str):
        return getattr(self._policy, name)

    def sample(self, *args, **kwargs):
        self._deadline.check()
        return self._policy.sample(*args, **kwargs)


class TimedScorer:
    """A step scorer whose `score_branches` calls are checked against `deadline` first."""

    def __init__(self, scorer, deadline: Deadline):
        self._scorer, self._deadline = scorer, deadline

    def score_branches(self, branches):
        self._deadline.check()
        return self._scorer.score_branches(branches)
