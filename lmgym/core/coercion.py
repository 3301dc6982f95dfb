"""A value as the type a config field declares: YAML files and command-line flags give strings, ints
where floats are meant and quoted booleans; `coerce(kind, value)` turns them into what the field says,
or raises `Mismatch` naming what was expected (the config turns that into a one-line error)."""
from __future__ import annotations

import math
import numbers
import types
import typing
from typing import Any

__all__ = ["BOOL_WORDS", "Mismatch", "coerce", "shown"]

BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


class Mismatch(Exception):
    """A value does not fit a declared type; the argument says what was expected ("an integer")."""


def shown(value: Any, limit: int = 80) -> str:
    """`repr(value)`, cut to about `limit` characters (a message stays one readable line)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 20]}... ({len(text)} characters)"


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in BOOL_WORDS:
        return BOOL_WORDS[value.strip().lower()]
    raise Mismatch("true or false (or yes/no, on/off, 1/0)")


def _to_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        raise Mismatch("a number")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise Mismatch("a number") from None
    if not math.isfinite(number):
        raise Mismatch("a finite number")
    return number


def _to_int(value: Any) -> int:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    try:
        number = _to_float(value)  # 1e3 or 2.0: an integer written as a float
    except Mismatch:
        raise Mismatch("an integer") from None
    if not number.is_integer():
        raise Mismatch("an integer")
    return int(number)


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):  # YAML reads unquoted yes/no/on/off/true/false as booleans
        raise Mismatch("a string (quote it: YAML reads unquoted yes/no/on/off as booleans)")
    if isinstance(value, numbers.Real):
        return str(value)
    raise Mismatch("a string")


SCALARS = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}
NOUNS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
PLURALS = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}


def coerce(kind: Any, value: Any) -> Any:
    """`value` as the declared type `kind` (bool, int, float, str, a tuple of those of fixed or any length
    (`tuple[float, ...]`; `tuple[str, ...]` also from one comma-separated string), `X | None`);
    raises Mismatch naming what was expected. Types it does not know pass the value through."""
    if kind in SCALARS:
        if value is None:
            raise Mismatch(NOUNS[kind])
        return SCALARS[kind](value)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return coerce(inner[0], value) if len(inner) == 1 else value
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:  # any length, one type
        expected = f"a list of {PLURALS.get(args[0], 'values')}"
        if args[0] is str and isinstance(value, str):  # "wandb,tensorboard": a list of names in one string
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, (list, tuple)):
            raise Mismatch(expected)
        try:
            return tuple(coerce(args[0], v) for v in value)
        except Mismatch as inner:
            raise Mismatch(f"{expected}, each {inner}") from None
    if origin is tuple and args and Ellipsis not in args:
        expected = f"a list of {len(args)} {PLURALS.get(args[0], 'values') if len(set(args)) == 1 else 'values'}"
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise Mismatch(expected)
        try:
            return tuple(coerce(a, v) for a, v in zip(args, value))
        except Mismatch as inner:
            raise Mismatch(f"{expected}, each {inner}") from None
    return value
