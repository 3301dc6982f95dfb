"""The attributes that make up one episode of an env: declared per class, saved, restored and watched.

A class declares its episode attributes in a class attribute ``episode_state``: a dict of attribute
name -> start value. The declarations of every class in the MRO are merged (a subclass may give a new
start value for a name a base declares). ``reset`` sets each declared attribute to a deep copy of its
start value; ``get_state`` / ``set_state`` deep-copy exactly these attributes out and in (``deep_copy``:
``copy.deepcopy``'s result, faster on plain data), with the env's class and mode, so a state restores only
into an env of the same class and mode.

An attribute that ``step`` changes but that is not declared would be shared by every branch restored
from a state. ``attribute_marks`` / ``warn_undeclared_changes`` catch the common cases cheaply (an
attribute created or rebound by ``step``, or a list/dict/set whose length it changed) and warn once per
class and attribute; a container mutated in place at the same length goes unnoticed. The watch runs on each
class's first WATCHED_STEPS steps in a process (``watching``): it costs as much as a plain env's step, and a
step that leaks state does so from the first episodes on. Attributes shared by all branches on purpose (a cache,
a counter of all calls) are listed in ``shared_attributes``.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Any

from lmgym.core.state_copy import deep_copy

CLASS_KEY, MODE_KEY = "env_class", "mode"
_WARNED: set[tuple[str, str]] = set()
WATCHED_STEPS = 512  # steps of each env class watched for undeclared changes, per process
_WATCHED: dict[type, int] = {}


def class_name(cls: type) -> str:
    """``module.QualifiedName`` of ``cls``: the identity a state carries."""
    return f"{cls.__module__}.{cls.__qualname__}"


def check_declaration(cls: type) -> None:
    """One-line TypeError unless ``cls.episode_state`` (if the class sets one) is a dict of name -> value."""
    declared = cls.__dict__.get("episode_state")
    if declared is None:
        return
    if not isinstance(declared, Mapping) or not all(isinstance(name, str) and name for name in declared):
        raise TypeError(
            f"{cls.__qualname__}.episode_state must be a dict of attribute name -> start value; got {declared!r}"
        )
    reserved = {CLASS_KEY, MODE_KEY} & set(declared)
    if reserved:
        raise TypeError(f"{cls.__qualname__}.episode_state may not declare {min(reserved)!r} (saved already)")


@cache
def episode_defaults(cls: type) -> Mapping[str, Any]:
    """The episode attributes of ``cls`` and their start values, merged over its MRO (base classes first)."""
    merged: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        merged.update(klass.__dict__.get("episode_state") or {})
    return MappingProxyType(merged)


def start_values(cls: type) -> dict[str, Any]:
    """Fresh deep copies of the start values of ``cls``'s episode attributes."""
    return copy.deepcopy(dict(episode_defaults(cls)))


def save(env: Any, mode: str, copy: bool = True) -> dict[str, Any]:
    """A deep copy of ``env``'s episode attributes, with its class name and ``mode``. ``copy=False``: the
    attributes themselves, for a caller that restores a state (which rebinds every one) before the env steps
    again, and so becomes their only holder (the episode engine, episodes/env_state.py)."""
    state = {name: getattr(env, name) for name in episode_defaults(type(env))}
    return {CLASS_KEY: class_name(type(env)), MODE_KEY: mode, **(deep_copy(state) if copy else state)}


def restore(env: Any, mode: str, state: Any, copy: bool = True) -> None:
    """Set ``env``'s episode attributes from a ``save``d state; a state of another class or mode, or with
    missing or unknown keys, is a one-line error. ``copy=False``: the state's objects themselves, for a caller
    whose state nothing else holds (stepping the env then changes it in place; the episode engine)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a dict from get_state(); got {type(state).__name__}")
    names = episode_defaults(type(env))
    missing = [key for key in (CLASS_KEY, MODE_KEY, *names) if key not in state]
    if missing:
        raise ValueError(f"state is missing key {missing[0]!r}; pass a dict returned by get_state()")
    unknown = sorted(set(state) - {CLASS_KEY, MODE_KEY, *names})
    if unknown:
        raise ValueError(f"state has unknown key {unknown[0]!r}; pass a dict returned by get_state()")
    if state[CLASS_KEY] != class_name(type(env)):
        raise ValueError(f"state is from a {state[CLASS_KEY]} env; this env is a {class_name(type(env))}")
    if state[MODE_KEY] != mode:
        raise ValueError(f"state is from a mode={state[MODE_KEY]!r} env; this env has mode={mode!r}")
    values = {name: state[name] for name in names}
    for name, value in (deep_copy(values) if copy else values).items():
        setattr(env, name, value)


@cache
def _unwatched(cls: type) -> frozenset[str]:
    """The attributes of ``cls`` that steps may change: declared episode attributes and shared ones."""
    shared = {name for klass in cls.__mro__ for name in klass.__dict__.get("shared_attributes", ())}
    return frozenset(episode_defaults(cls)) | shared


def watching(cls: type) -> bool:
    """Whether this step of an env of ``cls`` is watched for undeclared changes (its class's first
    WATCHED_STEPS in this process); counts the step."""
    seen = _WATCHED.get(cls, 0)
    if seen >= WATCHED_STEPS:
        return False
    _WATCHED[cls] = seen + 1
    return True


def attribute_marks(env: Any) -> dict[str, tuple[int, int]]:
    """(identity, length or -1) of each attribute of ``env`` that is neither declared nor shared."""
    skip = _unwatched(type(env))
    return {
        name: (id(value), len(value) if isinstance(value, (list, dict, set)) else -1)
        for name, value in vars(env).items()
        if name not in skip
    }


def warn_undeclared_changes(env: Any, before: Mapping[str, tuple[int, int]], during: str = "step") -> None:
    """Warn (once per class and attribute) about undeclared attributes that changed since ``before``."""
    cls = type(env)
    for name, mark in attribute_marks(env).items():
        if before.get(name) == mark or (class_name(cls), name) in _WARNED:
            continue
        _WARNED.add((class_name(cls), name))
        warnings.warn(
            f"{cls.__qualname__}.{during}() changed attribute {name!r}, which is not in episode_state: "
            f"get_state()/set_state() do not save it, so branches share it; declare it in episode_state "
            f"(or in shared_attributes if every branch should share it)",
            RuntimeWarning,
            stacklevel=3,
        )
