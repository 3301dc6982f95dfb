"""Step-level training data for a process reward model: preferred-step pairs and rated step sequences.

`StepPair`: under one prefix of steps, a better next step (`chosen`) and a worse sibling (`rejected`).
`RatedSteps`: a solution's steps with a label in [0, 1] per step (None: unrated). `question` is the
env's reset observation, verbatim; each step is an action's text (normally ending in "\\n"), so a PRM
encodes them as the episode engine builds a branch. Files are JSONL, one item a line with a "kind".
"""
from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

from lmgym.core.jsonl import existing_file, parse_jsonl


def _check_text(owner: str, name: str, value) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{owner}.{name} must be a string, got {type(value).__name__}")


def _as_texts(owner: str, name: str, value) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{owner}.{name} must be a list of strings, got {type(value).__name__}")
    for i, text in enumerate(value):
        if not isinstance(text, str):
            raise ValueError(f"{owner}.{name}[{i}] must be a string, got {type(text).__name__}")
    return tuple(value)


@dataclass(frozen=True)
class StepPair:
    """Under `question` and the steps `prefix`, `chosen` is a better next step than `rejected`.

    margin: how much better (e.g. a difference of rollout labels); a trainer may subtract it from the
    logit difference. source: where the pair came from (e.g. "gold_corruption", "shepherd").
    problem_id: the problem it belongs to (held-out splits keep a problem on one side).
    """

    question: str
    prefix: tuple[str, ...]
    chosen: str
    rejected: str
    margin: float = 1.0
    source: str = ""
    problem_id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", _as_texts("StepPair", "prefix", self.prefix))
        for name in ("question", "chosen", "rejected", "source", "problem_id"):
            _check_text("StepPair", name, getattr(self, name))
        if isinstance(self.margin, bool) or not isinstance(self.margin, (int, float)) or not math.isfinite(self.margin):
            raise ValueError(f"StepPair.margin must be a finite number, got {self.margin!r}")
        object.__setattr__(self, "margin", float(self.margin))
        if self.chosen == self.rejected:
            raise ValueError(f"StepPair: chosen and rejected are the same step ({self.chosen[:60]!r})")


@dataclass(frozen=True)
class RatedSteps:
    """A solution's `steps` under `question`, each with a label in [0, 1] (None: not rated)."""

    question: str
    steps: tuple[str, ...]
    labels: tuple[float | None, ...]
    source: str = ""
    problem_id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", _as_texts("RatedSteps", "steps", self.steps))
        for name in ("question", "source", "problem_id"):
            _check_text("RatedSteps", name, getattr(self, name))
        if isinstance(self.labels, str) or not isinstance(self.labels, (list, tuple)):
            raise ValueError(f"RatedSteps.labels must be a list, got {type(self.labels).__name__}")
        if len(self.labels) != len(self.steps):
            raise ValueError(f"RatedSteps: {len(self.steps)} steps but {len(self.labels)} labels")
        labels = []
        for i, label in enumerate(self.labels):
            ok = label is None or (not isinstance(label, bool) and isinstance(label, (int, float)) and 0 <= label <= 1)
            if not ok:
                raise ValueError(f"RatedSteps.labels[{i}] must be a number in [0, 1] or null, got {label!r}")
            labels.append(None if label is None else float(label))
        object.__setattr__(self, "labels", tuple(labels))


StepItem = StepPair | RatedSteps
KINDS: dict[str, type] = {"pair": StepPair, "rated": RatedSteps}


def _record(item: StepItem) -> dict:
    kind = next((k for k, cls in KINDS.items() if isinstance(item, cls)), None)
    if kind is None:
        raise ValueError(f"save_step_data: items must be StepPair or RatedSteps, got {type(item).__name__}")
    return {"kind": kind, **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(item).items()}}


def save_step_data(path: str | Path, items: Iterable[StepItem]) -> None:
    """Write `items` as JSONL (one item a line, with "kind": "pair" or "rated"); parent folders are made."""
    records = [_record(item) for item in items]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def _item(record) -> StepItem:
    """The item a decoded JSON line describes; ValueError (one line, no location) otherwise."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    kind = record.get("kind")
    if kind not in KINDS:
        raise ValueError(f"\"kind\" must be one of {', '.join(map(repr, KINDS))}, got {kind!r}")
    cls = KINDS[kind]
    names = [f.name for f in fields(cls)]
    unknown = sorted(set(record) - set(names) - {"kind"})
    if unknown:
        raise ValueError(f"unknown field(s) for a {kind}: {', '.join(unknown)}")
    required = [f.name for f in fields(cls) if f.default is MISSING]
    missing = [n for n in required if n not in record]
    if missing:
        raise ValueError(f"a {kind} needs the field(s) {', '.join(missing)}")
    return cls(**{k: v for k, v in record.items() if k != "kind"})


def load_step_data(path: str | Path) -> list[StepItem]:
    """The items of a JSONL file written by `save_step_data` (blank lines skipped). A missing file is a
    FileNotFoundError; a bad line is one ValueError naming `file:line` and the problem."""
    path = existing_file(path, "step data")
    return parse_jsonl(path, _item, what="step items")


def split_by_problem(items: Sequence[StepItem], held_out_fraction: float, seed: int = 0
                     ) -> tuple[list[StepItem], list[StepItem]]:
    """(train, held_out): a seeded choice of about `held_out_fraction` of the problems goes to held_out, with
    every item of theirs; no problem is on both sides. A problem is the item's `problem_id`, or its question
    when that is empty. With at least two problems and a fraction > 0, each side gets one or more; item
    order is kept on both sides."""
    if isinstance(held_out_fraction, bool) or not isinstance(held_out_fraction, (int, float)) \
            or not 0 <= held_out_fraction < 1:
        raise ValueError(f"split_by_problem: held_out_fraction must be in [0, 1), got {held_out_fraction!r}")
    keys = [item.problem_id or item.question for item in items]
    problems = sorted(set(keys))
    count = round(held_out_fraction * len(problems))
    if held_out_fraction > 0 and len(problems) > 1:
        count = min(max(count, 1), len(problems) - 1)
    held = set(random.Random(seed).sample(problems, count)) if count else set()
    train = [item for item, key in zip(items, keys) if key not in held]
    held_out = [item for item, key in zip(items, keys) if key in held]
    return train, held_out
