"""Verifiers on the policy's own samples: the ORM and soft-PRM losses against hand values, and a tiny
end-to-end run (label 4 problems with the tiny model, train each verifier 2 steps, evaluate held out)."""
from __future__ import annotations

import math

import pytest
import torch

from lmgym.algorithms import PRMConfig, verifier_trainer
from lmgym.buffers.step_pairs import split_by_problem
from lmgym.envs import make
from lmgym.evaluation import evaluate_verifier, score_samples
from lmgym.evaluation.verifier_eval import verifier_solution_metrics
from lmgym.policies.prm import ProcessRewardModel
from lmgym.traindata.step_data import (
    LabelledSample,
    PolicyLabelConfig,
    load_policy_labels,
    outcome_pairs,
    policy_labels,
    save_policy_labels,
)
from tests.tiers import slow

Q = "What is 1 + 2? Give the final answer after ####.\n"
SAMPLES = [LabelledSample(Q, "p", ("Add.\n", "#### 3\n"), True, "3", (0.75, 1.0), (1.0, 1.0)),
           LabelledSample(Q, "p", ("Subtract.\n", "#### 0\n"), False, "0", (0.5, 0.0), (1.0, 0.0))]


def config(run_dir, **fields) -> PRMConfig:
    values = dict(train_iterations=2, pairs_per_iteration=4, micro_batch_size=4, learning_rate=1e-3,
                  pointwise_weight=1.0, progress=False, eval_at_start=False, output_dir=str(run_dir))
    return PRMConfig(**{**values, **fields})


def constant_prm(tiny_policy, logit: float) -> ProcessRewardModel:
    """A PRM whose head gives `logit` at every position (zero weight, that bias)."""
    prm = ProcessRewardModel.from_policy(tiny_policy)
    with torch.no_grad():
        prm.head.linear.bias.fill_(logit)
    return prm


def test_orm_and_soft_prm_losses_against_hand_values(tiny_policy, tmp_path):
    def softplus(x):  # BCE with logits: softplus(x) - y * x
        return math.log1p(math.exp(x))

    orm = verifier_trainer(constant_prm(tiny_policy, 1.0), SAMPLES, "orm", config(tmp_path / "orm"))
    assert orm.prm.aggregation == "last"
    # one rated position per solution: its last token, labelled by the outcome
    assert [(item.positions, item.labels) for item in orm.items] == [([len(item.ids) - 1], [y]) for item, y in
                                                                     zip(orm.items, (1.0, 0.0))]
    terms = orm.chunk_loss(orm.items, 0, 2, [0.0])
    by_hand = (softplus(-1.0) + softplus(1.0)) / 2  # 0.813262
    assert float(terms["pointwise"].detach()) == pytest.approx(by_hand, abs=1e-6)

    prm = verifier_trainer(constant_prm(tiny_policy, 1.0), SAMPLES, "prm_soft", config(tmp_path / "prm"))
    assert [item.labels for item in prm.items] == [[0.75, 1.0], [0.5, 0.0]]
    terms = prm.chunk_loss(prm.items, 0, 4, [0.0])
    # mean over the 4 steps of softplus(1) - y: log(1 + e) - (0.75 + 1 + 0.5 + 0) / 4
    assert float(terms["pointwise"].detach()) == pytest.approx(softplus(1.0) - 0.5625, abs=1e-6)  # 0.750762
    hard = verifier_trainer(constant_prm(tiny_policy, 1.0), SAMPLES, "prm_hard", config(tmp_path / "hard"),
                            held_out=SAMPLES)
    assert [item.labels for item in hard.items] == [[1.0, 1.0], [1.0, 0.0]]
    # held out: every step scores sigmoid(1) against hard labels 1, 1, 1, 0: all tied (AUC 1/2), one bin
    metrics = hard.evaluate()
    assert metrics["rated_auc"] == 0.5
    assert metrics["rated_ece"] == pytest.approx(abs(1 / (1 + math.exp(-1)) - 0.75))  # 0.018941
    with pytest.raises(ValueError, match="pointwise_weight must be > 0"):
        verifier_trainer(constant_prm(tiny_policy, 1.0), SAMPLES, "orm", config(tmp_path / "x", pointwise_weight=0))
    with pytest.raises(ValueError, match="verifier kind must be one of orm, prm_soft, prm_hard, orm_ranked, got 'bt'"):
        verifier_trainer(constant_prm(tiny_policy, 1.0), SAMPLES, "bt", config(tmp_path / "y"))


