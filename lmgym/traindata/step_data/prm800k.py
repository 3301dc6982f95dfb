"""PRM800K's human step ratings (openai/prm800k's JSONL, one labelled solution a line) as step data.

Each record's steps offer rated completions (-1 / 0 / +1 -> labels 0.0 / 0.5 / 1.0; an unrated one keeps
None); the solution goes on with the chosen completion, or the human-written one (unrated: None). From
a record come:
- one RatedSteps for the path the labeller followed (its chosen steps and their labels),
- one RatedSteps per completion not on the path: the path before it, unlabelled (None), then it with
  its label, so every rated completion is labelled exactly once;
- a StepPair for every two completions of one step with different ratings (prefix: the path before the
  step; margin: the difference of their labels).
Records whose finish_reason is "bad_problem" are skipped. The question is the problem as
MATHStepwise-v0 shows it (problem + instruction + line break); steps end in a line break. The problem
id is a hash of the problem text, so different labellers' records of one problem share it.
"""
from __future__ import annotations

import hashlib
from itertools import combinations
from pathlib import Path
from typing import Any

from lmgym.buffers.step_pairs import RatedSteps, StepPair
from lmgym.core.jsonl import parse_jsonl
from lmgym.envs.data import DataFileNotFoundError
from lmgym.envs.math import MATH_INSTRUCTION

RATING_LABELS = {-1: 0.0, 0: 0.5, 1: 1.0, None: None}
SOURCE = "prm800k"


def rating_label(rating: Any) -> float | None:
    """-1/0/1 -> 0.0/0.5/1.0, None -> None; ValueError for anything else."""
    if isinstance(rating, bool) or rating not in RATING_LABELS:
        raise ValueError(f"rating must be -1, 0, 1 or null; got {rating!r}")
    return RATING_LABELS[rating]


def _step_text(text: Any) -> str:
    if not isinstance(text, str):
        raise ValueError(f"a completion's text must be a string; got {type(text).__name__}")
    return text if text.endswith("\n") else text + "\n"


def _completions(step: Any) -> list[tuple[str, float | None]]:
    if not isinstance(step, dict):
        raise ValueError(f"each label step must be an object; got {type(step).__name__}")
    completions = step.get("completions") or []
    if not isinstance(completions, list) or not all(isinstance(c, dict) for c in completions):
        raise ValueError("a step's completions must be a list of objects")
    return [(_step_text(c.get("text")), rating_label(c.get("rating"))) for c in completions]


def _chosen(step: dict, count: int) -> int | None:
    chosen = step.get("chosen_completion")
    if chosen is not None and (isinstance(chosen, bool) or not isinstance(chosen, int) or not 0 <= chosen < count):
        raise ValueError(f"chosen_completion must be null or an index into {count} completions; got {chosen!r}")
    return chosen


def record_items(record: Any, instruction: str = MATH_INSTRUCTION) -> list[RatedSteps | StepPair]:
    """The RatedSteps and StepPairs of one PRM800K record (see the module docstring); ValueError (one line)
    for a record not in the official format."""
    if not (isinstance(record, dict) and isinstance(record.get("question"), dict)
            and isinstance(record.get("label"), dict)):
        raise ValueError("a record must be an object with 'question' and 'label' objects")
    problem, steps = record["question"].get("problem"), record["label"].get("steps")
    if not isinstance(problem, str) or not problem.strip():
        raise ValueError("question.problem must be a non-empty string")
    if not isinstance(steps, list):
        raise ValueError("label.steps must be a list")
    if record["label"].get("finish_reason") == "bad_problem":
        return []
    question = problem + instruction + "\n"
    problem_id = f"{SOURCE}/{hashlib.sha1(problem.encode()).hexdigest()[:12]}"
    path: list[str] = []
    labels: list[float | None] = []
    items: list[RatedSteps | StepPair] = []
    for step in steps:
        completions = _completions(step)
        chosen = _chosen(step, len(completions))
        for index, (text, label) in enumerate(completions):
            if index != chosen:
                items.append(RatedSteps(question, (*path, text), (*[None] * len(path), label), SOURCE, problem_id))
        rated = [(text, label) for text, label in completions if label is not None]
        for (text_a, label_a), (text_b, label_b) in combinations(rated, 2):
            if label_a != label_b and text_a != text_b:
                (better, high), (worse, low) = sorted([(text_a, label_a), (text_b, label_b)], key=lambda t: -t[1])
                items.append(StepPair(question, tuple(path), better, worse, high - low, SOURCE, problem_id))
        human = step.get("human_completion")
        if chosen is not None:
            path.append(completions[chosen][0])
            labels.append(completions[chosen][1])
        elif isinstance(human, dict):
            path.append(_step_text(human.get("text")))
            labels.append(None)
        else:
            break  # the labeller stopped here (an error found, or gave up)
    if path:
        items.insert(0, RatedSteps(question, tuple(path), tuple(labels), SOURCE, problem_id))
    return items


def load_prm800k(path: str | Path, instruction: str = MATH_INSTRUCTION) -> list[RatedSteps | StepPair]:
    """Every record's RatedSteps and StepPairs from a PRM800K JSONL file (blank lines skipped); a bad line
    is one ValueError naming file:line and the problem."""
    path = Path(path)
    if not path.is_file():
        raise DataFileNotFoundError(f"PRM800K file not found: {path}")
    return [item for items in parse_jsonl(path, lambda record: record_items(record, instruction),
                                                          what="PRM800K records") for item in items]
