"""PRM training: the losses against hand values, a PRM on the tiny model learning to rank a handful of
step pairs, resume, micro-batching, the seeded draw and one-line errors."""
import json
import math

import pytest
import torch

from lmgym.algorithms import PRMConfig, PRMTrainer, bradley_terry_loss, pointwise_loss
from lmgym.buffers import RatedSteps, StepPair
from lmgym.policies import ProcessRewardModel
from lmgym.training import ConfigError
from tests.tiers import slow

PAIRS = [
    StepPair("What is 12 + 7 * 3?", ("7 * 3 = 21\n",), "12 + 21 = 33\n", "12 + 21 = 35\n", problem_id="a"),
    StepPair("What is 12 + 7 * 3?", (), "7 * 3 = 21\n", "7 + 3 = 10\n", problem_id="a"),
    StepPair("What is 40 - 6 * 5?", (), "6 * 5 = 30\n", "6 * 5 = 11\n", problem_id="b"),
    StepPair("What is 40 - 6 * 5?", ("6 * 5 = 30\n",), "40 - 30 = 10\n", "40 + 30 = 70\n", problem_id="b"),
    StepPair("What is 9 * 8 - 2?", ("9 * 8 = 72\n", "72 - 2 = 70\n"), "#### 70\n", "#### 72\n", problem_id="c"),
    StepPair("What is 9 * 8 - 2?", ("9 * 8 = 72\n",), "72 - 2 = 70\n", "#### 72\n", margin=0.5, problem_id="c"),
]
RATED = [
    RatedSteps("What is 5 + 5?", ("5 + 5 = 10\n", "#### 10\n"), (1.0, 1.0), problem_id="d"),
    RatedSteps("What is 6 * 2?", ("6 * 2 = 8\n", "#### 8\n"), (0.0, None), problem_id="e"),
    RatedSteps("What is 3 - 1?", ("3 - 1 = 2\n",), (0.5,), problem_id="f"),
]


def config(run_dir, **fields) -> PRMConfig:
    values = dict(train_iterations=4, pairs_per_iteration=4, micro_batch_size=2, learning_rate=1e-3,
                  progress=False, output_dir=str(run_dir))
    return PRMConfig(**{**values, **fields})


def test_the_losses_against_hand_values():
    chosen, rejected = torch.tensor([2.0, 0.0]), torch.tensor([0.0, 1.0])
    # -log sigmoid(2) = log(1 + e^-2), -log sigmoid(-1) = log(1 + e)
    assert float(bradley_terry_loss(chosen, rejected)) == pytest.approx(
        (math.log(1 + math.exp(-2)) + math.log(1 + math.e)) / 2, abs=1e-6)  # 0.720095
    assert float(bradley_terry_loss(chosen, rejected, margin=1.0)) == pytest.approx(
        (math.log(1 + math.exp(-1)) + math.log(1 + math.exp(2))) / 2, abs=1e-6)  # 1.220095
    assert float(bradley_terry_loss(chosen, rejected, torch.tensor([0.0, -1.0]))) == pytest.approx(
        (math.log(1 + math.exp(-2)) + math.log(2)) / 2, abs=1e-6)
    logits, labels = torch.tensor([[0.0, 2.0, 9.0]]), torch.tensor([[1.0, 0.5, 0.0]])
    mask = torch.tensor([[True, True, False]])
    # label 1 at logit 0: log 2; label 0.5 at logit 2: (log(1 + e^-2) + log(1 + e^2)) / 2; the masked 9 ignored
    by_hand = (math.log(2) + (math.log(1 + math.exp(-2)) + math.log(1 + math.exp(2))) / 2) / 2
    assert float(pointwise_loss(logits, labels, mask)) == pytest.approx(by_hand, abs=1e-6)  # 0.910038
    with pytest.raises(ValueError, match="no pairs"):
        bradley_terry_loss(torch.zeros(0), torch.zeros(0))
    with pytest.raises(ValueError, match=r"chosen \(2,\) and rejected \(3,\) logits differ in shape"):
        bradley_terry_loss(torch.zeros(2), torch.zeros(3))
    with pytest.raises(ValueError, match="no rated steps"):
        pointwise_loss(logits, labels, torch.zeros_like(mask))


