"""Callbacks (lmgym/training/callbacks.py): every hook in the documented order during a tiny GRPO run, stopping a
run from a callback, EarlyStopping, and the built-in callbacks each trainer adds for its config."""
import inspect
from types import SimpleNamespace

import pytest

from lmgym.algorithms import (
    DAPO,
    DPO,
    GRPO,
    PPO,
    RLOO,
    SFT,
    DrGRPO,
    GRPOConfig,
    MCTSSearch,
    PRMTrainer,
    ReinforceStable,
)
from lmgym.algorithms.prm.refresh import VerifierRefresh
from lmgym.algorithms.reference import ReferenceSync
from lmgym.envs import make
from lmgym.policies.prm import ProcessRewardModel
from lmgym.training.callbacks import HOOK_ORDER, CallbackList, EarlyStopping, TrainerCallback
from lmgym.training.plots import RunPlots
from lmgym.training.run_logger import RunLog
from tests import checkpoint_state
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


class Recorder(TrainerCallback):
    """Records (hook, trainer.iteration) for every hook, and what the hooks were given."""

    def __init__(self):
        self.calls, self.rows, self.evaluations, self.saved, self.end_rows = [], [], [], [], "never called"

    def on_train_begin(self, trainer):
        self.calls.append(("on_train_begin", trainer.iteration))

    def on_iteration_begin(self, trainer):
        self.calls.append(("on_iteration_begin", trainer.iteration))

    def on_rewards(self, trainer, trajectories):
        self.calls.append(("on_rewards", trainer.iteration))
        assert trajectories and all(t.reward is not None for t in trajectories)
        return {"recorder_episodes": float(len(trajectories))}

    def on_iteration_end(self, trainer, metrics):
        self.calls.append(("on_iteration_end", trainer.iteration))
        assert metrics["iteration"] == trainer.iteration

    def on_evaluate(self, trainer, metrics):
        self.calls.append(("on_evaluate", trainer.iteration))
        self.evaluations.append(metrics)

    def on_log(self, trainer, row):
        self.calls.append(("on_log", trainer.iteration))
        self.rows.append(row)

    def on_save(self, trainer, path):
        self.calls.append(("on_save", trainer.iteration))
        self.saved.append(path)

    def on_train_end(self, trainer, rows):
        self.calls.append(("on_train_end", trainer.iteration))
        self.end_rows = rows


def config(tmp_path, **overrides):
    values = dict(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                  micro_batch_size=4, learning_rate=1e-3, eval_at_start=False, progress=False, kl_coeff=0.0,
                  eval_episodes=2, output_dir=str(tmp_path / "run"), seed=1)
    values.update(overrides)
    return GRPOConfig(**values)


@slow
def test_a_custom_callback_sees_every_hook_in_the_documented_order(tiny_policy, tmp_path):
    recorder = Recorder()
    algo = GRPO(tiny_policy, make("ToyDigits-v0"), config(tmp_path, eval_at_start=True, eval_every=1, save_every=1),
                eval_env=make("ToyDigits-v0"), callbacks=[recorder])
    rows = algo.train()
    iteration = ["on_iteration_begin", "on_rewards", "on_iteration_end", "on_evaluate", "on_log", "on_save"]
    expected = [("on_train_begin", 0), ("on_evaluate", 0), ("on_log", 0),
                *[(hook, 0 if hook in iteration[:2] else 1) for hook in iteration],
                *[(hook, 1 if hook in iteration[:2] else 2) for hook in iteration],
                ("on_train_end", 2)]
    assert recorder.calls == expected
    # each iteration's hooks follow HOOK_ORDER, the module docstring's order
    assert iteration == sorted(iteration, key=HOOK_ORDER.index)
    assert [r["iteration"] for r in recorder.rows] == [0, 1, 2] and recorder.end_rows == rows
    assert all("eval_accuracy" in m for m in recorder.evaluations) and len(recorder.evaluations) == 3
    assert [p.name for p in recorder.saved] == ["checkpoint-1", "checkpoint-2"]
    assert all(p.is_dir() for p in recorder.saved)
    assert [r["recorder_episodes"] for r in rows[1:]] == [4.0, 4.0]  # on_rewards' metrics are recorded
    assert recorder is algo.callbacks[-1]  # the trainer's own come first


