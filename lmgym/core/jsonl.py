"""Reading JSON and JSON Lines data files: the one reader every data file of the project goes through.

Every problem is one exception (ValueError, or the ValueError subclass the caller passes as `error`)
with a one-line message "<path>:<line>: <problem>" ("<path>: <problem>" when it concerns the whole file):
  * bytes that are not UTF-8 (the message names the byte and its offset in the file);
  * a line that is not JSON, nests deeper than MAX_DEPTH, or holds an integer too long to convert;
  * a record the caller's `parse` rejects (with a ValueError or TypeError);
  * no record at all: an empty (or blank) data file is "<path>: no <what>", never an empty list,
    because training or evaluating on nothing is never intended.
"""
from __future__ import annotations

import gzip
import json
import re
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from lmgym.core.messages import one_line

T = TypeVar("T")
MAX_DEPTH = 100  # far deeper than any record of ours; far below what would exhaust Python's stack
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def nesting_depth(text: str) -> int:
    """How deeply `text`'s JSON arrays and objects nest (brackets inside strings ignored). Cheap: a
    text with at most MAX_DEPTH opening brackets is not scanned (its depth cannot exceed their count)."""
    opening = text.count("[") + text.count("{")
    if opening <= MAX_DEPTH:
        return opening
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text)).encode("ascii")
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max(initial=0))


def loads(text: str, path: str | Path, line: int | None = None, error: type[ValueError] = ValueError,
          parse_constant: Callable[[str], object] | None = None) -> object:
    """The JSON value of `text` (line `line` of `path`, or the whole file when None); any problem is
    `error("<path>:<line>: <problem>")`. `parse_constant` as in `json.loads` (NaN, Infinity)."""
    where = f"{path}:{line}" if line is not None else str(path)
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise error(f"{where}: nested {depth} levels deep, more than the {MAX_DEPTH} allowed")
    try:
        return json.loads(text, parse_constant=parse_constant)
    except json.JSONDecodeError as err:
        raise error(f"{path}:{line if line is not None else err.lineno}: not valid JSON ({err.msg})") from None
    except RecursionError:
        raise error(f"{where}: nested too deeply to read") from None
    except ValueError as err:  # an integer too long to convert, or a refusal of parse_constant
        text = str(err)
        if "integer string conversion" in text:
            text = f"an integer with more than {sys.get_int_max_str_digits()} digits"
        raise error(f"{where}: {one_line(text)}") from None


def numbered_lines(path: str | Path, error: type[ValueError] = ValueError) -> Iterator[tuple[int, str]]:
    """(1-based number, text) of each line of `path`, decoded as UTF-8 one line at a time. A path ending in `.gz`
    is read through gzip (offsets then count the unpacked bytes); a damaged one is one `error("<path>: ...")`."""
    offset = 0
    for number, raw in enumerate(_raw_lines(path, error), start=1):
        yield number, _decoded(raw, path, number, offset, error)
        offset += len(raw)


def _raw_lines(path: str | Path, error: type[ValueError]) -> Iterator[bytes]:
    if not str(path).endswith(".gz"):
        with open(path, "rb") as handle:
            yield from handle
        return
    with gzip.open(path, "rb") as handle:
        while True:
            try:
                raw = handle.readline()
            except (OSError, EOFError, zlib.error) as err:  # not gzip, truncated, or corrupt
                raise error(f"{path}: not a readable gzip file ({one_line(str(err)) or type(err).__name__})") from None
            if not raw:
                return
            yield raw


def _decoded(raw: bytes, path: str | Path, line: int, offset: int, error: type[ValueError]) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _not_utf8(raw, err.start, path, line, offset, error) from None


def _not_utf8(raw: bytes, start: int, path: str | Path, line: int, offset: int, error: type[ValueError]) -> ValueError:
    return error(f"{path}:{line}: not UTF-8 text (byte 0x{raw[start]:02x} at offset {offset + start} of the file)")


def kept_file(path: str | Path) -> Path | None:
    """`path` when it is a file, else its gzip beside it (`<path>.gz`) when that is, else None."""
    plain = Path(path)
    packed = plain.with_name(plain.name + ".gz")
    return plain if plain.is_file() else packed if packed.is_file() else None


def existing_file(path: str | Path, what: str) -> Path:
    """`path` as a Path; FileNotFoundError "no <what> file at <path>" when it is not a file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {what} file at {path}")
    return path


def parse_jsonl(path: str | Path, parse: Callable[[object], T], error: type[ValueError] = ValueError,
                what: str = "records") -> list[T]:
    """`parse(record)` for each non-blank line's JSON value, in order. A line that is not UTF-8 or not
    JSON, or that `parse` rejects with a ValueError or TypeError, is one `error("<path>:<line>: <problem>")`;
    a file without a record is `error("<path>: no <what>")`."""
    path = Path(path)
    out = []
    for number, line in numbered_lines(path, error):
        if not line.strip():
            continue
        record = loads(line, path, number, error)
        try:
            out.append(parse(record))
        except (ValueError, TypeError) as err:
            raise error(f"{path}:{number}: {one_line(str(err))}") from None
    if not out:
        raise error(f"{path}: no {what}")
    return out


def read_json(path: str | Path, error: type[ValueError] = ValueError) -> object:
    """The JSON value of a whole file, with the errors of `loads` (a byte that is not UTF-8 is named by
    its line and offset)."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _not_utf8(raw, err.start, path, raw.count(b"\n", 0, err.start) + 1, 0, error) from None
    return loads(text, path, None, error)


class DataFileNotFoundError(FileNotFoundError):
    """A data file (or the data set on the hub) could not be found."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else super().__str__()


class MalformedRowError(ValueError):
    """A data row is not valid JSON, not an object, or lacks a required field."""


def read_jsonl(path: str | Path, required_fields: Sequence[str] = (), what: str = "rows") -> list[dict]:
    """Read a JSONL file into a list of dicts, checking each row has ``required_fields``.

    Blank lines are skipped. Read by `lmgym.core.jsonl.parse_jsonl`: every problem is one
    MalformedRowError "<path>:<line>: <problem>", and a file without rows is "<path>: no <what>"
    (training or evaluating on nothing is never intended).
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"data file not found: {path}")

    def checked(row: object) -> dict:
        if not isinstance(row, dict):
            raise ValueError(f"expected a JSON object, got {type(row).__name__}")
        for field in required_fields:
            if row.get(field) is None:
                raise ValueError(f"missing field {field!r}")
        return row

    return parse_jsonl(path, checked, error=MalformedRowError, what=what)