@slow
@pytest.mark.plots  # reads the run's PNGs (tests/conftest.py)
def test_a_prm_trained_on_a_handful_of_pairs_ranks_them(tiny_policy, tmp_path):
    prm = ProcessRewardModel.from_policy(tiny_policy)
    trainer = PRMTrainer(prm, PAIRS, config(tmp_path / "run", train_iterations=20, pairs_per_iteration=6,
                                            micro_batch_size=6), held_out=PAIRS)
    rows = trainer.train()
    assert rows[0]["eval_pairwise_accuracy"] == 0.5  # a zero head: every pair ties
    assert rows[0]["eval_bt_loss"] == pytest.approx(math.log(2), abs=1e-6)
    assert rows[-1]["eval_pairwise_accuracy"] == 1.0 and rows[-1]["pairwise_accuracy"] == 1.0
    assert rows[-1]["eval_bt_loss"] < 0.6
    # the train loss of an iteration is the held-out loss after the one before (same pairs, before its step)
    assert rows[1]["loss"] == pytest.approx(rows[0]["eval_bt_loss"], abs=1e-5)
    for pair in PAIRS:
        good, bad = (prm.score_steps(pair.question, pair.prefix + (step,))[-1] for step in (pair.chosen, pair.rejected))
        assert good > bad
    folder = trainer.save_model()
    loaded = ProcessRewardModel.from_pretrained(folder, device="cpu")
    pair = PAIRS[0]
    steps = pair.prefix + (pair.chosen,)
    assert loaded.score_steps(pair.question, steps) == pytest.approx(prm.score_steps(pair.question, steps), abs=1e-6)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["algorithm"] == "PRMTrainer"
    assert (tmp_path / "run" / "metrics.png").is_file()


def make(run_dir, iterations: int, tiny_policy) -> PRMTrainer:
    prm = ProcessRewardModel.from_policy(tiny_policy)
    conf = config(run_dir, train_iterations=iterations, pointwise_weight=0.5, use_margin=True, save_every=2,
                  eval_every=2)
    return PRMTrainer(prm, PAIRS[:4] + RATED, conf, held_out=PAIRS[4:] + RATED[:2])


