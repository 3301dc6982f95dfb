"""Balanced verifier labels: a policy's own samples are mostly wrong on hard levels (1 right in 15 on level 2,
1 in 70 on level 4: benchmarks/RESULTS.md, "A verifier trained on the policy's own samples"), so a verifier
trained on them sees few right solutions. `balanced_samples` keeps every sample of the scarcer label and draws
(without replacement, seeded) as many of the other label as the target share asks; `label_balance` counts
the labels of a set; `first_problems` keeps the samples of a set's first n problems (a scaling curve's sizes).

Samples of several policies (the policy's own, and a budgeted SFT that is right 20-60% of the time): pooled and
then balanced, the right ones come mostly from the better policy (92% of them on level 2 in the twenty-seventh
session's lease), so which policy wrote a solution predicts its label (AUC 0.81 there) and a verifier can learn
the policy's style instead of correctness. `balanced_sources` (mode per_policy) balances each policy's
samples on its own before pooling, so the source says nothing of the label; `source_auc` measures how much
it says (0.5: nothing).
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from lmgym.evaluation.verifier_metrics import roc_auc
from lmgym.traindata.step_data.labelled_samples import LabelledSample

BALANCE_MODES = ("per_policy", "pooled")


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


def source_auc(sources: Mapping[str, Sequence[LabelledSample]]) -> float | None:
    """How well the source alone predicts a sample's label: the ROC AUC of each sample's source's right share
    against its label. 0.5: the source says nothing of the label; None when the pool holds one label only."""
    shares = {name: label_balance(samples)["right_share"] for name, samples in sources.items()}
    scores = [shares[name] for name, samples in sources.items() for _ in samples]
    labels = [s.correct for samples in sources.values() for s in samples]
    return roc_auc(scores, labels) if labels else None


def balance_report(sources: Mapping[str, Sequence[LabelledSample]], kept: Mapping[str, Sequence[LabelledSample]],
                   right_share: float, mode: str) -> dict:
    """The balance of a level's labels before and after (`label_balance`, pooled), each source's own, and the
    source's AUC before and after (`source_auc`): what labels/balance.json holds per level."""
    return {"before": label_balance([s for v in sources.values() for s in v]),
            "after": label_balance([s for v in kept.values() for s in v]),
            "right_share": right_share, "mode": mode,
            "sources": {name: {"before": label_balance(sources[name]), "after": label_balance(kept[name])}
                        for name in sources},
            "source_auc": {"before": source_auc(sources), "after": source_auc(kept)}}


def balanced_sources(sources: Mapping[str, Sequence[LabelledSample]], right_share: float, seed: int = 0,
                     mode: str = "per_policy") -> tuple[list[LabelledSample], dict]:
    """A level's training samples from its sources' labels, balanced as `mode` says (per_policy: each source
    on its own; pooled: the pool as one set; right_share 0: as sampled), and their `balance_report`."""
    if mode not in BALANCE_MODES:
        raise ValueError(f"balance mode must be one of {', '.join(BALANCE_MODES)}, got {mode!r}")
    if not right_share:
        kept_by = {name: list(v) for name, v in sources.items()}
    elif mode == "per_policy":
        kept_by = {name: balanced_samples(v, right_share, seed) for name, v in sources.items()}
    else:  # pooled: the pool balanced as one set, then split back by source for the report
        chosen = {id(s) for s in balanced_samples([s for v in sources.values() for s in v], right_share, seed)}
        kept_by = {name: [s for s in v if id(s) in chosen] for name, v in sources.items()}
    kept = [s for v in kept_by.values() for s in v]
    return kept, balance_report(sources, kept_by, right_share, mode)


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
