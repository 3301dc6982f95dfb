"""Verifiers trained on the policy's own labelled samples (lmgym.traindata.step_data.policy_labels), with the PRM
model and trainer (lmgym.policies.prm, lmgym.algorithms.prm.trainer):

- "orm": an outcome reward model: the scalar head read at the solution's last token, BCE against the
  outcome label (the PRM rated at its last step only); its solution score is the last step's (aggregation
  "last"), so search reads it through the same `score_branches` as a PRM;
- "prm_soft": a PRM with Math-Shepherd's loss: BCE at each step's last token against the soft MC label
  (the fraction of completions from that prefix that ended correct);
- "prm_hard": the same against the hard MC label (any completion ended correct);
- "orm_ranked": the ORM's BCE plus a Bradley-Terry term over pairs of a right and a wrong solution of ONE problem
  (`outcome_pairs`, up to `pairs_per_problem` a problem), each scored at its last token as the ORM scores it.
  Reranking chooses among one problem's samples, so only those pairs matter to it; the BCE alone also learns
  which problems are easy (the thirty-second session's lease: the ORM's AUC 0.92 over the budgeted SFT's samples,
  0.69 within problems, no reranking gain). The BCE stays for a calibrated score.
"""
from __future__ import annotations

from collections.abc import Sequence

from lmgym.algorithms.prm.trainer import EncodedPair, PRMConfig, PRMTrainer
from lmgym.buffers.step_pairs import RatedSteps
from lmgym.policies.prm import ProcessRewardModel
from lmgym.traindata.step_data.labelled_samples import LabelledSample, outcome_items, outcome_pairs, step_items

VERIFIER_KINDS = ("orm", "prm_soft", "prm_hard", "orm_ranked")
OUTCOME_KINDS = ("orm", "orm_ranked")  # scored at the solution's last token (aggregation "last")


def check_kind(kind: str) -> None:
    """One-line ValueError unless `kind` is one of VERIFIER_KINDS."""
    if kind not in VERIFIER_KINDS:
        raise ValueError(f"verifier kind must be one of {', '.join(VERIFIER_KINDS)}, got {kind!r}")


def verifier_items(samples: Sequence[LabelledSample], kind: str) -> list[RatedSteps]:
    """The PRM trainer's rated items for a verifier of `kind` (see the module docstring; orm_ranked's pairs are
    `ranked_pairs`)."""
    check_kind(kind)
    return outcome_items(samples) if kind in OUTCOME_KINDS else step_items(samples, kind.removeprefix("prm_"))


def ranked_pairs(prm: ProcessRewardModel, samples: Sequence[LabelledSample], per_problem: int, seed: int = 0
                 ) -> list[EncodedPair]:
    """orm_ranked's pairs: `outcome_pairs` encoded as the ORM scores a solution (`prm.encode_steps`, scored at the
    last token), the right solution chosen."""
    return [EncodedPair(prm.encode_steps(right.question, right.steps)[0],
                        prm.encode_steps(wrong.question, wrong.steps)[0], 0.0)
            for right, wrong in outcome_pairs(samples, per_problem, seed)]


def verifier_trainer(prm: ProcessRewardModel, train: Sequence[LabelledSample], kind: str, config: PRMConfig,
                     held_out: Sequence[LabelledSample] = (), pairs_per_problem: int = 4) -> PRMTrainer:
    """A PRMTrainer for a verifier of `kind` on `train` (held-out samples become its evaluation items).
    `config.pointwise_weight` must be > 0: the verifier's loss is the pointwise BCE. An ORM's aggregation is
    set to "last" (its solution score is the score at the solution's end). orm_ranked adds up to
    `pairs_per_problem` within-problem pairs a problem, held out too (the trainer's eval then reports their
    win rate: the AUC within problems)."""
    check_kind(kind)
    if config.pointwise_weight <= 0:
        raise ValueError(f"verifier_trainer: config.pointwise_weight must be > 0 (the verifier is trained by the "
                         f"pointwise BCE), got {config.pointwise_weight}")
    if kind in OUTCOME_KINDS:
        prm.aggregation = "last"
    items, evaluated = verifier_items(train, kind), verifier_items(held_out, kind)
    if kind == "orm_ranked":
        items += ranked_pairs(prm, train, pairs_per_problem, config.seed)
        evaluated += ranked_pairs(prm, held_out, pairs_per_problem, config.seed)
    return PRMTrainer(prm, items, config, held_out=evaluated)
