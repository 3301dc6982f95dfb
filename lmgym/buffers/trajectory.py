"""`Trajectory`: one episode as the trainer sees it, in exact token ids."""
from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from lmgym.buffers.fields import TOKEN_REWARD_SHAPING
from lmgym.buffers.outcome import EpisodeOutcome


@dataclass
class Trajectory:
    """One episode: prompt ids, then every completion token (model-sampled or env-injected).

    completion_mask[t] is 1 for tokens the model sampled (trained on) and 0 for tokens the
    environment injected (calculator results, tool output, separators). logprobs[t] is the
    behaviour log-prob recorded at sampling time (0.0 for injected tokens). step_ends[k] is the index
    in completion_ids of the last token of step k, where step_rewards[k] is paid; single-turn
    episodes have one step ending at the last token. `reward` is the episode's total reward, shaping
    included; `env_reward` is the env's own (before any shaping, the sum of which is named in `shaping`).
    `iteration` is the training iteration that sampled it (with rollout workers, the policy version: the iterations
    its sampling weights had trained); `token_data` holds the declared per-token
    fields (lmgym.buffers.fields.TokenField) by name. `info` is what the env returned, nothing else; `outcome` is
    the episode's facts the trainer reads (lmgym.buffers.outcome.EpisodeOutcome: verdict, parsed answer, reward
    components and errors, problem id, turn records), built from `info` when not given.
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
    env_reward: float | None = None
    iteration: int = 0
    token_data: dict[str, list[float]] = field(default_factory=dict)
    shaping: dict[str, float] = field(default_factory=dict)
    roles: list[str] = field(default_factory=list)
    outcome: EpisodeOutcome = None  # type: ignore[assignment]  # None: EpisodeOutcome.from_info(info)

    def __post_init__(self) -> None:
        if self.outcome is None:
            self.outcome = EpisodeOutcome.from_info(self.info)
        elif not isinstance(self.outcome, EpisodeOutcome):
            raise ValueError(f"Trajectory: outcome must be an EpisodeOutcome, got {type(self.outcome).__name__}")
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
        if self.env_reward is None:
            self.env_reward = float(self.reward)
        for name, values in self.token_data.items():
            if len(values) != n:
                raise ValueError(f"Trajectory: per-token field {name!r} has {len(values)} values for {n} "
                                 f"completion tokens")

    @property
    def num_generated_tokens(self) -> int:
        return int(sum(self.completion_mask))

    def add_shaping(self, name: str, amount: float, per_token: Sequence[float] | None = None) -> None:
        """Add the reward-shaping term `name` (e.g. "kl_penalty", "overlong_penalty") to `reward`; `env_reward`
        keeps the env's own. It is paid at the last step, or, given `per_token` (one value per completion
        token, summing to `amount`), at each token through TOKEN_REWARD_SHAPING (collate adds it)."""
        if per_token is None:
            self.step_rewards[-1] += amount
        else:
            if not math.isclose(sum(per_token), amount, rel_tol=1e-6, abs_tol=1e-6):
                raise ValueError(f"add_shaping({name!r}): per_token sums to {sum(per_token)}, not to amount {amount}")
            if TOKEN_REWARD_SHAPING.has(self):
                per_token = [a + b for a, b in zip(TOKEN_REWARD_SHAPING.get(self), per_token, strict=True)]
            TOKEN_REWARD_SHAPING.set(self, per_token)
        self.reward += amount
        self.shaping[name] = self.shaping.get(name, 0.0) + amount

    def reset_run_data(self) -> None:
        """Drop what a training run attached: every per-token field and every shaping term (`reward` back
        to `env_reward`, the last step's reward without the terms paid there). Episode and env data stay."""
        paid_per_token = sum(TOKEN_REWARD_SHAPING.get(self)) if TOKEN_REWARD_SHAPING.has(self) else 0.0
        paid_at_last_step = sum(self.shaping.values()) - paid_per_token
        if not math.isclose(paid_at_last_step, 0.0, abs_tol=1e-9):  # per-token terms alone leave rounding noise
            self.step_rewards[-1] -= paid_at_last_step
        self.reward = self.env_reward
        self.token_data.clear()
        self.shaping.clear()

    def to_dict(self) -> dict:
        """Plain data (JSON-ready when the env's info is): every field, the outcome as its own dict."""
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "outcome"}
        return {**data, "outcome": self.outcome.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> Trajectory:
        """Build from `to_dict` output, checking every field first (ValueError naming the field). Records
        written before `env_reward`, `iteration`, `token_data`, `shaping` and `roles` existed load with their
        defaults; one written before `outcome` existed gets the outcome its saved info reports (the same
        one, but for the engine's per-action records, which it never held)."""
        check_fields(data)
        values = dict(data)
        if values.get("outcome") is not None:
            values["outcome"] = EpisodeOutcome.from_dict(values["outcome"])
        return cls(**values)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_list(values, name: str, ok, what: str) -> None:
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
        _check_list(data[name], name, lambda v: _is_int(v) and v >= 0, "a non-negative integer token id")
    _check_list(data["logprobs"], "logprobs", _is_finite, "a finite number")
    _check_list(data["completion_mask"], "completion_mask", lambda v: _is_int(v) and v in (0, 1), "0 or 1")
    if not _is_finite(data["reward"]):
        raise ValueError(f"reward must be a finite number, got {data['reward']!r}")
    if "step_rewards" in data:
        _check_list(data["step_rewards"], "step_rewards", _is_finite, "a finite number")
    if "step_ends" in data:
        _check_list(data["step_ends"], "step_ends", lambda v: _is_int(v) and v >= 0, "a non-negative integer")
    for name, kind in (("group_id", int), ("truncated", bool), ("text", str), ("info", dict), ("iteration", int),
                       ("token_data", dict), ("shaping", dict)):
        value = data.get(name, kind())
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"{name} must be {kind.__name__}, got {type(value).__name__}")
    if data.get("env_reward") is not None and not _is_finite(data["env_reward"]):
        raise ValueError(f"env_reward must be a finite number or null, got {data['env_reward']!r}")
    if data.get("iteration", 0) < 0:
        raise ValueError(f"iteration must be >= 0, got {data['iteration']}")
    _check_token_data(data.get("token_data", {}), len(data["completion_ids"]))
    if "roles" in data:
        _check_list(data["roles"], "roles", lambda v: isinstance(v, str) and v != "", "a role name (non-empty str)")
        if data["roles"] and len(data["roles"]) != len(data["completion_ids"]):
            raise ValueError(f"roles must be empty or one per completion token ({len(data['completion_ids'])}), "
                             f"got {len(data['roles'])}")
    for name, amount in data.get("shaping", {}).items():
        if not _is_finite(amount):
            raise ValueError(f"shaping[{name!r}] must be a finite number, got {amount!r}")
    if data.get("outcome") is not None and not isinstance(data["outcome"], dict):
        raise ValueError(f"outcome must be dict or null, got {type(data['outcome']).__name__}")


def _check_token_data(token_data: dict, n: int) -> None:
    """Each per-token field: a list of n finite numbers (one per completion token)."""
    for name, values in token_data.items():
        _check_list(values, f"token_data[{name!r}]", _is_finite, "a finite number")
        if len(values) != n:
            raise ValueError(f"token_data[{name!r}] has {len(values)} values for {n} completion tokens")
