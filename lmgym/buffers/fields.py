"""Declared per-token trajectory fields: what an algorithm attaches to each completion token, by name.

A `TokenField` is a name (the key in `Trajectory.token_data` and `Batch.fields`) and a line saying what
it holds; `collate(..., fields=...)` turns the declared fields of a list of trajectories into [B, C]
tensors read back as `batch[FIELD]`. Algorithms declare their own next to the standard ones below.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Trajectory(Protocol):
    """What a field reads and writes of a trajectory (lmgym.buffers.trajectory.Trajectory has it)."""

    token_data: dict[str, list[float]]
    completion_ids: list[int]


@dataclass(frozen=True)
class TokenField:
    """A list of floats, one per completion token, stored in `Trajectory.token_data[name]`."""

    name: str
    doc: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"TokenField: name must be an identifier, got {self.name!r}")

    def has(self, trajectory: Trajectory) -> bool:
        return self.name in trajectory.token_data

    def get(self, trajectory: Trajectory) -> list[float]:
        """The field's values (one per completion token); ValueError when absent or of another length."""
        values = trajectory.token_data.get(self.name)
        if values is None:
            raise ValueError(f"trajectory has no per-token field {self.name!r} "
                             f"(it holds: {', '.join(sorted(trajectory.token_data)) or 'none'})")
        self._check_length(trajectory, values)
        return values

    def set(self, trajectory: Trajectory, values: Sequence[float]) -> None:
        """Store one float per completion token (replacing any earlier values)."""
        values = [float(v) for v in values]
        self._check_length(trajectory, values)
        trajectory.token_data[self.name] = values

    def _check_length(self, trajectory: Trajectory, values: Sequence[float]) -> None:
        if len(values) != len(trajectory.completion_ids):
            raise ValueError(f"per-token field {self.name!r} has {len(values)} values for "
                             f"{len(trajectory.completion_ids)} completion tokens")


REF_LOGPROBS = TokenField("ref_logprobs", "the reference model's log-prob of each completion token")
ADVANTAGES = TokenField("advantages", "the advantage of each completion token (0 where it is not trained on)")
OLD_VALUES = TokenField("old_values", "value estimates V(s_t) before the update (PPO's critic)")
RETURNS = TokenField("returns", "the value targets of each completion token (PPO's GAE returns)")
TOKEN_REWARD_SHAPING = TokenField("token_reward_shaping", "reward shaping paid at each token (e.g. KL in the "
                                                          "reward), added to the token rewards by collate")
