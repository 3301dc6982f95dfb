"""The policy's own solutions with their labels, as `policy_labels` builds them, and their JSONL files.

`LabelledSample`: one sampled solution to a problem, its non-empty steps' texts, the env's verdict on its
final answer (the outcome label) and, when rollouts were run, a Monte-Carlo label per step (Math-Shepherd):
`soft` the fraction of the k completions from the prefix ending at that step that ended correct, `hard`
1.0 when any did (a final step's labels are its own verdict). `PolicyLabels` holds the samples and the
labelling run's stats (sampled tokens, seconds, tokens/s, ...). A file is JSONL: a {"kind": "stats"} line,
then one {"kind": "sample"} line per sample, so one GPU run labels once and many trainings read it.

`outcome_items` and `step_items` turn samples into `RatedSteps` for the PRM trainer: an outcome reward model
is the PRM rated at its solution's last step only (the others None), a PRM on MC labels is rated at each step.
"""
from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from lmgym.buffers.step_pairs import RatedSteps
from lmgym.core.atomic_io import atomic_write_text
from lmgym.core.jsonl import existing_file, parse_jsonl

STEP_TARGETS = ("soft", "hard")


def _labels(name: str, values, steps: int) -> tuple[float, ...]:
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise ValueError(f"LabelledSample.{name} must be a list of numbers, got {type(values).__name__}")
    if values and len(values) != steps:
        raise ValueError(f"LabelledSample: {steps} steps but {len(values)} {name} labels")
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(f"LabelledSample.{name}[{i}] must be a number in [0, 1], got {value!r}")
    return tuple(float(v) for v in values)


@dataclass(frozen=True)
class LabelledSample:
    """A sampled solution: `steps` (non-empty texts) under `question`, `correct` (the env's verdict), its
    parsed `answer` (None: none), per-step MC labels `soft` and `hard` (empty: no rollouts were run), and
    the `tokens` the policy sampled for the solution itself (rollouts not included)."""

    question: str
    problem_id: str
    steps: tuple[str, ...]
    correct: bool
    answer: str | None = None
    soft: tuple[float, ...] = ()
    hard: tuple[float, ...] = ()
    tokens: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.steps, str) or not isinstance(self.steps, (list, tuple)) \
                or not all(isinstance(t, str) for t in self.steps):
            raise ValueError(f"LabelledSample.steps must be a list of strings, got {self.steps!r:.80}")
        object.__setattr__(self, "steps", tuple(self.steps))
        for name in ("question", "problem_id"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"LabelledSample.{name} must be a string, got {type(getattr(self, name)).__name__}")
        if not isinstance(self.correct, bool):
            raise ValueError(f"LabelledSample.correct must be true or false, got {self.correct!r}")
        if self.answer is not None and not isinstance(self.answer, str):
            raise ValueError(f"LabelledSample.answer must be a string or null, got {type(self.answer).__name__}")
        soft, hard = _labels("soft", self.soft, len(self.steps)), _labels("hard", self.hard, len(self.steps))
        if len(soft) != len(hard):
            raise ValueError(f"LabelledSample: {len(soft)} soft labels but {len(hard)} hard labels")
        object.__setattr__(self, "soft", soft)
        object.__setattr__(self, "hard", hard)
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 0:
            raise ValueError(f"LabelledSample.tokens must be an int >= 0, got {self.tokens!r}")

    @property
    def has_step_labels(self) -> bool:
        return bool(self.steps) and len(self.soft) == len(self.steps)


@dataclass
class PolicyLabels:
    """Labelled samples and the stats of the run that labelled them (see `policy_labels`)."""

    samples: list[LabelledSample]
    stats: dict[str, float | int | bool] = field(default_factory=dict)

    def describe(self) -> str:
        """The labelling run in one line: samples, problems, tokens sampled (rollouts'), tokens/s, accuracy."""
        s = self.stats
        return (f"{s['samples']} samples of {s['problems']} problems, {s['sampled_tokens']} tokens sampled "
                f"({s['rollout_tokens']} in {s['rollouts']} rollouts) at {s['tokens_per_second']:.0f} tokens/s; "
                f"sample accuracy {s['sample_accuracy']:.1%}")