class StopAfter(TrainerCallback):
    def __init__(self, iteration):
        self.iteration = iteration

    def on_iteration_end(self, trainer, metrics):
        if trainer.iteration == self.iteration:
            trainer.should_stop = True


@slow
@pytest.mark.plots  # reads the run's PNGs (tests/conftest.py)
def test_a_callback_that_sets_should_stop_ends_the_run_after_a_checkpoint(tiny_policy, tmp_path):
    recorder = Recorder()
    algo = GRPO(tiny_policy, make("ToyDigits-v0"), config(tmp_path, train_iterations=5),
                callbacks=[StopAfter(2), recorder])
    rows = algo.train()
    assert [r["iteration"] for r in rows] == [1, 2] and algo.iteration == 2
    assert checkpoint_state.entries(tmp_path / "run") == ["checkpoint-2"]
    assert recorder.calls[-2:] == [("on_save", 2), ("on_train_end", 2)] and recorder.end_rows == rows
    assert (tmp_path / "run" / "metrics.png").is_file()  # an ordinary end: RunPlots drew the run


@slow
def test_early_stopping_stops_when_the_metric_stops_improving(tiny_policy, tmp_path):
    # skipped_nonfinite_steps is 0 every iteration: it never improves on the first row
    stopper = EarlyStopping("skipped_nonfinite_steps", patience=2, mode="min")
    algo = GRPO(tiny_policy, make("ToyDigits-v0"), config(tmp_path, train_iterations=6), callbacks=[stopper])
    rows = algo.train()
    assert [r["iteration"] for r in rows] == [1, 2, 3] and stopper.stopped_at == 3 and stopper.best == 0.0


def test_early_stopping_counts_only_rows_with_its_metric():
    trainer = SimpleNamespace(should_stop=False, iteration=0)
    stopper = EarlyStopping("eval_accuracy", patience=2, mode="max", min_delta=0.05)
    for iteration, row in enumerate([{"eval_accuracy": 0.5}, {"loss": 1.0}, {"eval_accuracy": 0.52},
                                     {"eval_accuracy": 0.6}, {"eval_accuracy": 0.6}, {"loss": 0.1}], start=1):
        trainer.iteration = iteration
        stopper.on_log(trainer, row)
        assert not trainer.should_stop, iteration  # 0.52 is within min_delta of 0.5; 0.6 improves on it
    stopper.on_log(trainer, {"eval_accuracy": 0.3})
    assert trainer.should_stop and stopper.best == 0.6
    with pytest.raises(ValueError, match="mode must be 'max' or 'min'"):
        EarlyStopping("loss", mode="lowest")


def kinds(algo):
    return [type(c) for c in algo.callbacks]


def test_the_built_in_callbacks_are_what_the_config_asks_for(tiny_policy, tmp_path):
    env = make("ToyDigits-v0")
    assert kinds(GRPO(tiny_policy, env, config(tmp_path))) == [RunPlots, RunLog]
    mine = Recorder()
    synced = GRPO(tiny_policy, env, config(tmp_path, kl_coeff=0.05, ref_sync_every=2), callbacks=[mine])
    assert kinds(synced) == [ReferenceSync, RunPlots, RunLog, Recorder] and synced.callbacks[-1] is mine
    prm = ProcessRewardModel.from_policy(tiny_policy)
    stepwise = make("Arithmetic-v0", mode="stepwise", max_steps=3)
    refreshed = GRPO(tiny_policy, stepwise, config(tmp_path, prm_weight=0.5, refresh={"every": 2}), prm=prm)
    assert kinds(refreshed) == [VerifierRefresh, RunPlots, RunLog]
    assert refreshed.callbacks[0] is refreshed.verifier_refresh
    unrefreshed = GRPO(tiny_policy, stepwise, config(tmp_path, prm_weight=0.5), prm=prm)
    assert kinds(unrefreshed) == [RunPlots, RunLog] and unrefreshed.verifier_refresh is None


@pytest.mark.parametrize("cls", [GRPO, DrGRPO, DAPO, RLOO, PPO, ReinforceStable, MCTSSearch, SFT, DPO, PRMTrainer])
def test_every_trainer_takes_callbacks(cls):
    assert "callbacks" in inspect.signature(cls).parameters


def test_only_callbacks_are_accepted():
    with pytest.raises(TypeError, match="object is not a TrainerCallback"):
        CallbackList([TrainerCallback(), object()])
