"""`log_completions` (TRL's name): each iteration's sampled episodes as rows of `<output_dir>/completions.jsonl`.

One JSON line per episode: the iteration, its group, the prompt and completion texts, the total reward, each
reward function's value, whether the env judged it correct, and whether it was cut off. The file is appended to
and flushed per iteration; a resumed run appends the iterations it plays again (rows carry their iteration), and
a new run in a used folder moves the earlier table aside with the metrics.
As TRL, the table also goes to the trackers of `report_to` (wandb, TensorBoard, MLflow, trackio): the trainer
keeps the rows `append_completions` returns as `logged_completions`, which each tracker sends
(training/completions_table.py).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from lmgym.buffers import Trajectory
from lmgym.training.run_logger import COMPLETIONS


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
