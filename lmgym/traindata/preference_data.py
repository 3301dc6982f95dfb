"""Preference data for DPO: (prompt, chosen, rejected) text triples, from JSONL or a `datasets` dataset.

`prompt` is the env-style observation (a policy encodes it with `format_prompt`); `chosen` and
`rejected` are completions of it, the first preferred. A JSONL file holds one object a line with the
fields "prompt", "chosen" and "rejected" (other fields are ignored, e.g. an id or a source).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lmgym.core.jsonl import parse_jsonl
from lmgym.core.messages import one_line

FIELDS = ("prompt", "chosen", "rejected")


@dataclass(frozen=True)
class PreferencePair:
    """Under `prompt`, the completion `chosen` is preferred to `rejected` (they must differ)."""

    prompt: str
    chosen: str
    rejected: str

    def __post_init__(self) -> None:
        for name in FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ValueError(f"PreferencePair.{name} must be a string, got {type(value).__name__}")
        if self.chosen == self.rejected:
            raise ValueError(f"PreferencePair: chosen and rejected are the same text ({self.chosen[:60]!r})")


def pair_from_record(record: Any) -> PreferencePair:
    """The pair a row describes (a mapping with "prompt", "chosen", "rejected" strings); ValueError
    (one line, no location) otherwise."""
    if not isinstance(record, Mapping):
        raise ValueError(f"expected an object with fields {', '.join(FIELDS)}, got {type(record).__name__}")
    missing = [name for name in FIELDS if name not in record]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    for name in FIELDS:
        if isinstance(record[name], list):
            raise ValueError(f"\"{name}\" is a list (conversational rows); give it as text")
    return PreferencePair(*(record[name] for name in FIELDS))


def _jsonl_pairs(path: Path) -> list[PreferencePair]:
    return parse_jsonl(path, pair_from_record, what="preference pairs")


def _dataset_pairs(rows: Iterable, name: str) -> list[PreferencePair]:
    pairs = []
    for index, row in enumerate(rows):
        try:
            pairs.append(pair_from_record(row))
        except ValueError as err:
            raise ValueError(f"{name} row {index}: {one_line(str(err))}") from None
    return pairs


def load_preference_pairs(source: str | Path | Iterable, split: str = "train") -> list[PreferencePair]:
    """Preference pairs from a JSONL file path, a `datasets` dataset (or any iterable of row mappings),
    or a Hugging Face hub dataset name (loaded with `datasets.load_dataset(name, split=split)`).

    A bad line is one ValueError naming `file:line` (a bad dataset row: its index) and the problem; an
    empty source is a ValueError too.
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_file():
            pairs, name = _jsonl_pairs(path), str(path)
        elif path.suffix in (".jsonl", ".json") or path.exists():
            raise FileNotFoundError(f"no preference data file at {path}")
        else:
            try:
                from datasets import load_dataset

                dataset = load_dataset(str(source), split=split)
            except Exception as err:  # network, missing package, missing split ...
                raise ValueError(f"could not load preference data {str(source)!r} (not a file; from the hub, split "
                                 f"{split!r}): {one_line(str(err))[:200] or type(err).__name__}") from None
            name = f"{source} ({split})"
            pairs = _dataset_pairs(dataset, name)
    else:
        name = type(source).__name__
        pairs = _dataset_pairs(source, name)
    if not pairs:
        raise ValueError(f"{name}: no preference pairs")
    return pairs


def save_preference_pairs(pairs: Iterable[PreferencePair], path: str | Path) -> Path:
    """Write pairs as JSONL (the format `load_preference_pairs` reads); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [asdict(pair) for pair in pairs]
    with open(path, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
