"""What a capped curve evaluation has finished, kept run by run so a killed evaluation loses at most the run it was in.

`evaluate_curves` runs every (method, budget) in turn over all its problems; a long one (MCTS with a generative
verifier as its value: over 18 minutes on an H200) used to save nothing until its last run. With a records path,
each finished run is appended to `<records>.partial.jsonl` beside it (one line: the run's key, its row and its
per-problem outcomes) and flushed; a later call with the same settings reads the lines back and runs only the
rest. A run is the same when its key is: the method's full settings (the budget among them), the problems
(episodes, offset), the batch size and the seed, so a changed setting runs again. The scorer is not in the key:
a caller that swaps the verifier deletes the file (verifier_loop's --restart does). A line cut short by a kill is
skipped; the file is removed once the whole evaluation is written.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lmgym.core.atomic_io import append_synced
from lmgym.core.problem_records import records_file
from lmgym.search.settings import SearchSettings

PARTIAL_SUFFIX = ".partial.jsonl"


def partial_path(records_path: str | os.PathLike) -> Path:
    """The progress file beside a records file (`curves.json` or `curves.problems.jsonl` ->
    `curves.problems.partial.jsonl`)."""
    records = records_file(records_path)
    return records.with_name(records.name.removesuffix(".jsonl") + PARTIAL_SUFFIX)


def run_key(settings: SearchSettings, episodes: int, offset: int, batch_problems: int, seed: int) -> str:
    """A run's identity: its settings (every field, the budget among them), the problems, the batch size and seed."""
    return json.dumps({"settings": dataclasses.asdict(settings), "episodes": episodes, "offset": offset,
                       "batch_problems": batch_problems, "seed": seed}, sort_keys=True, default=str)


def finished_runs(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """key -> {row, records} of every whole line of the progress file (none when it is missing); a line that does
    not parse (a kill inside its write) is skipped."""
    path = Path(path)
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        try:
            saved = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(saved, dict) and {"key", "row", "records"} <= set(saved):
            out[saved["key"]] = {"row": saved["row"], "records": saved["records"]}
    return out


def save_run(path: str | os.PathLike, key: str, row: Mapping[str, Any], records: list[dict]) -> None:
    """Append one finished run (its row and per-problem records) to the progress file, flushed to disk."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    append_synced(path, json.dumps({"key": key, "row": dict(row), "records": records}, ensure_ascii=False) + "\n")