def outcome_items(samples: Iterable[LabelledSample]) -> list[RatedSteps]:
    """ORM training items: each sample with steps, rated only at its last step by its outcome (source
    "outcome"); a sample without steps has no text to score and is left out."""
    return [RatedSteps(s.question, s.steps, (None,) * (len(s.steps) - 1) + (float(s.correct),), "outcome",
                       s.problem_id) for s in samples if s.steps]


def outcome_pairs(samples: Iterable[LabelledSample], per_problem: int, seed: int = 0
                  ) -> list[tuple[LabelledSample, LabelledSample]]:
    """Pairs (right, wrong) of solutions of ONE problem, for a ranking loss: up to `per_problem` a problem, drawn
    without repeats from all its right x wrong pairs in an order seeded by (`seed`, the problem's id), problems in
    first-seen order. Samples without steps are left out; a problem without both kinds gives none."""
    if isinstance(per_problem, bool) or not isinstance(per_problem, int) or per_problem < 1:
        raise ValueError(f"outcome_pairs: per_problem must be an int >= 1, got {per_problem!r}")
    by_problem: dict[str, list[LabelledSample]] = {}
    for s in samples:
        if s.steps:
            by_problem.setdefault(s.problem_id or s.question, []).append(s)
    pairs = []
    for problem, group in by_problem.items():
        every = [(r, w) for r in group if r.correct for w in group if not w.correct]
        order = random.Random(f"{seed}/{problem}").sample(range(len(every)), min(per_problem, len(every)))
        pairs += [every[k] for k in order]
    return pairs


def step_items(samples: Iterable[LabelledSample], target: str = "soft") -> list[RatedSteps]:
    """PRM training items: each sample's steps rated by their MC labels, `target` "soft" (the fraction of
    completions that ended correct: Math-Shepherd's soft BCE target) or "hard" (any did); source "mc_<target>".
    Samples without step labels are left out."""
    if target not in STEP_TARGETS:
        raise ValueError(f"step_items: target must be one of {', '.join(STEP_TARGETS)}, got {target!r}")
    return [RatedSteps(s.question, s.steps, getattr(s, target), f"mc_{target}", s.problem_id)
            for s in samples if s.has_step_labels]


def save_policy_labels(path: str | Path, labels: PolicyLabels) -> None:
    """Write `labels` as JSONL: the stats line, then one line per sample (parent folders are made). The file is
    replaced whole (lmgym.core.atomic_io): a cut run, or two processes labelling the same level, never leave half a
    file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"kind": "stats", "stats": labels.stats})]
    lines += [json.dumps({"kind": "sample", "question": s.question, "problem_id": s.problem_id, "steps": list(s.steps),
                          "correct": s.correct, "answer": s.answer, "soft": list(s.soft), "hard": list(s.hard),
                          "tokens": s.tokens}, ensure_ascii=False) for s in labels.samples]
    atomic_write_text(path, "\n".join(lines) + "\n")


def _record(record) -> LabelledSample | dict:
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    kind = record.get("kind")
    if kind == "stats":
        stats = record.get("stats")
        if not isinstance(stats, dict) or not all(isinstance(v, (int, float, bool)) and math.isfinite(v)
                                                  for v in stats.values()):
            raise ValueError("a stats line needs \"stats\": an object of finite numbers")
        return stats
    if kind != "sample":
        raise ValueError(f"\"kind\" must be 'stats' or 'sample', got {kind!r}")
    fields = {"question", "problem_id", "steps", "correct", "answer", "soft", "hard", "tokens"}
    unknown = sorted(set(record) - fields - {"kind"})
    if unknown:
        raise ValueError(f"unknown field(s) for a sample: {', '.join(unknown)}")
    missing = sorted({"question", "problem_id", "steps", "correct"} - set(record))
    if missing:
        raise ValueError(f"a sample needs the field(s) {', '.join(missing)}")
    return LabelledSample(**{k: v for k, v in record.items() if k != "kind"})


def load_policy_labels(path: str | Path) -> PolicyLabels:
    """The labels of a file written by `save_policy_labels`. A missing file is a FileNotFoundError; a bad
    line is one ValueError naming `file:line`; a file without samples is a ValueError."""
    path = existing_file(path, "policy labels")
    records = parse_jsonl(path, _record, what="labelled samples")
    samples = [r for r in records if isinstance(r, LabelledSample)]
    if not samples:
        raise ValueError(f"{path}: no labelled samples")
    stats: dict = {}
    for r in records:
        if isinstance(r, dict):
            stats.update(r)
    return PolicyLabels(samples, stats)