@slow
def test_resume_equals_an_uninterrupted_run(tiny_policy, tmp_path):
    whole = make(tmp_path / "whole", 4, tiny_policy)
    whole_rows = whole.train()
    make(tmp_path / "split", 2, tiny_policy).train()
    resumed = make(tmp_path / "split", 4, tiny_policy)
    rows = resumed.train(resume=True)
    assert [r["iteration"] for r in rows] == [r["iteration"] for r in whole_rows] == [0, 1, 2, 3, 4]
    for mine, theirs in zip(rows, whole_rows):
        assert set(mine) - {k for k in mine if k.startswith("time_")} == \
            set(theirs) - {k for k in theirs if k.startswith("time_")}
        for key, value in theirs.items():
            if not key.startswith("time_"):
                assert mine[key] == pytest.approx(value, abs=1e-6), (mine["iteration"], key)
    for a, b in zip(resumed.prm.parameters(), whole.prm.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    last = whole_rows[-1]
    assert last["pointwise"] > 0 and last["bradley_terry"] > 0
    assert last["loss"] == pytest.approx(last["bradley_terry"] + last["pointwise"], abs=1e-6)
    assert {"eval_pairwise_accuracy", "eval_bt_loss", "eval_rated_accuracy", "eval_pointwise_loss"} <= set(last)


def counting_padded_tokens(step_batch, passes: list[int]):
    """`step_batch` that also appends each pass's padded tokens (rows x longest row) to `passes`."""
    def counted(rows, positions):
        passes.append(len(rows) * max(map(len, rows)))
        return step_batch(rows, positions)
    return counted


def test_the_optimizer_step_is_the_same_whatever_the_micro_batch_size(tiny_policy, tmp_path):
    steps, passes = {}, {}
    items = PAIRS + RATED
    # 1: chunks of pairs alone and of rated solutions alone; "tokens": 9 items a pass by count, cut by a budget of
    # padded tokens (a pair counts two sequences) into several passes
    for size, budget in ((1, 0), (9, 0), ("tokens", 256)):
        trainer = PRMTrainer(ProcessRewardModel.from_policy(tiny_policy), items,
                             config(tmp_path / str(size), micro_batch_size=9 if size == "tokens" else size,
                                    pairs_per_iteration=9, pointwise_weight=2.0, max_tokens_per_microbatch=budget))
        with torch.no_grad():
            torch.nn.init.normal_(trainer.prm.head.linear.weight, std=0.5)  # gradients reach the backbone
        trainer.prm.step_batch = counting_padded_tokens(trainer.prm.step_batch, passes.setdefault(size, []))
        stats = trainer.train_iteration()
        steps[size] = (stats, [p.grad.clone() for p in trainer.prm.parameters()])
    assert len(passes[9]) == 1 and passes[9][0] > 256
    assert len(passes["tokens"]) > 1 and max(passes["tokens"]) <= 256  # every item here fits the budget alone
    for size in (9, "tokens"):
        for key in ("loss", "bradley_terry", "pointwise", "grad_norm", "pairwise_accuracy"):
            assert steps[size][0][key] == pytest.approx(steps[1][0][key], rel=1e-5), (size, key)
        for a, b in zip(steps[size][1], steps[1][1]):
            assert torch.allclose(a, b, atol=1e-6)
    assert steps[1][0]["pairs"] == 6 and steps[1][0]["rated_steps"] == 4


def test_draws_cycle_through_seeded_epochs(tiny_policy, tmp_path):
    trainer = PRMTrainer(ProcessRewardModel.from_policy(tiny_policy), PAIRS, config(tmp_path, pairs_per_iteration=4))
    drawn = []
    for iteration in range(6):  # 24 draws: four epochs of the six pairs
        trainer.iteration = iteration
        drawn += [trainer.items.index(x) for x in trainer.draw()]
    epochs = [drawn[k:k + 6] for k in range(0, 24, 6)]
    assert all(sorted(e) == list(range(6)) for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1  # each epoch its own order
    other = PRMTrainer(ProcessRewardModel.from_policy(tiny_policy), PAIRS, config(tmp_path, pairs_per_iteration=4,
                                                                                 seed=1))
    assert [other.items.index(x) for x in other.draw()] != drawn[:4]


def test_rated_steps_need_a_pointwise_weight_and_bad_input_is_one_line(tiny_policy, tmp_path):
    prm = ProcessRewardModel.from_policy(tiny_policy)
    assert len(PRMTrainer(prm, PAIRS + RATED, config(tmp_path)).items) == 6  # rated solutions not trained on
    assert len(PRMTrainer(prm, PAIRS + RATED, config(tmp_path, pointwise_weight=1.0)).items) == 9
    with pytest.raises(ValueError) as info:
        PRMTrainer(prm, RATED, config(tmp_path))
    assert str(info.value) == ("PRMTrainer: no training items: train_items holds no step pairs "
                               "(rated steps need pointwise_weight > 0)")
    with pytest.raises(ValueError, match=r"PRMTrainer: train_items\[1\]: step 0 is empty"):
        PRMTrainer(prm, [PAIRS[0], StepPair("q", (), "", "x")], config(tmp_path))
    with pytest.raises(ValueError, match=r"PRMTrainer: held_out\[0\]: expected a StepPair or RatedSteps, got str"):
        PRMTrainer(prm, PAIRS, config(tmp_path), held_out=["a pair"])
    with pytest.raises(ConfigError) as info:
        config(tmp_path, pairs_per_iteration=0)
    assert str(info.value) == "PRMConfig.pairs_per_iteration must be a positive integer, got 0"
    with pytest.raises(ConfigError, match="PRMConfig.pointwise_weight must be >= 0, got -1.0"):
        config(tmp_path, pointwise_weight=-1)
