"""The staged pipeline's table (examples/pipeline.py): each row's evaluation saved beside its stage, reused
while the settings it was measured under are unchanged, and the rows written as markdown and JSON."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmgym.core.atomic_io import atomic_write_text
from lmgym.core.jsonl import read_json

# (stage, the row's title): the rows in table order, each adding to the one before
ROWS = (("base", "base CoT (greedy)"), ("sft", "SFT"), ("grpo", "+ GRPO"),
        ("grpo_prm", "+ PRM-dense reward"), ("mcts", "+ MCTS at inference"))
EVAL_FILE = "eval.json"


def _normal(value: Any) -> Any:
    """`value` as JSON reads it back (tuples become lists), so saved and current settings compare equal."""
    return json.loads(json.dumps(value))


def load_row(stage_dir: str | Path, settings: Mapping[str, Any]) -> dict | None:
    """The row saved in `<stage_dir>/eval.json` when it was measured under `settings`; None when there is
    none, or it was measured under other settings (or the file is unreadable)."""
    path = Path(stage_dir) / EVAL_FILE
    try:
        saved = read_json(path)
    except (OSError, ValueError):  # read_json's errors (too deep, not UTF-8, ...) are ValueErrors
        return None
    if not isinstance(saved, dict) or saved.get("settings") != _normal(dict(settings)):
        return None
    return saved.get("row")


def save_row(stage_dir: str | Path, row: Mapping[str, Any], settings: Mapping[str, Any]) -> Path:
    """Write `row` and the `settings` it was measured under to `<stage_dir>/eval.json` (atomically)."""
    path = Path(stage_dir) / EVAL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"settings": _normal(dict(settings)), "row": _normal(dict(row))}, indent=2)
                      + "\n")
    return path


def markdown_table(rows: Sequence[Mapping[str, Any]], suites: Sequence[str]) -> str:
    """Rows ({"title", "stage", "method", "results": {suite: {accuracy, tokens_per_problem, problems}}}) as
    a markdown table: accuracy (%) and tokens per problem for each of `suites`."""
    header = ["#", "stage", "method"] + [f"{s} {what}" for s in suites for what in ("accuracy", "tokens/problem")]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for number, row in enumerate(rows, start=1):
        cells = [str(number), str(row["title"]), str(row["method"])]
        for suite in suites:
            result = row["results"].get(suite)
            cells += (["-", "-"] if result is None else
                      [f"{100 * result['accuracy']:.1f}%", f"{result['tokens_per_problem']:.1f}"])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def save_pipeline(rows: Sequence[Mapping[str, Any]], suites: Sequence[str], output_dir: str | Path,
                  about: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write `<output_dir>/pipeline.md` (a line saying what was evaluated, then the table) and
    `pipeline.json` ({"about", "suites", "rows"}); returns both paths."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    markdown, data = folder / "pipeline.md", folder / "pipeline.json"
    problems = ", ".join(f"{s}: {about['problems'][s]}" for s in suites) if "problems" in about else ""
    atomic_write_text(markdown, (f"Held-back problems ({problems})\n\n" if problems else "")
                      + markdown_table(rows, suites))
    atomic_write_text(data, json.dumps(_normal({"about": dict(about), "suites": list(suites), "rows": list(rows)}),
                                       indent=2) + "\n")
    return markdown, data
