"""The staged pipeline's table (examples/pipeline.py): each row's evaluation saved beside its stage, reused
while the settings it was measured under are unchanged, and the rows written as markdown and JSON; the PPO,
PRM-dense and MCTS rows each against the GRPO row, problem by problem (`versus_grpo`: the paired bootstrap 95%
interval of the accuracy difference, from the rows' eval.problems.jsonl)."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmgym.core.atomic_io import atomic_write_text
from lmgym.core.jsonl import read_json
from lmgym.core.problem_records import read_problem_records, saved_records
from lmgym.evaluation.statistics import interval_text, paired_bootstrap

# (stage, the row's title): the rows in table order, each adding to the one before
ROWS = (("base", "base CoT (greedy)"), ("sft", "SFT"), ("ppo", "+ PPO (ORM)"), ("grpo", "+ GRPO"),
        ("grpo_prm", "+ PRM-dense reward"), ("mcts", "+ MCTS at inference"))
EVAL_FILE = "eval.json"
BASELINE, COMPARED = "grpo", ("ppo", "grpo_prm", "mcts")  # each compared row against the GRPO row


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


def _correct_by_problem(stage_dir: Path, suite: str) -> dict[Any, float]:
    """problem index -> 0/1 of the stage's run on `suite`, from <stage>/eval.problems.jsonl ({} when missing)."""
    path = saved_records(stage_dir / EVAL_FILE)
    if path is None:
        return {}
    return {r["index"]: float(bool(r["runs"][0]["correct"])) for r in read_problem_records(path)
            if r.get("suite") == suite and r.get("runs")}


def versus_grpo(output_dir: str | Path, rows: Sequence[Mapping[str, Any]], suites: Sequence[str],
                seed: int = 0) -> dict[str, dict[str, dict]]:
    """stage -> suite -> {difference, low, high}: each of COMPARED's rows against the GRPO row on the problems
    both were evaluated on (paired bootstrap 95%); stages or suites without both rows' records are left out."""
    folder, stages = Path(output_dir), {r["stage"] for r in rows}
    if BASELINE not in stages:
        return {}
    out: dict[str, dict[str, dict]] = {}
    for stage in COMPARED:
        if stage not in stages:
            continue
        for suite in suites:
            base, own = _correct_by_problem(folder / BASELINE, suite), _correct_by_problem(folder / stage, suite)
            shared = [i for i in own if i in base]
            if len(shared) < 2:
                continue
            d = paired_bootstrap([own[i] for i in shared], [base[i] for i in shared], seed=seed)
            out.setdefault(stage, {})[suite] = {"difference": d.difference, "low": d.low, "high": d.high,
                                                "problems": d.problems}
    return out


def markdown_table(rows: Sequence[Mapping[str, Any]], suites: Sequence[str],
                   versus: Mapping[str, Mapping[str, Mapping]] | None = None) -> str:
    """Rows ({"title", "stage", "method", "results": {suite: {accuracy, tokens_per_problem, problems}}}) as
    a markdown table: accuracy (%) and tokens per problem for each of `suites`; with `versus` (`versus_grpo`),
    each suite's difference from the GRPO row in points with its 95% interval."""
    shown = ("accuracy", "tokens/problem") + (("vs + GRPO, points [95% CI]",) if versus else ())
    header = ["#", "stage", "method"] + [f"{s} {what}" for s in suites for what in shown]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for number, row in enumerate(rows, start=1):
        cells = [str(number), str(row["title"]), str(row["method"])]
        for suite in suites:
            result = row["results"].get(suite)
            cells += (["-", "-"] if result is None else
                      [f"{100 * result['accuracy']:.1f}%", f"{result['tokens_per_problem']:.1f}"])
            if versus:
                vs = versus.get(row["stage"], {}).get(suite)
                cells.append("-" if vs is None else interval_text(vs["difference"], vs["low"], vs["high"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def save_pipeline(rows: Sequence[Mapping[str, Any]], suites: Sequence[str], output_dir: str | Path,
                  about: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write `<output_dir>/pipeline.md` (a line saying what was evaluated, then the table) and
    `pipeline.json` ({"about", "suites", "rows", "versus_grpo"}); returns both paths."""
    folder = Path(output_dir)
    versus = versus_grpo(folder, rows, suites, int(about.get("seed", 0) or 0))
    folder.mkdir(parents=True, exist_ok=True)
    markdown, data = folder / "pipeline.md", folder / "pipeline.json"
    problems = ", ".join(f"{s}: {about['problems'][s]}" for s in suites) if "problems" in about else ""
    atomic_write_text(markdown, (f"Held-back problems ({problems})\n\n" if problems else "")
                      + markdown_table(rows, suites, versus))
    atomic_write_text(data, json.dumps(_normal({"about": dict(about), "suites": list(suites), "rows": list(rows),
                                                "versus_grpo": versus}), indent=2) + "\n")
    return markdown, data