def test_within_problem_pairs_drawn_by_hand():
    def sample(problem, text, right):
        return LabelledSample(Q, problem, (text,), right, None)

    a = [sample("a", "r1\n", True), sample("a", "w1\n", False), sample("a", "r2\n", True), sample("a", "w2\n", False)]
    b = [sample("b", "r\n", True), sample("b", "r again\n", True)]  # no wrong solution: no pair
    c = [sample("c", "w\n", False), sample("c", "r\n", True), LabelledSample(Q, "c", (), True, None)]
    every = outcome_pairs(a + b + c, per_problem=10)
    assert len(every) == 4 + 1  # a: 2 x 2, b: none, c: one (its sample without steps left out)
    assert {(r.steps[0], w.steps[0]) for r, w in every} == {("r1\n", "w1\n"), ("r1\n", "w2\n"), ("r2\n", "w1\n"),
                                                            ("r2\n", "w2\n"), ("r\n", "w\n")}
    two = outcome_pairs(a + b + c, per_problem=2, seed=5)
    assert len(two) == 3 and len(set(two)) == 3 and set(two) <= set(every)
    assert two == outcome_pairs(a + b + c, per_problem=2, seed=5)  # seeded
    with pytest.raises(ValueError, match="per_problem must be an int >= 1, got 0"):
        outcome_pairs(a, per_problem=0)


def test_the_ranked_orm_adds_within_problem_pairs_to_the_bce(tiny_policy, tmp_path):
    def softplus(x):
        return math.log1p(math.exp(x))

    wrong_too = LabelledSample(Q, "p", ("Multiply.\n", "#### 2\n"), False, "2")
    ranked = verifier_trainer(constant_prm(tiny_policy, 1.0), SAMPLES + [wrong_too], "orm_ranked",
                              config(tmp_path / "ranked"), held_out=SAMPLES, pairs_per_problem=4)
    assert ranked.prm.aggregation == "last"
    pairs = [item for item in ranked.items if hasattr(item, "chosen")]
    # problem p: the right solution against each wrong one, each scored at its last token as the ORM scores it
    encoded = {s.steps[0]: ranked.prm.encode_steps(Q, s.steps)[0] for s in SAMPLES + [wrong_too]}
    assert sorted((p.chosen, p.rejected) for p in pairs) == sorted(
        [(encoded["Add.\n"], encoded["Subtract.\n"]), (encoded["Add.\n"], encoded["Multiply.\n"])])
    terms = ranked.chunk_loss(ranked.items, 2, 3, [0.0])
    # equal logits: each pair's -log sigmoid(0) = log 2; the BCE as the ORM's, over the three outcomes (1, 0, 0)
    assert float(terms["bradley_terry"].detach()) == pytest.approx(math.log(2), abs=1e-6)
    assert float(terms["pointwise"].detach()) == pytest.approx((softplus(-1.0) + 2 * softplus(1.0)) / 3, abs=1e-6)
    assert len([x for x in ranked.held_out if hasattr(x, "chosen")]) == 1  # held-out pairs: their win rate


def test_the_report_scores_solutions_and_steps(tiny_policy):
    prm = constant_prm(tiny_policy, 0.0)  # every step scores 0.5: nothing predicted positive, AUC a coin
    report = evaluate_verifier(prm, SAMPLES + [LabelledSample(Q, "q", (), False)])
    assert score_samples(prm, SAMPLES[:1]) == [[0.5, 0.5]]
    assert (report.solution.count, report.solution.accuracy, report.solution.auc) == (3, pytest.approx(2 / 3), 0.75)
    # steps: hard labels 1, 1, 1, 0 at 0.5 each -> accuracy 1/4, ECE |0.5 - 0.75|; soft mean 0.5625 -> 0.0625
    assert (report.step.count, report.step.accuracy, report.step.auc) == (4, 0.25, 0.5)
    assert report.step.ece == pytest.approx(0.25) and report.step_soft_ece == pytest.approx(0.0625)
    # problem "p": the first of equal scores (right) is chosen; "q": its one sample (no steps, wrong)
    assert (report.best_of_n_accuracy, report.sample_accuracy, report.pass_at_n) == (0.5, pytest.approx(1 / 3), 0.5)
    assert {"solution_auc", "step_ece", "step_soft_ece", "best_of_n_accuracy"} <= set(report.as_dict())


