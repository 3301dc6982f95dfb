"""`log_completions` (TRL's name): each iteration's sampled episodes as rows of `<output_dir>/completions.jsonl`.

One JSON line per episode: the iteration, its group, the prompt and completion texts, the total reward, each
reward function's value, whether the env judged it correct, and whether it was cut off. The file is appended to
and flushed per iteration; a resumed run appends the iterations it plays again (rows carry their iteration), and
a new run in a used folder moves the earlier table aside with the metrics.
TRL logs the same table to its trackers; here the trackers are wandb and metrics.jsonl, and the table is a file
beside them that any of them can read.
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


def append_completions(run_dir: str | Path, iteration: int, trajectories: Sequence[Trajectory], tokenizer) -> Path:
    """Append one iteration's rows to `<run_dir>/completions.jsonl` (created with the folder); returns the path."""
    path = Path(run_dir) / COMPLETIONS
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in completion_rows(iteration, trajectories,
                                                                                           tokenizer))
    with open(path, "a", encoding="utf-8") as file:
        file.write(lines)
        file.flush()
    return path
