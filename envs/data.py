"""Loading benchmark rows from a local JSONL file or the Hugging Face hub, with one-line errors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


class DataFileNotFoundError(FileNotFoundError):
    """A data file (or the data set on the hub) could not be found."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else super().__str__()


class MalformedRowError(ValueError):
    """A data row is not valid JSON, not an object, or lacks a required field."""


def read_jsonl(path: str | Path, required_fields: Sequence[str] = ()) -> list[dict]:
    """Read a JSONL file into a list of dicts, checking each row has ``required_fields``.

    Blank lines are skipped. Errors name the file and the 1-based line number.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"data file not found: {path}")
    rows: list[dict] = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise MalformedRowError(f"{path} line {line_number}: not valid JSON") from None
            if not isinstance(row, dict):
                raise MalformedRowError(
                    f"{path} line {line_number}: expected a JSON object, got {type(row).__name__}"
                )
            for field in required_fields:
                if row.get(field) is None:
                    raise MalformedRowError(f"{path} line {line_number}: missing field {field!r}")
            rows.append(row)
    return rows


def resolve_data_file(data_path: str | Path, split: str) -> Path:
    """``data_path`` itself if it is a file path, or ``data_path/{split}.jsonl`` if it is a folder."""
    path = Path(data_path).expanduser()
    return path / f"{split}.jsonl" if path.is_dir() else path


def load_rows(
    name: str,
    data_path: str | Path | None,
    split: str,
    hub_id: str,
    hub_config: str | None,
    required_fields: Sequence[str],
) -> list[dict]:
    """Rows of a data set: from a local JSONL when ``data_path`` is given, else from the hub.

    ``name`` is the data set's display name, used in error messages. The hub is only
    contacted (through a lazy ``datasets`` import) when ``data_path`` is None.
    """
    if data_path is not None:
        path = resolve_data_file(data_path, split)
        rows = read_jsonl(path, required_fields)
        if not rows:
            raise MalformedRowError(f"{path}: no rows")
        return rows
    try:
        from datasets import load_dataset

        dataset = load_dataset(hub_id, hub_config, split=split)
    except Exception as error:  # network, auth, missing split, missing package ...
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise DataFileNotFoundError(
            f"could not load {name} ({hub_id}, split {split!r}) from the Hugging Face hub: {reason}; "
            f"pass data_path=<local .jsonl file> to load it from disk"
        ) from error
    missing = [field for field in required_fields if field not in dataset.column_names]
    if missing:
        raise MalformedRowError(f"{name} from the hub ({hub_id}) has no field {missing[0]!r}")
    return [dict(row) for row in dataset]