class TextScores:
    """A verifier stand-in: each step's score is looked up by its text, a solution's is its lowest step's."""

    def __init__(self, table: dict[str, float]):
        self.table = table

    def encode_steps(self, question, steps):
        return list(steps), None

    def score_sequences(self, sequences, positions, batch_size):
        return [[self.table[text] for text in steps] for steps in sequences]

    def solution_score(self, scores):
        return min(scores)


def test_the_votes_over_the_same_samples():
    def sample(problem, answer, score_text, right):
        return LabelledSample(Q, problem, (score_text, f"#### {answer}\n"), right, answer)

    scores = TextScores({"low": 0.1, "mid": 0.3, "high": 0.9, "#### 0\n": 1.0, "#### 3\n": 1.0, "#### 5\n": 1.0})
    samples = [  # "a": two wrong 0s (0.1 + 0.3 = 0.4) outvote one right 3 (0.9) by count, not by score
               sample("a", "0", "low", False), sample("a", "3", "high", True), sample("a", "0", "mid", False),
               # "b": two right 3s (0.1 + 0.1) against one wrong 5 (0.3); "c": both wrong
               sample("b", "3", "low", True), sample("b", "5", "mid", False), sample("b", "3", "low", True),
               sample("c", "5", "high", False), sample("c", "0", "low", False)]
    report = evaluate_verifier(scores, samples)
    # maj@N: a wrong, b right, c wrong; weighted: a right (0.9 > 0.4), b wrong (0.3 > 0.2), c wrong
    assert (report.majority_accuracy, report.weighted_majority_accuracy) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    assert report.best_of_n_accuracy == pytest.approx(1 / 3)  # a: the 0.9 sample; b: 5 (0.3); c: wrong
    assert report.pass_at_n == pytest.approx(2 / 3)
    flipped = evaluate_verifier(TextScores({**scores.table, "mid": 0.05}), samples)  # b's wrong 5 now loses
    assert flipped.weighted_majority_accuracy == pytest.approx(2 / 3)
    assert flipped.majority_accuracy == pytest.approx(1 / 3)
    assert {"majority_accuracy", "weighted_majority_accuracy"} <= set(report.as_dict())
    # within problems: a's right 0.9 beats its wrong 0.1 and 0.3 (2 of 2), b's right 0.1s lose to 0.3 (0 of 2)
    assert report.within_problem == (0.5, 2)
    assert report.as_dict()["solution_within_problem_auc"] == 0.5
    # the solution-level accuracy, AUC and ECE recomputed from the per-problem records (benchmarks/report.py)
    recomputed = verifier_solution_metrics(report.problems)
    solution = {k: v for k, v in report.as_dict().items() if k.startswith("solution_")}
    assert recomputed == pytest.approx(solution) and "solution_auc" in recomputed


@slow
def test_label_four_problems_train_two_steps_and_evaluate(tiny_policy, tmp_path):
    env = make("Arithmetic-v0", level=1, split="train", mode="stepwise", max_steps=3)
    labels = policy_labels(tiny_policy, env, PolicyLabelConfig(problems=4, samples_per_problem=2, rollouts=2,
                                                               max_new_tokens=6, temperature=1.0, batch_size=2),
                           sample_key=0)
    assert labels.stats["problems"] == 4 and len(labels.samples) == 8
    assert labels.stats["sampled_tokens"] == labels.stats["solution_tokens"] + labels.stats["rollout_tokens"] > 0
    path = tmp_path / "labels.jsonl"
    save_policy_labels(path, labels)
    samples = load_policy_labels(path).samples
    assert samples == labels.samples
    train, held_out = split_by_problem(samples, 0.25, seed=0)
    assert {s.problem_id for s in train}.isdisjoint({s.problem_id for s in held_out}) and held_out
    for kind in ("orm", "prm_soft"):
        trainer = verifier_trainer(ProcessRewardModel.from_policy(tiny_policy), train, kind,
                                   config(tmp_path / kind), held_out)
        trainer.train()
        assert trainer.iteration == 2
        report = evaluate_verifier(trainer.prm, held_out)
        assert report.solution.count == len(held_out) and 0 <= report.solution.ece <= 1
        assert (report.step is None) == (not any(s.has_step_labels for s in held_out))
