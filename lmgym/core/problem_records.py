"""Per-problem outcome records: the file beside an evaluation's aggregate JSON from which its numbers can be
recomputed (benchmarks/report.py does). A records file may be kept gzipped (`<name>.problems.jsonl.gz`, as the
saved results are): every reader here takes either.

`<name>.json` (the aggregates) gets `<name>.problems.jsonl` next to it: one JSON object a line, one line per
problem, each with its `kind` (which evaluation wrote it, so a reader knows how to recompute), the problem's
`index` or `id`, its `gold`, the prediction(s) and their correctness; sampled evaluations add `n` (samples)
and `c` (correct ones). Every evaluation writes through `write_problem_records`, so the files share one form.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lmgym.core.atomic_io import atomic_write_text
from lmgym.core.jsonl import kept_file, read_jsonl

SUFFIX = ".problems.jsonl"
GZIP_SUFFIX = SUFFIX + ".gz"


def problems_path(aggregate_path: str | os.PathLike) -> Path:
    """The records file that belongs beside `aggregate_path`: `eval.json` -> `eval.problems.jsonl`."""
    path = Path(aggregate_path)
    return path.with_name(path.stem + SUFFIX)


def records_file(path: str | os.PathLike) -> Path:
    """`path` itself when it names a records file (`.problems.jsonl` or `.problems.jsonl.gz`), else the records file
    beside the aggregate it names (`problems_path`)."""
    path = Path(path)
    return path if path.name.endswith((SUFFIX, GZIP_SUFFIX)) else problems_path(path)


def saved_records(aggregate_path: str | os.PathLike) -> Path | None:
    """The records file kept beside `aggregate_path`: `<name>.problems.jsonl`, else its gzip, else None."""
    return kept_file(problems_path(aggregate_path))


def aggregate_of(records_path: str | os.PathLike) -> Path:
    """The aggregate a records file belongs beside: `eval.problems.jsonl(.gz)` -> `eval.json`."""
    path = Path(records_path)
    return path.with_name(path.name.removesuffix(".gz").removesuffix(SUFFIX) + ".json")


def write_problem_records(path: str | os.PathLike, kind: str, records: Iterable[Mapping[str, Any]]) -> Path:
    """Write `records` (one per problem, in order), each tagged `kind`, to `path` atomically (a `.json`
    aggregate's path is turned into its `problems_path`); returns the path written. Records are written plain: a
    `.gz` path is a ValueError (gzip them afterwards, as saved results are)."""
    path = records_file(path)
    if path.name.endswith(".gz"):
        raise ValueError(f"{path}: problem records are written as plain {SUFFIX}; gzip the file afterwards")
    # `kind` names the writer, even when a record read from another kind's file still carries that file's kind
    lines = [json.dumps({"kind": kind, **{k: v for k, v in record.items() if k != "kind"}}, ensure_ascii=False) + "\n"
             for record in records]
    if not lines:
        raise ValueError(f"{path}: no problem records to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(lines))
    return path


def read_problem_records(path: str | os.PathLike) -> list[dict]:
    """The records of a `.problems.jsonl` file or its gzip (each must name its `kind`); a bad line is one
    MalformedRowError "<path>:<line>: <problem>"."""
    return read_jsonl(path, required_fields=("kind",), what="problem records")
