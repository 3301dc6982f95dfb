"""One-line argument checks shared by the envs: each raises a ValueError naming the argument."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from lmgym.envs.rewards.forms import RewardFn, as_per_sample


def check_choice(name: str, value: Any, choices: tuple) -> None:
    """Raise a one-line ValueError naming ``name`` unless ``value`` is one of ``choices``."""
    if not any(value == choice and type(value) is type(choice) for choice in choices):
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")


def check_positive_int(name: str, value: Any) -> None:
    """Raise a one-line ValueError naming ``name`` unless ``value`` is an int >= 1."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1; got {value!r}")


def check_bool(name: str, value: Any) -> None:
    """Raise a one-line ValueError naming ``name`` unless ``value`` is True or False (not 'no', not 0)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False; got {value!r}")


def check_timeout(name: str, value: Any) -> None:
    """Raise a one-line ValueError naming ``name`` unless ``value`` is None or a finite number > 0."""
    if value is None:
        return
    valid = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not valid:
        raise ValueError(f"{name} must be a number of seconds > 0 or None; got {value!r}")


def check_str(name: str, value: Any) -> None:
    """Raise a one-line ValueError naming ``name`` unless ``value`` is a str."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str; got {type(value).__name__}")


def checked_reward_fns(reward_fns: Mapping[str, RewardFn] | Sequence[RewardFn] | None,
                       default: Mapping[str, RewardFn] | None = None) -> dict[str, RewardFn]:
    """name -> reward function (per-sample form); a list (TRL's ``reward_funcs``) is named by each function's
    ``__name__`` (a repeated name gets ``_2``, ``_3``...); None: ``default`` (the env class's
    ``default_reward_fns``; may be empty)."""
    if reward_fns is None:
        return {name: as_per_sample(fn, str(name)) for name, fn in (default or {}).items()}
    if isinstance(reward_fns, (list, tuple)):
        reward_fns = _named(reward_fns)
    if not isinstance(reward_fns, Mapping) or not reward_fns:
        raise ValueError("reward_fns must be a non-empty list of reward functions or dict of name -> reward function")
    for name, fn in reward_fns.items():
        if not callable(fn):
            raise ValueError(f"reward_fns[{name!r}] must be callable; got {type(fn).__name__}")
    return {name: as_per_sample(fn, str(name)) for name, fn in reward_fns.items()}


def _named(fns: Sequence[Any]) -> dict[str, Any]:
    named: dict[str, Any] = {}
    for k, fn in enumerate(fns):
        if not callable(fn):
            raise ValueError(f"reward_fns[{k}] must be callable; got {type(fn).__name__}")
        base = str(getattr(fn, "__name__", "") or getattr(getattr(fn, "fn", None), "__name__", "") or f"reward_{k}")
        name, count = base, 1
        while name in named:
            count += 1
            name = f"{base}_{count}"
        named[name] = fn
    return named


def checked_reward_weights(
    reward_weights: Mapping[str, float] | None, reward_fns: Mapping[str, RewardFn]
) -> dict[str, float]:
    weights = dict.fromkeys(reward_fns, 1.0)
    for name, weight in (reward_weights or {}).items():
        if name not in reward_fns:
            raise ValueError(f"reward_weights has {name!r}, which is not in reward_fns ({', '.join(reward_fns)})")
        valid = isinstance(weight, (int, float)) and not isinstance(weight, bool) and math.isfinite(weight)
        if not valid:
            raise ValueError(f"reward_weights[{name!r}] must be a finite number; got {weight!r}")
        weights[name] = float(weight)
    return weights
