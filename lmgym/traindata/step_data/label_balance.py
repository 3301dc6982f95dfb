"""Balanced verifier labels: a policy's own samples are mostly wrong on hard levels (1 right in 15 on level 2,
1 in 70 on level 4: benchmarks/RESULTS.md, "A verifier trained on the policy's own samples"), so a verifier
trained on them sees few right solutions. `balanced_samples` keeps every sample of the scarcer label and draws
(without replacement, seeded) as many of the other label as the target share asks; `label_balance` counts
the labels of a set; `first_problems` keeps the samples of a set's first n problems (a scaling curve's sizes).
Samples of several policies (the policy's own, and a budgeted SFT that is right 20-60% of the time) are pooled
before balancing.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

from lmgym.traindata.step_data.labelled_samples import LabelledSample


def label_balance(samples: Sequence[LabelledSample]) -> dict[str, float | int]:
    """samples, right, wrong, right_share (0.0 for none), problems, and problems with a right sample."""
    right = sum(s.correct for s in samples)
    problems: dict[str, bool] = {}
    for s in samples:
        key = s.problem_id or s.question
        problems[key] = problems.get(key, False) or s.correct
    return {"samples": len(samples), "right": right, "wrong": len(samples) - right,
            "right_share": right / len(samples) if samples else 0.0, "problems": len(problems),
            "problems_with_right": sum(problems.values())}


def balanced_samples(samples: Sequence[LabelledSample], right_share: float, seed: int = 0) -> list[LabelledSample]:
    """The samples with right solutions making `right_share` of them (0 < share < 1), as close as whole samples
    allow: every sample of the label that falls short of its share is kept, the other label is drawn down to
    match (seeded; the kept samples stay in their original order). A set with one label only is returned whole."""
    if not 0 < right_share < 1:
        raise ValueError(f"balanced_samples: right_share must be in (0, 1), got {right_share!r}")
    samples = list(samples)
    right = [i for i, s in enumerate(samples) if s.correct]
    wrong = [i for i, s in enumerate(samples) if not s.correct]
    if not right or not wrong:
        return samples
    if len(right) / len(samples) < right_share:  # too few right: keep them all, draw wrong ones down
        keep_right, keep_wrong = len(right), min(len(wrong), round(len(right) * (1 - right_share) / right_share))
    else:  # too few wrong: keep them all, draw right ones down
        keep_right, keep_wrong = min(len(right), round(len(wrong) * right_share / (1 - right_share))), len(wrong)
    rng = random.Random(seed)
    chosen = set(rng.sample(right, keep_right)) | set(rng.sample(wrong, keep_wrong))
    return [s for i, s in enumerate(samples) if i in chosen]


def first_problems(samples: Sequence[LabelledSample], problems: int) -> list[LabelledSample]:
    """The samples of the first `problems` distinct problems, in the order they first appear."""
    if problems < 1:
        raise ValueError(f"first_problems: problems must be >= 1, got {problems}")
    seen: dict[str, None] = {}
    out = []
    for s in samples:
        key = s.problem_id or s.question
        if key not in seen:
            if len(seen) == problems:
                continue
            seen[key] = None
        out.append(s)
    return out
