"""Verifiers trained on the policy's own labelled samples (lmgym.traindata.step_data.policy_labels), with the PRM
model and trainer (lmgym.policies.prm, lmgym.algorithms.prm.trainer):

- "orm": an outcome reward model: the scalar head read at the solution's last token, BCE against the
  outcome label (the PRM rated at its last step only); its solution score is the last step's (aggregation
  "last"), so search reads it through the same `score_branches` as a PRM;
- "prm_soft": a PRM with Math-Shepherd's loss: BCE at each step's last token against the soft MC label
  (the fraction of completions from that prefix that ended correct);
- "prm_hard": the same against the hard MC label (any completion ended correct).
"""
from __future__ import annotations

from collections.abc import Sequence

from lmgym.algorithms.prm.trainer import PRMConfig, PRMTrainer
from lmgym.buffers.step_pairs import RatedSteps
from lmgym.policies.prm import ProcessRewardModel
from lmgym.traindata.step_data.labelled_samples import LabelledSample, outcome_items, step_items

VERIFIER_KINDS = ("orm", "prm_soft", "prm_hard")


def check_kind(kind: str) -> None:
    """One-line ValueError unless `kind` is one of VERIFIER_KINDS."""
    if kind not in VERIFIER_KINDS:
        raise ValueError(f"verifier kind must be one of {', '.join(VERIFIER_KINDS)}, got {kind!r}")


def verifier_items(samples: Sequence[LabelledSample], kind: str) -> list[RatedSteps]:
    """The PRM trainer's items for a verifier of `kind` (see the module docstring)."""
    check_kind(kind)
    return outcome_items(samples) if kind == "orm" else step_items(samples, kind.removeprefix("prm_"))


def verifier_trainer(prm: ProcessRewardModel, train: Sequence[LabelledSample], kind: str, config: PRMConfig,
                     held_out: Sequence[LabelledSample] = ()) -> PRMTrainer:
    """A PRMTrainer for a verifier of `kind` on `train` (held-out samples become its evaluation items).
    `config.pointwise_weight` must be > 0: the verifier's loss is the pointwise BCE. An ORM's aggregation is
    set to "last" (its solution score is the score at the solution's end)."""
    check_kind(kind)
    if config.pointwise_weight <= 0:
        raise ValueError(f"verifier_trainer: config.pointwise_weight must be > 0 (the verifier is trained by the "
                         f"pointwise BCE), got {config.pointwise_weight}")
    if kind == "orm":
        prm.aggregation = "last"
    return PRMTrainer(prm, verifier_items(train, kind), config, held_out=verifier_items(held_out, kind))
