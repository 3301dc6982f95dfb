"""`Trajectory`: one episode as the trainer sees it, in exact token ids."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields


@dataclass
class Trajectory:
    """One episode: prompt ids, then every completion token (model-sampled or env-injected).

    completion_mask[t] is 1 for tokens the model sampled (trained on) and 0 for tokens the
    environment injected (calculator results, tool output, separators). logprobs[t] is the
    behaviour log-prob recorded at sampling time (0.0 for injected tokens). step_ends[k] is the index
    in completion_ids of the last token of step k, where step_rewards[k] is paid; single-turn
    episodes have one step ending at the last token. `reward` is the episode's total reward.
    roles[t] names who wrote token t in an episode of several roles (the acting role's name for sampled
    tokens, "env" or the injected turn's role for injected ones); empty for single-role episodes.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    completion_mask: list[int]
    reward: float
    step_rewards: list[float] = field(default_factory=list)
    step_ends: list[int] = field(default_factory=list)
    group_id: int = 0
    truncated: bool = False
    text: str = ""
    info: dict = field(default_factory=dict)
    roles: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.completion_ids)
        if len(self.logprobs) != n or len(self.completion_mask) != n:
            raise ValueError(
                f"Trajectory: completion_ids ({n}), logprobs ({len(self.logprobs)}) and completion_mask "
                f"({len(self.completion_mask)}) must have the same length")
        if not self.step_ends:
            self.step_ends = [max(n - 1, 0)]
            self.step_rewards = [float(self.reward)]
        if len(self.step_ends) != len(self.step_rewards):
            raise ValueError("Trajectory: step_ends and step_rewards must have the same length")
        if self.roles and len(self.roles) != n:
            raise ValueError(f"Trajectory: roles ({len(self.roles)}) must be empty or one per completion token ({n})")

    @property
    def num_generated_tokens(self) -> int:
        return int(sum(self.completion_mask))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Trajectory":
        """Build from `to_dict` output, checking every field first (ValueError naming the field)."""
        check_fields(data)
        return cls(**data)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_list(data: dict, name: str, ok, what: str) -> None:
    values = data[name]
    if not isinstance(values, list):
        raise ValueError(f"{name} must be a list of {what}, got {type(values).__name__}")
    for i, v in enumerate(values):
        if not ok(v):
            raise ValueError(f"{name}[{i}] must be {what}, got {v!r}")


def check_fields(data: dict) -> None:
    """Raise ValueError (one line, naming the field) unless `data` is a valid trajectory record:
    token ids non-negative integers, masks 0/1, rewards and log-probs finite numbers."""
    if not isinstance(data, dict):
        raise ValueError(f"a trajectory must be a JSON object, got {type(data).__name__}")
    names = {f.name for f in fields(Trajectory)}
    missing = [n for n in ("prompt_ids", "completion_ids", "logprobs", "completion_mask", "reward") if n not in data]
    unknown = sorted(set(data) - names)
    if missing or unknown:
        raise ValueError(f"missing field(s) {missing} / unknown field(s) {unknown}" if missing and unknown else
                         f"missing field(s): {', '.join(missing)}" if missing else
                         f"unknown field(s): {', '.join(unknown)}")
    for name in ("prompt_ids", "completion_ids"):
        _check_list(data, name, lambda v: _is_int(v) and v >= 0, "a non-negative integer token id")
    _check_list(data, "logprobs", _is_finite, "a finite number")
    _check_list(data, "completion_mask", lambda v: _is_int(v) and v in (0, 1), "0 or 1")
    if not _is_finite(data["reward"]):
        raise ValueError(f"reward must be a finite number, got {data['reward']!r}")
    if "step_rewards" in data:
        _check_list(data, "step_rewards", _is_finite, "a finite number")
    if "step_ends" in data:
        _check_list(data, "step_ends", lambda v: _is_int(v) and v >= 0, "a non-negative integer")
    for name, kind in (("group_id", int), ("truncated", bool), ("text", str), ("info", dict)):
        value = data.get(name, kind())
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"{name} must be {kind.__name__}, got {type(value).__name__}")
    if "roles" in data:
        _check_list(data, "roles", lambda v: isinstance(v, str) and v != "", "a role name (non-empty str)")
        if data["roles"] and len(data["roles"]) != len(data["completion_ids"]):
            raise ValueError(f"roles must be empty or one per completion token ({len(data['completion_ids'])}), "
                             f"got {len(data['roles'])}")
