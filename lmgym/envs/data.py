"""Loading benchmark rows from a local JSONL file or the Hugging Face hub, with one-line errors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lmgym.core.jsonl import DataFileNotFoundError, MalformedRowError, read_jsonl  # noqa: F401 (lmgym.envs.data's names)


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
        return read_jsonl(resolve_data_file(data_path, split), required_fields)
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
