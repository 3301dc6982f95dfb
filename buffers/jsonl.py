"""Reading JSON Lines files whose every line is one record, with errors that name the file and line."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def parse_jsonl(path: str | Path, parse: Callable[[object], T]) -> list[T]:
    """`parse(record)` for each non-blank line's JSON value, in order. A line that is not JSON, or that
    `parse` rejects with a ValueError or TypeError, is one ValueError "<path>:<line>: <problem>"."""
    path = Path(path)
    out = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number}: not valid JSON ({err.msg})") from None
            try:
                out.append(parse(record))
            except (ValueError, TypeError) as err:
                raise ValueError(f"{path}:{number}: {' '.join(str(err).split())}") from None
    return out
