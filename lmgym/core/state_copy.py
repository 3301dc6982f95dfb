"""`deep_copy`: `copy.deepcopy`, several times faster on the plain data an episode's state is made of.

Episode states (envs/episode_state.py, episodes/env_state.py) are copied in and out of the env at every step
of every branch, and are mostly dicts and lists of strings and numbers. `copy.deepcopy` dispatches each of
those through its generic machinery; here exact dicts and lists are copied directly, immutable scalars kept
and tuples copied as `deepcopy` copies them, with `deepcopy`'s memo (objects reached twice are copied once, so
aliasing inside the state is kept); instances of plain dataclasses (an env's `Problem`) are rebuilt from
their `__dict__` the way `copy.deepcopy` rebuilds them, without its generic dispatch; anything else (sets,
other classes, subclasses of dict or list) goes to `copy.deepcopy` with the same memo. The result is what
`copy.deepcopy` returns.
"""
from __future__ import annotations

import copy
import dataclasses
from functools import cache
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
    elif kind is tuple:  # as copy.deepcopy: the same tuple when every item is its own copy (immutable)
        items = [_copy(item, memo) for item in value]
        done = memo.get(id(value), memo)  # a cycle through the tuple made it already
        if done is not memo:
            return done
        out = value if all(a is b for a, b in zip(items, value)) else tuple(items)
        memo[id(value)] = out
    elif _plain_dataclass(kind):
        out = object.__new__(kind)
        memo[id(value)] = out
        for name, item in vars(value).items():
            object.__setattr__(out, name, _copy(item, memo))
    else:
        out = copy.deepcopy(value, memo)
    return out


_COPY_HOOKS = ("__deepcopy__", "__reduce_ex__", "__reduce__", "__getstate__", "__setstate__", "__copy__")


@cache
def _plain_dataclass(kind: type) -> bool:
    """A dataclass with an instance `__dict__` and none of the hooks that change how `copy.deepcopy` copies it:
    then deepcopy makes a new instance without calling `__init__` and deep-copies the `__dict__` into it."""
    if not dataclasses.is_dataclass(kind) or "__slots__" in vars(kind):
        return False
    return all(getattr(kind, hook, None) is getattr(object, hook, None) for hook in _COPY_HOOKS)
