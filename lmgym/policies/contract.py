"""Whether an object satisfies a policy protocol (policies/base.py): the members it lacks, and the methods it
has that cannot be called as the protocol declares them. Trainers refuse a policy that fails, in one line."""
from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, TypeVar

from typing_extensions import get_protocol_members

T = TypeVar("T")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def missing_members(obj: Any, protocol: type) -> list[str]:
    """The members of `protocol` that `obj` lacks, sorted."""
    return sorted(name for name in get_protocol_members(protocol) if not hasattr(obj, name))


def _declared_calls(declared: inspect.Signature) -> Iterator[tuple[str, list, dict]]:
    """(how, args, kwargs) of the calls a caller may make by the declared signature (its `self` dropped):
    the required arguments only, every argument by position, every argument by name."""
    params = list(declared.parameters.values())[1:]
    positional = [p for p in params if p.kind in _POSITIONAL]
    keyword_only = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
    required = [p for p in positional if p.default is p.empty]
    yield "with the required arguments only", [None] * len(required), \
        {p.name: None for p in keyword_only if p.default is p.empty}
    yield "with every argument by position", [None] * len(positional), {p.name: None for p in keyword_only}
    by_position = [p for p in positional if p.kind is inspect.Parameter.POSITIONAL_ONLY]
    yield "with every argument by name", [None] * len(by_position), \
        {p.name: None for p in params
         if p not in by_position and p.kind in (*_POSITIONAL, inspect.Parameter.KEYWORD_ONLY)}


def call_problem(declared: inspect.Signature, member: Any) -> str | None:
    """Why `member` cannot be called as `declared` says (None: it can, or its signature cannot be read)."""
    if not callable(member):
        return "not callable"
    try:
        actual = inspect.signature(member)
    except (TypeError, ValueError):  # a builtin without a readable signature: nothing to hold against it
        return None
    for how, args, kwargs in _declared_calls(declared):
        try:
            actual.bind(*args, **kwargs)
        except TypeError as err:
            return f"cannot be called {how} ({err})"
    return None


def incompatible_members(obj: Any, protocol: type) -> list[str]:
    """'name(): why' for each method of `protocol` that `obj` has but cannot be called as declared."""
    out = []
    for name in sorted(get_protocol_members(protocol)):
        declared = inspect.getattr_static(protocol, name, None)
        if not inspect.isfunction(declared) or not hasattr(obj, name):
            continue
        problem = call_problem(inspect.signature(declared), getattr(obj, name))
        if problem is not None:
            out.append(f"{name}() {problem}")
    return out


def check_contract(obj: T, protocol: type, who: str) -> T:
    """`obj` when it satisfies `protocol`, else a one-line TypeError from `who` naming what is missing or
    cannot be called as declared."""
    missing, incompatible = missing_members(obj, protocol), incompatible_members(obj, protocol)
    if not missing and not incompatible:
        return obj
    problems = ([f"it lacks {', '.join(missing)}"] if missing else []) + incompatible
    raise TypeError(f"{who}: {type(obj).__name__} is not a {protocol.__name__} ({protocol.__module__}): "
                    + "; ".join(problems))
