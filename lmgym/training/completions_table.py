"""log_completions' table for the trackers: an iteration's rows (training/completions_log.py) as columns and
data, with each reward function's value as a column `rewards/<fn>` (TRL's table has a column per function).

The trainer keeps the rows of its last iteration as `trainer.logged_completions` (rank 0, when log_completions
is on); each tracker sends them in `on_iteration_end`, the iteration they belong to, so the trackers get the
table as often as completions.jsonl does (every iteration).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

FIXED = ("iteration", "group", "prompt", "completion", "reward")
TAIL = ("correct", "truncated")


def table_of(rows: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """(columns, data) of completions rows: the fixed columns, `rewards/<fn>` per reward function (in order of
    first appearance; None where a row lacks it), then correct and truncated."""
    functions = list(dict.fromkeys(name for row in rows for name in row.get("rewards") or {}))
    columns = [*FIXED, *(f"rewards/{name}" for name in functions), *TAIL]
    data = [[*(row.get(key) for key in FIXED), *((row.get("rewards") or {}).get(name) for name in functions),
             *(row.get(key) for key in TAIL)] for row in rows]
    return columns, data


def completions_table(trainer) -> tuple[list[str], list[list[Any]]] | None:
    """The table of the iteration `trainer` just finished, or None (log_completions off, another rank, or rows
    of another iteration)."""
    rows = getattr(trainer, "logged_completions", None)
    if not rows or rows[0].get("iteration") != trainer.iteration:
        return None
    return table_of(rows)
