"""lr_scheduler_type: transformers' own schedules (checked against get_scheduler on a fresh optimizer), the
default warmup-then-constant schedule unchanged, bad names refused in one line, resume bit-identical, TRL's name."""
import json

import pytest
import torch
from transformers import SchedulerType, get_scheduler

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.training import ConfigError, TrainerConfig
from lmgym.training.lr_schedules import NEEDS_MORE, SCHEDULES
from tests.test_trainer import HELD_OUT, TEXTS, SupervisedTrainer
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

LR = 3e-3


class TwoStepConfig(TrainerConfig):
    def optimizer_steps_per_iteration(self) -> int:
        return 2


class TwoStepTrainer(SupervisedTrainer):
    """Two optimizer steps per iteration, known up front: a named schedule steps with each."""

    def train_iteration(self) -> dict:
        for _ in range(2):
            stats = super().train_iteration()
        return stats


def two_step(tmp_path, **overrides) -> TwoStepTrainer:
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    values = dict(train_iterations=4, micro_batch_size=4, learning_rate=LR, warmup_iterations=2, progress=False,
                  eval_at_start=False, output_dir=str(tmp_path / "run"))
    return TwoStepTrainer(policy, TEXTS, TwoStepConfig(**{**values, **overrides}), held_out=HELD_OUT)


def transformers_lrs(name: str, warmup: int, total: int, steps: list[int]) -> list[float]:
    """transformers' lr after each of `steps` scheduler steps, on a fresh optimizer."""
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=LR)
    scheduler = get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=total)
    lrs, done = [], 0
    for step in steps:
        while done < step:
            optimizer.step()
            scheduler.step()
            done += 1
        lrs.append(scheduler.get_last_lr()[0])
    return lrs


@slow
@pytest.mark.parametrize("name", ["cosine", "linear"])
def test_known_steps_per_iteration_step_the_schedule_per_optimizer_step(tmp_path, name):
    rows = two_step(tmp_path, lr_scheduler_type=name).train()
    logged = [r["learning_rate"] for r in rows if r["iteration"] > 0]
    # 4 iterations x 2 optimizer steps: the schedule runs over 8 steps and ends there
    assert logged == transformers_lrs(name, 2, 8, [2, 4, 6, 8])
    assert logged[-1] == 0.0 and max(logged) <= LR


@slow
def test_rl_steps_a_named_schedule_once_per_iteration(tmp_path):
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    config = GRPOConfig(train_iterations=3, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                        micro_batch_size=2, minibatch_size=2, update_epochs=2, learning_rate=LR, eval_at_start=False,
                        lr_scheduler_type="cosine", warmup_iterations=1, progress=False,
                        output_dir=str(tmp_path / "run"))
    algo = GRPO(policy, make("ToyDigits-v0"), config)
    rows = algo.train()
    assert [r["learning_rate"] for r in rows] == transformers_lrs("cosine", 1, 3, [1, 2, 3])
    assert algo.scheduler.last_epoch == 3  # although each iteration made 4 optimizer steps


def test_the_default_is_the_warmup_then_constant_schedule(tmp_path):
    assert TrainerConfig().lr_scheduler_type is None
    trainer = two_step(tmp_path, warmup_iterations=3)
    assert trainer.optimizer.param_groups[0]["lr"] == LR / 3  # the first step at 1/W, as always
    rows = trainer.train()
    # stepped per optimizer step (2 an iteration): min(1, (steps + 1) / 3)
    assert [r["learning_rate"] for r in rows if r["iteration"] > 0] == [LR, LR, LR, LR]
    assert type(trainer.scheduler) is torch.optim.lr_scheduler.LambdaLR and trainer.scheduler.last_epoch == 8


def test_a_bad_name_is_one_line_listing_the_schedules():
    with pytest.raises(ConfigError) as info:
        TrainerConfig(lr_scheduler_type="cosin")
    line = str(info.value)
    assert "\n" not in line and line.startswith("TrainerConfig.lr_scheduler_type 'cosin' is not a schedule")
    assert "(did you mean 'cosine'" in line and line.endswith("use None or one of " + ", ".join(SCHEDULES))
    with pytest.raises(ConfigError, match="'warmup_stable_decay' needs num_decay_steps, which is not a setting"):
        TrainerConfig(lr_scheduler_type="warmup_stable_decay")


def test_the_accepted_names_are_transformers_own_and_every_other_is_explained():
    assert set(SCHEDULES) | set(NEEDS_MORE) == {t.value for t in SchedulerType}
    assert not set(SCHEDULES) & set(NEEDS_MORE)


@slow
def test_a_resumed_cosine_run_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    def algorithm(folder):
        tok = build_tiny_tokenizer()
        policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
        config = GRPOConfig(train_iterations=3, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                            micro_batch_size=2, learning_rate=1e-2, lr_scheduler_type="cosine", warmup_iterations=1,
                            save_every=1, eval_at_start=False, progress=False, seed=5, output_dir=str(folder))
        return GRPO(policy, make("ToyDigits-v0"), config)

    straight = algorithm(tmp_path / "a")
    straight.train()
    crashed = algorithm(tmp_path / "b")
    real = crashed.train_iteration

    def crash_at_second():
        if crashed.iteration == 1:
            raise RuntimeError("crash")
        return real()

    monkeypatch.setattr(crashed, "train_iteration", crash_at_second)
    with pytest.raises(RuntimeError, match="crash"):
        crashed.train()
    resumed = algorithm(tmp_path / "b")
    resumed.train(resume=True)
    assert resumed.scheduler.state_dict() == straight.scheduler.state_dict()
    for (name, a), b in zip(straight.policy.state_dict().items(), resumed.policy.state_dict().values()):
        assert torch.equal(a, b), name

    def lrs(folder):
        rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        return {r["iteration"]: (r["learning_rate"], r["loss"]) for r in rows}

    assert lrs(tmp_path / "b") == lrs(tmp_path / "a") and len(lrs(tmp_path / "a")) == 3


def test_trls_names_map():
    config = GRPOConfig.from_trl(lr_scheduler_type="cosine", warmup_steps=3)
    assert (config.lr_scheduler_type, config.warmup_iterations) == ("cosine", 3)
    with pytest.raises(ConfigError, match="warmup_ratio is not a field here: set warmup_iterations"):
        GRPOConfig.from_trl(warmup_ratio=0.1)
