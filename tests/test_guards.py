"""Loop guards: non-finite optimizer steps are skipped, counted and bounded; reward failures are counted."""
import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.episodes.rollout import SamplingSettings, rollout
from lmgym.training.cli import run_with_clear_errors
from lmgym.training.guards import NonFiniteTrainingError
from tests.tiers import slow
from tests.toy_env import DigitsEnv


def tiny_algo(tmp_path, env=None, **overrides):
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    values = dict(train_iterations=3, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                  output_dir=str(tmp_path / "run"), progress=False, eval_at_start=False, learning_rate=1e-2,
                  max_nonfinite_steps=2, save_every=0)
    values.update(overrides)
    return GRPO(policy, env or make("ToyDigits-v0"), GRPOConfig(**values))


def poison(algo, bad_calls, how="loss"):
    """Make `forward` produce NaN log-probs (how="loss") or an infinite gradient (how="grad") on the
    optimizer steps numbered in `bad_calls` (1-based)."""
    original, calls = algo.forward, {"n": 0}

    def forward(batch):
        calls["n"] += 1
        out = original(batch)
        if calls["n"] in bad_calls:
            if how == "loss":
                out["logprobs"] = out["logprobs"] * float("nan")
            else:  # finite loss, infinite gradient
                out["logprobs"].register_hook(lambda g: g * float("inf"))
        return out

    algo.forward = forward


@pytest.mark.parametrize("how", ["loss", "grad"])
def test_a_non_finite_step_is_skipped_counted_and_logged(tmp_path, capsys, how):
    algo = tiny_algo(tmp_path)
    poison(algo, {2}, how)  # one micro-batch per step: the second step's only forward
    params = {}

    def snapshot(iteration):
        params[iteration] = [p.detach().clone() for p in algo.policy.parameters()]

    original_update = algo.update

    def update(trajectories):
        snapshot(algo.iteration)
        out = original_update(trajectories)
        snapshot(f"after{algo.iteration}")
        return out

    algo.update = update
    rows = algo.train()
    assert [r["skipped_nonfinite_steps"] for r in rows] == [0, 1, 0]
    assert all(torch.equal(a, b) for a, b in zip(params[1], params["after1"]))  # no step taken
    assert not all(torch.equal(a, b) for a, b in zip(params[0], params["after0"]))
    assert algo.optimizer.state_dict()["state"][0]["step"] == 2  # 3 iterations, one step skipped
    assert algo.scheduler.last_epoch == 2
    assert all(torch.isfinite(p).all() for p in algo.policy.parameters())
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "iteration 2: non-finite loss or gradient norm" in warnings[0]
    assert "optimizer step skipped (1 in a row" in warnings[0]


def test_too_many_non_finite_steps_in_a_row_stop_the_run_in_one_line(tmp_path, monkeypatch):
    algo = tiny_algo(tmp_path, max_nonfinite_steps=2)
    poison(algo, {2, 3})
    with pytest.raises(NonFiniteTrainingError) as info:
        algo.train()
    message = str(info.value)
    assert "\n" not in message and "training stopped at iteration 3" in message
    assert "2 optimizer steps in a row were not finite (max_nonfinite_steps=2)" in message
    assert [r["iteration"] for r in algo.logger.read()] == [1, 2]
    monkeypatch.delenv("RLGYM_TRACEBACK", raising=False)
    again = tiny_algo(tmp_path / "b", max_nonfinite_steps=2)
    poison(again, {1, 2})
    with pytest.raises(SystemExit) as exit_info:
        run_with_clear_errors(again.train)
    assert str(exit_info.value.code).startswith("error: training stopped at iteration 2")


class FailingRewardEnv(DigitsEnv):
    """Every third step reports a failed reward function, as the env does when one raises or times out."""

    calls = 0

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        FailingRewardEnv.calls += 1
        if FailingRewardEnv.calls % 3 == 0:
            info["reward_errors"] = {"digits": f"ZeroDivisionError: call {FailingRewardEnv.calls}"}
        return obs, reward, terminated, truncated, info


@slow
def test_reward_failures_are_counted_and_the_first_is_logged(tmp_path, capsys):
    FailingRewardEnv.calls = 0
    algo = tiny_algo(tmp_path, env=FailingRewardEnv(), train_iterations=2, prompts_per_iteration=3)
    rows = algo.train()
    assert [r["reward_failures"] for r in rows] == [2, 2]  # 6 episodes per iteration, every third fails
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        "warning: iteration 1: a reward function failed on 2 of 6 episodes (scored 0 for that reward); "
        "first: digits: ZeroDivisionError: call 3",
        "warning: iteration 2: a reward function failed on 2 of 6 episodes (scored 0 for that reward); "
        "first: digits: ZeroDivisionError: call 9"]
    assert sum(bool(t.info.get("reward_errors")) for t in algo.buffer) == 2


class StepwiseFake:
    """Two-step episodes; the first step reports a reward failure, the second does not."""

    is_multi_step = is_stepwise = True
    stop_strings = ["\n"]

    def reset(self, seed=None):
        self.state = {"step": 0}
        return "go", {}

    def get_state(self):
        return dict(self.state)

    def set_state(self, state):
        self.state = dict(state)

    def step(self, action):
        self.state["step"] += 1
        info = {"reward_errors": {"fmt": "TimeoutError: 1 s"}} if self.state["step"] == 1 else {"correct": False}
        return "", 0.0, self.state["step"] == 2, False, info


def test_rollout_keeps_a_reward_failure_of_an_earlier_step(tiny_policy):
    trajs = rollout(StepwiseFake(), tiny_policy, [{"seed": 0}], 2, SamplingSettings(max_new_tokens=3),
                    torch.Generator().manual_seed(0))
    assert [t.info["reward_errors"] for t in trajs] == [{"fmt": "TimeoutError: 1 s"}] * 2
    assert [t.outcome.reward_errors for t in trajs] == [{"fmt": "TimeoutError: 1 s"}] * 2
