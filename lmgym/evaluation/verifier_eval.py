"""Held-out evaluation of a verifier (a `ProcessRewardModel`, ORM or PRM) on the policy's labelled samples.

Solution level: each sample's score (its step scores combined by the verifier's aggregation: an ORM's is
"last") against the env's verdict, as accuracy at 0.5, ROC AUC, ECE and the reliability table
(lmgym.evaluation.verifier_metrics), and the AUC within problems (over right-wrong pairs of one problem's samples:
what a choice among them needs); with the best-of-N accuracy this score gives per problem beside the samples'
own accuracy and pass@N, and the two votes over the same samples: maj@N (the most frequent parsed answer) and
weighted maj@N (each answer's scores summed, lmgym.search.votes). Best-of-N, maj@N and weighted maj@N read
the same N samples of a problem, so they are compared at equal sampled tokens. Step level (samples with MC
labels): each step's score against its hard label
(some completion from that prefix ended correct), and the ECE against the soft label (the fraction that did).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from lmgym.evaluation.evaluate import majority_correct, winner_correct
from lmgym.evaluation.verifier_metrics import (
    VerifierMetrics,
    auc_interval,
    expected_calibration_error,
    verifier_metrics,
    within_problem_auc,
)
from lmgym.policies.prm import ProcessRewardModel
from lmgym.search.votes import weighted_majority


class LabelledSolution(Protocol):
    """What a verifier is evaluated on: a sampled solution with its verdict and step labels, as
    `lmgym.traindata.step_data.LabelledSample` holds it (traindata is a layer above; evaluation only reads it)."""

    question: str
    problem_id: str
    steps: tuple[str, ...]
    correct: bool
    answer: str | None
    soft: tuple[float, ...]
    hard: tuple[float, ...]

    @property
    def has_step_labels(self) -> bool:
        """Every step has its MC labels."""


@dataclass(frozen=True)
class VerifierReport:
    """What `evaluate_verifier` measured (step metrics None without step-labelled samples)."""

    solution: VerifierMetrics
    step: VerifierMetrics | None
    step_soft_ece: float | None
    best_of_n_accuracy: float
    sample_accuracy: float
    pass_at_n: float
    majority_accuracy: float
    weighted_majority_accuracy: float
    problems: tuple[dict, ...] = ()  # `problem_records`: what the per-problem numbers are computed from
    auc_interval: tuple[float, float] | None = None  # the solution AUC's 95% bootstrap interval over problems
    within_problem: tuple[float, int] | None = None  # (the AUC within problems, the problems holding both classes)

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        """Flat scalar metrics for logging and result files (the AUC's interval as solution_auc_low/high)."""
        values = {**self.solution.as_dict("solution_"), **interval_fields(self.auc_interval),
                  **within_problem_fields(self.within_problem),
                  "best_of_n_accuracy": self.best_of_n_accuracy,
                  "sample_accuracy": self.sample_accuracy, "pass_at_n": self.pass_at_n,
                  "majority_accuracy": self.majority_accuracy,
                  "weighted_majority_accuracy": self.weighted_majority_accuracy}
        if self.step is not None:
            values.update(self.step.as_dict("step_"))
            values["step_soft_ece"] = float(self.step_soft_ece)
        return {f"{prefix}{k}": v for k, v in values.items()}


def score_samples(prm: ProcessRewardModel, samples: Sequence[LabelledSolution], batch_size: int = 16
                  ) -> list[list[float]]:
    """Each sample's step scores (empty for a sample without steps), `batch_size` sequences per pass."""
    encoded = [prm.encode_steps(s.question, s.steps) for s in samples if s.steps]
    scores = iter(prm.score_sequences([ids for ids, _ in encoded], [p for _, p in encoded], batch_size))
    return [next(scores) if s.steps else [] for s in samples]


def evaluate_verifier(prm: ProcessRewardModel, samples: Sequence[LabelledSolution], threshold: float = 0.5,
                      bins: int = 10, batch_size: int = 16) -> VerifierReport:
    """The verifier's held-out metrics on `samples` (see the module docstring). A sample without steps scores
    0.0 (no text: never chosen over one with text)."""
    if not samples:
        raise ValueError("evaluate_verifier: no samples")
    step_scores = score_samples(prm, samples, batch_size)
    solution = [prm.solution_score(scores) for scores in step_scores]
    labelled = [(scores, s) for scores, s in zip(step_scores, samples) if s.has_step_labels]
    step, soft_ece = None, None
    if labelled:
        scores = [x for sc, _ in labelled for x in sc]
        step = verifier_metrics(scores, [h for _, s in labelled for h in s.hard], threshold, bins)
        soft_ece = expected_calibration_error(scores, [v for _, s in labelled for v in s.soft], bins)
    problems = [{**record, "threshold": threshold, "bins": bins} for record in problem_records(samples, solution)]
    per_problem = verifier_problem_metrics(problems)
    return VerifierReport(verifier_metrics(solution, [s.correct for s in samples], threshold, bins), step, soft_ece,
                          per_problem["best_of_n_accuracy"], per_problem["sample_accuracy"],
                          per_problem["pass_at_n"], per_problem["majority_accuracy"],
                          per_problem["weighted_majority_accuracy"], tuple(problems), records_auc_interval(problems),
                          records_within_problem(problems))


def records_auc_interval(records: Sequence[Mapping]) -> tuple[float, float] | None:
    """The solution AUC's 95% bootstrap interval over the problems of `problem_records` (`auc_interval`)."""
    return auc_interval([r["scores"] for r in records], [[bool(c) for c in r["correct"]] for r in records])


def records_within_problem(records: Sequence[Mapping]) -> tuple[float, int] | None:
    """`within_problem_auc` of `problem_records`: the AUC over right-wrong pairs of one problem's samples, and the
    problems that hold both."""
    return within_problem_auc([r["scores"] for r in records], [[bool(c) for c in r["correct"]] for r in records])


def within_problem_fields(within: tuple[float, int] | None) -> dict[str, float]:
    """solution_within_problem_auc and solution_mixed_problems; none for None."""
    return {} if within is None else {"solution_within_problem_auc": within[0], "solution_mixed_problems": within[1]}


def interval_fields(interval: tuple[float, float] | None) -> dict[str, float]:
    """solution_auc_low and solution_auc_high of an interval; none for None."""
    return {} if interval is None else {"solution_auc_low": interval[0], "solution_auc_high": interval[1]}


def problem_records(samples: Sequence[LabelledSolution], solution_scores: Sequence[float]) -> list[dict]:
    """One record per problem (kind "verifier", lmgym.core.problem_records), in first-sampled order: its `id`, its
    samples' parsed answers (`predictions`), verdicts (`correct`) and solution scores (`scores`), in sampling
    order, and the counts `n` and `c`. (Labelled samples carry no gold answer: their verdicts stand for it.)
    `evaluate_verifier` adds the `threshold` and `bins` its solution metrics used."""
    by_problem: dict[str, list[tuple[float, LabelledSolution]]] = {}  # in sampling order
    for score, s in zip(solution_scores, samples):
        by_problem.setdefault(s.problem_id or s.question, []).append((score, s))
    return [{"index": index, "id": problem, "predictions": [s.answer for _, s in scored],
             "correct": [s.correct for _, s in scored], "scores": [float(score) for score, _ in scored],
             "n": len(scored), "c": sum(s.correct for _, s in scored)}
            for index, (problem, scored) in enumerate(by_problem.items())]


def problem_outcomes(records: Sequence[Mapping]) -> dict[str, list[float]]:
    """Per problem of `problem_records`, 1.0 or 0.0: whether best-of-N (the sample of the highest score; the first
    of equal ones), maj@N and weighted maj@N (`weighted_majority` of the scores) chose a right answer, and pass@N
    (some sample right). What the per-problem averages, and paired comparisons between them, are made of."""
    outcomes: dict[str, list[float]] = {"best_of_n": [], "majority": [], "weighted_majority": [], "pass": []}
    for r in records:
        answers, right, scores = r["predictions"], r["correct"], r["scores"]
        outcomes["best_of_n"].append(float(right[max(range(len(scores)), key=scores.__getitem__)]))
        outcomes["majority"].append(float(majority_correct(answers, right)))
        outcomes["weighted_majority"].append(float(winner_correct(weighted_majority(answers, scores), answers, right)))
        outcomes["pass"].append(float(any(right)))
    return outcomes


def verifier_problem_metrics(records: Sequence[Mapping]) -> dict[str, float]:
    """The per-problem numbers of `evaluate_verifier` from its `problem_records`: best-of-N, maj@N, weighted maj@N
    and pass@N (`problem_outcomes`), each averaged over problems, and the samples' own accuracy (over samples)."""
    if not records:
        raise ValueError("verifier_problem_metrics: no problem records")
    outcomes, problems = problem_outcomes(records), len(records)
    return {"best_of_n_accuracy": sum(outcomes["best_of_n"]) / problems, "sample_accuracy": sum(r["c"] for r in records)
            / sum(r["n"] for r in records), "pass_at_n": sum(outcomes["pass"]) / problems,
            "majority_accuracy": sum(outcomes["majority"]) / problems,
            "weighted_majority_accuracy": sum(outcomes["weighted_majority"]) / problems}


def verifier_solution_metrics(records: Sequence[Mapping]) -> dict[str, float]:
    """The solution-level numbers of `evaluate_verifier` (`solution_` accuracy, AUC and its interval, the AUC within
    problems, ECE, count, positive rate) from its `problem_records`: `verifier_metrics` of every sample's score
    against its verdict, at the records' `threshold` and `bins` (0.5 and 10 where a record names none)."""
    if not records:
        raise ValueError("verifier_solution_metrics: no problem records")
    scores = [float(x) for r in records for x in r["scores"]]
    labels = [bool(c) for r in records for c in r["correct"]]
    first = records[0]
    return {**verifier_metrics(scores, labels, float(first.get("threshold", 0.5)),
                               int(first.get("bins", 10))).as_dict("solution_"),
            **interval_fields(records_auc_interval(records)), **within_problem_fields(records_within_problem(records))}
