"""`deep_copy`: `copy.deepcopy`, several times faster on the plain data an episode's state is made of.

Episode states (envs/episode_state.py, episodes/env_state.py) are copied in and out of the env at every step
of every branch, and are mostly dicts and lists of strings and numbers. `copy.deepcopy` dispatches each of
those through its generic machinery; here exact dicts and lists are copied directly and immutable scalars
kept, with `deepcopy`'s memo (objects reached twice are copied once, so aliasing inside the state is kept);
anything else (tuples, sets, dataclasses, subclasses of dict or list) goes to `copy.deepcopy` with the same
memo. The result is what `copy.deepcopy` returns.
"""
from __future__ import annotations

import copy
from typing import Any, TypeVar

T = TypeVar("T")
_SCALARS = frozenset({str, int, float, bool, type(None), bytes, complex})  # deepcopy returns these as they are


def deep_copy(value: T) -> T:
    """An independent copy of `value`, equal to `copy.deepcopy(value)` (see the module doc)."""
    return _copy(value, {})


def _copy(value: Any, memo: dict[int, Any]) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    done = memo.get(id(value), memo)
    if done is not memo:
        return done
    if kind is list:
        out: Any = []
        memo[id(value)] = out
        out.extend([_copy(item, memo) for item in value])
    elif kind is dict:
        out = {}
        memo[id(value)] = out
        for key, item in value.items():
            out[key if type(key) in _SCALARS else _copy(key, memo)] = _copy(item, memo)
    else:
        out = copy.deepcopy(value, memo)
    return out
