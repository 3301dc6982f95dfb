"""`log_completions` (TRL's name): each iteration's sampled episodes as rows of `<output_dir>/completions.jsonl`.

One JSON line per episode: the iteration, its group, the prompt and completion texts, the total reward, each
reward function's value, whether the env judged it correct, and whether it was cut off. The file is appended to
and flushed per iteration; a resumed run appends the iterations it plays again (rows carry their iteration), and
a new run in a used folder moves the earlier table aside with the metrics.
As TRL, the table also goes to the trackers of `report_to` (wandb, TensorBoard, MLflow, trackio): the trainer
keeps the rows of its last iteration as `trainer.logged_completions` (rank 0, when log_completions is on); each
tracker sends them in `on_iteration_end`, the iteration they belong to, as `completions_table` lays them out:
each reward function's value as a column `rewards/<fn>` (TRL's table has a column per function).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmgym.buffers import Trajectory

COMPLETIONS = "completions.jsonl"  # the table's file in the run folder
FIXED = ("iteration", "group", "prompt", "completion", "reward")  # the tracker table's columns before rewards/<fn>
TAIL = ("correct", "truncated")  # and after


def completion_rows(iteration: int, trajectories: Sequence[Trajectory], tokenizer) -> list[dict]:
    """The table's rows for one iteration's trajectories (prompts decoded without special tokens)."""
    prompts = tokenizer.batch_decode([t.prompt_ids for t in trajectories], skip_special_tokens=True)
    rows = []
    for prompt, t in zip(prompts, trajectories):
        outcome = t.outcome
        rows.append({"iteration": iteration, "group": t.group_id, "prompt": prompt, "completion": t.text,
                     "reward": float(t.reward),
                     "rewards": {name: value for name, value in dict(outcome.reward_components).items()},
                     "correct": outcome.correct, "truncated": bool(t.truncated)})
    return rows


def append_completions(run_dir: str | Path, iteration: int, trajectories: Sequence[Trajectory],
                       tokenizer) -> list[dict]:
    """Append one iteration's rows to `<run_dir>/completions.jsonl` (created with the folder); returns the rows."""
    path = Path(run_dir) / COMPLETIONS
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = completion_rows(iteration, trajectories, tokenizer)
    with open(path, "a", encoding="utf-8") as file:
        file.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        file.flush()
    return rows


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
