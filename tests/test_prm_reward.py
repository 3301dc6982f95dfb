"""A PRM's step scores as a dense reward: shaping at step ends, process advantages (GRPO), GAE (PPO), switches."""
import json
import math

import pytest
import torch

from lmgym.algorithms import GRPO, PPO, DrGRPO, DrGRPOConfig, GRPOConfig, PPOConfig, RLConfig
from lmgym.algorithms.advantages import process_advantages
from lmgym.algorithms.prm.reward import PRM_REWARDS, STEP_ENDS, add_prm_rewards, weigh_rewards
from lmgym.buffers import ADVANTAGES, RETURNS, TOKEN_REWARD_SHAPING, Trajectory, collate
from lmgym.envs import make
from tests.test_config_validation import one_line_error
from tests.tiers import slow

S = math.sqrt(0.1)  # unbiased std of the step rewards 0.9, 0.3, 0.6, 0.2


class ScriptedPRM:
    """Scores each step from its token ids (deterministic, in [0, 1]); remembers each call's batch size."""

    def __init__(self, table=None):
        self.table, self.calls = table, []

    def score_trajectories(self, trajectories):
        self.calls.append(len(trajectories))
        if self.table is not None:
            return [list(self.table[i]) for i in range(len(trajectories))]
        return [[(sum(t.completion_ids[:end + 1]) % 5) / 4 for end in t.step_ends] for t in trajectories]


def trajectory(n, step_ends, step_rewards, group_id=0, first_token=1):
    return Trajectory(list(range(5, 8)), list(range(first_token, first_token + n)), [-1.0] * n, [1] * n,
                      reward=sum(step_rewards), step_rewards=list(step_rewards), step_ends=list(step_ends),
                      group_id=group_id)


def config(**overrides):
    return RLConfig(progress=False, **overrides)


def test_process_advantages_hand_values():
    # group 0: A steps 0.9 (token 0), 0.3 (token 2); B steps 0.6 (token 1), 0.2 (token 3); mean 0.5, std sqrt(0.1)
    # group 1: two steps of equal reward -> no signal from the steps
    rewards = torch.tensor([[0.9, 0.0, 0.3, 0.0], [0.0, 0.6, 0.0, 0.2], [0.0, 0.7, 0.0, 0.7]])
    mask = torch.tensor([[1.0, 0, 1, 0], [0, 1, 0, 1], [0, 1, 0, 1]])
    groups = torch.tensor([0, 0, 1])
    adv = process_advantages(rewards, mask, groups, eps=0.0)
    expected = torch.tensor([[0.2 / S, -0.2 / S, -0.2 / S, 0.0],
                             [-0.2 / S, -0.2 / S, -0.3 / S, -0.3 / S],
                             [0.0, 0.0, 0.0, 0.0]])
    assert torch.allclose(adv, expected, atol=1e-5)
    centred = process_advantages(rewards, mask, groups, scale_by_std=False)
    assert torch.allclose(centred, expected * S, atol=1e-6)
    with_outcome = process_advantages(rewards, mask, groups, torch.tensor([1.0, 0.0, 3.0]), eps=0.0)
    outcome = torch.tensor([1 / math.sqrt(2), -1 / math.sqrt(2), 0.0])  # (r - 0.5) / std 0.7071; a group of one: 0
    assert torch.allclose(with_outcome, expected + outcome[:, None], atol=1e-5)


def test_prm_scores_land_at_step_ends_and_come_off_again():
    t = trajectory(6, [1, 4], [0.0, 1.0])
    prm = ScriptedPRM([[0.25, 0.75]])
    metrics = weigh_rewards([t], prm, config(prm_weight=2.0, outcome_weight=0.5))
    assert prm.calls == [1]
    assert metrics == {"prm_score": 0.5, "prm_solution_score": 0.25}
    assert PRM_REWARDS.get(t) == [0.0, 0.5, 0.0, 0.0, 1.5, 0.0]
    assert STEP_ENDS.get(t) == [0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    assert t.shaping == {"outcome_scale": -0.5, "prm": 2.0}
    assert (t.env_reward, t.reward) == (1.0, 2.5)
    batch = collate([t], pad_id=0)
    assert batch.token_rewards[0].tolist() == pytest.approx([0.0, 0.5, 0.0, 0.0, 1.5 + 0.5, 0.0])
    t.reset_run_data()
    assert (t.reward, t.step_rewards, t.token_data, t.shaping) == (1.0, [0.0, 1.0], {}, {})


def test_outcome_weight_scales_the_env_reward_of_each_step_not_other_shaping():
    t = trajectory(5, [1, 3], [0.5, 1.0])
    t.add_shaping("overlong_penalty", -0.25)  # paid at the last step, as DAPO does before the weights
    weigh_rewards([t], None, config(outcome_weight=3.0))
    assert TOKEN_REWARD_SHAPING.get(t) == [0.0, 1.0, 0.0, 2.0, 0.0]
    assert t.reward == pytest.approx(3 * 1.5 - 0.25) and t.env_reward == 1.5
    assert collate([t], pad_id=0).token_rewards[0].tolist() == pytest.approx([0.0, 1.5, 0.0, 2.75, 0.0])


def test_defaults_change_nothing_and_never_call_the_prm():
    t = trajectory(4, [3], [1.0])
    before = t.to_dict()
    prm = ScriptedPRM()
    assert weigh_rewards([t], prm, config()) == {}
    assert t.to_dict() == before and prm.calls == []


def test_bad_scores_are_one_line_errors():
    t = trajectory(4, [1, 3], [0.0, 1.0])
    for table, message in (([[0.5]], "1 step scores for its 2 steps"), ([[0.5, 1.5]], r"in \[0, 1\]"),
                           ([[0.5, float("nan")]], r"in \[0, 1\]")):
        with pytest.raises(ValueError, match=message) as info:
            add_prm_rewards([t], ScriptedPRM(table), 1.0)
        assert "\n" not in str(info.value)


def test_config_switches_are_checked(tiny_policy, tmp_path):
    assert "prm_weight must be >= 0" in one_line_error(RLConfig, prm_weight=-1)
    assert "outcome_weight must be >= 0" in one_line_error(RLConfig, outcome_weight=-0.5)
    assert "outcome_weight must be > 0 when prm_weight is 0" in one_line_error(RLConfig, outcome_weight=0)
    RLConfig(outcome_weight=0, prm_weight=1.0)  # the PRM alone
    grpo = GRPOConfig(prm_weight=0.5, progress=False, output_dir=str(tmp_path / "run"))
    assert "prm_weight is 0.5, but no PRM was given" in one_line_error(GRPO, tiny_policy, make("Arithmetic-v0"), grpo)
    with pytest.raises(TypeError, match="score_trajectories"):
        GRPO(tiny_policy, make("Arithmetic-v0"), grpo, prm=object())
    other_vocab = ScriptedPRM()
    other_vocab.tokenizer = type("Tok", (), {"get_vocab": lambda self: {"a": 0}})()
    with pytest.raises(ValueError, match="tokenizer differs from the policy's"):
        GRPO(tiny_policy, make("Arithmetic-v0"), grpo, prm=other_vocab)
    same_vocab = ScriptedPRM()
    same_vocab.tokenizer = tiny_policy.tokenizer
    assert GRPO(tiny_policy, make("Arithmetic-v0"), grpo, prm=same_vocab).prm is same_vocab


def grpo_batch(cls=GRPO, config_cls=GRPOConfig, tiny_policy=None, tmp_path=None):
    algo = cls(tiny_policy, make("Arithmetic-v0"), config_cls(prm_weight=1.0, progress=False,
                                                              output_dir=str(tmp_path / "run")), prm=ScriptedPRM())
    trajs = [trajectory(4, [0, 2], [0.0, 1.0], first_token=1), trajectory(4, [1, 3], [0.0, 0.0], first_token=1)]
    algo.prm.table = [[0.9, 0.3], [0.6, 0.2]]
    weigh_rewards(trajs, algo.prm, algo.config)
    return algo, trajs, collate(trajs, algo.pad_id, "cpu", algo.token_fields)


def test_grpo_takes_process_advantages_with_the_env_reward_as_outcome(tiny_policy, tmp_path):
    algo, trajs, batch = grpo_batch(tiny_policy=tiny_policy, tmp_path=tmp_path)
    steps = torch.tensor([[0.2, -0.2, -0.2, 0.0], [-0.2, -0.2, -0.3, -0.3]]) / (S + 1e-4)
    outcome = torch.tensor([[0.5], [-0.5]]) / (1 / math.sqrt(2) + 1e-4)  # env rewards 1 and 0
    assert torch.allclose(algo.advantages(batch), steps + outcome, atol=1e-4)


def test_dr_grpo_centres_the_process_advantages_without_the_std(tiny_policy, tmp_path):
    algo, trajs, batch = grpo_batch(DrGRPO, DrGRPOConfig, tiny_policy, tmp_path)
    steps = torch.tensor([[0.2, -0.2, -0.2, 0.0], [-0.2, -0.2, -0.3, -0.3]])
    assert torch.allclose(algo.advantages(batch), steps + torch.tensor([[0.5], [-0.5]]), atol=1e-6)


def small(cls, tmp_path, **overrides):
    values = dict(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                  micro_batch_size=4, learning_rate=1e-3, eval_at_start=False, progress=False, kl_coeff=0.0,
                  eval_episodes=2, output_dir=str(tmp_path / "run"))
    values.update(overrides)
    return cls(**values)


def stepwise():
    return make("Arithmetic-v0", mode="stepwise", max_steps=3)


@slow
def test_grpo_with_a_prm_of_weight_zero_trains_exactly_as_without(tiny_policy, tmp_path):
    import copy

    other = copy.deepcopy(tiny_policy)
    env = make("Arithmetic-v0")
    rows = GRPO(tiny_policy, env, small(GRPOConfig, tmp_path / "a", train_iterations=1)).train()
    prm = ScriptedPRM()
    rows_prm = GRPO(other, env, small(GRPOConfig, tmp_path / "b", train_iterations=1), prm=prm).train()
    assert prm.calls == []
    assert rows[-1]["loss"] == rows_prm[-1]["loss"] and rows[-1]["rewards"] == rows_prm[-1]["rewards"]
    for a, b in zip(tiny_policy.parameters(), other.parameters()):
        assert torch.equal(a, b)


class SpyGRPO(GRPO):
    """GRPO remembering the trajectories it prepared last."""

    def prepare(self, trajectories):
        super().prepare(trajectories)
        self.prepared = trajectories


@slow
def test_grpo_trains_two_iterations_on_a_scripted_prm(tiny_policy, tmp_path):
    prm = ScriptedPRM()
    algo = SpyGRPO(tiny_policy, stepwise(), small(GRPOConfig, tmp_path, prm_weight=0.5, outcome_weight=0.0), prm=prm)
    rows = algo.train()
    assert prm.calls == [4, 4]  # one batched call per iteration, every episode in it
    assert all(0 <= r["prm_score"] <= 1 and r["prm_solution_score"] <= r["prm_score"] + 1e-9 for r in rows[-2:])
    trajs = algo.prepared
    assert all("prm" in t.shaping and "outcome_scale" in t.shaping for t in trajs)
    batch = collate(trajs, algo.pad_id, "cpu", algo.token_fields)
    prm_rewards = batch[PRM_REWARDS]
    expected = process_advantages(prm_rewards, batch[STEP_ENDS], batch.group_ids,
                                  batch.rewards - prm_rewards.sum(1)) * batch.loss_mask
    assert torch.allclose(batch.advantages, expected, atol=1e-5)
    assert batch[STEP_ENDS].sum() > len(trajs)  # stepwise: several steps per episode
    assert json.loads((tmp_path / "run" / "config.json").read_text())["prm"] == "ScriptedPRM"


@slow
def test_ppo_gae_reads_the_prm_rewards(tiny_policy, tmp_path):
    algo = PPO(tiny_policy, stepwise(), small(PPOConfig, tmp_path, gamma=1.0, lam=1.0, whiten_advantages=False,
                                              prm_weight=2.0), prm=ScriptedPRM([[0.5, 0.25], [1.0, 0.0]]))
    trajs = [trajectory(5, [1, 4], [0.0, 1.0]), trajectory(5, [2, 3], [0.0, 0.0])]
    weigh_rewards(trajs, algo.prm, algo.config)
    algo.prepare(trajs)
    expected_rewards = [[0.0, 1.0, 0.0, 0.0, 1.5], [0.0, 0.0, 2.0, 0.0, 0.0]]
    for t, rewards in zip(trajs, expected_rewards):
        to_go = [sum(rewards[i:]) for i in range(len(rewards))]
        assert RETURNS.get(t) == pytest.approx(to_go, abs=1e-5)  # gamma = lam = 1: returns are rewards-to-go
        assert len(ADVANTAGES.get(t)) == 5
    rows = PPO(tiny_policy, stepwise(), small(PPOConfig, tmp_path / "run2", prm_weight=1.0, update_epochs=1),
               prm=ScriptedPRM()).train()
    assert all("prm_score" in r for r in rows[-2:])


@slow
def test_quickstart_trains_stepwise_with_a_prm_folder(tiny_policy, tmp_path, tmp_path_factory, capsys):
    from lmgym.policies import build_tiny_model
    from lmgym.policies.prm import ProcessRewardModel
    from tests.test_examples import QUICKSTART, error_line, load_script, metrics
    from tests.tiny_models import save_tiny_model_dir

    model_dir = save_tiny_model_dir(tmp_path_factory, build_tiny_model)
    ProcessRewardModel.from_policy(tiny_policy).save(tmp_path / "prm")
    quickstart = load_script(QUICKSTART)
    common = ["--preset", "cpu", "--model", model_dir, "--max_steps", "1", "--prompts_per_iteration", "1",
              "--num_generations", "2", "--max_new_tokens", "4", "--eval_episodes", "2", "--no-eval_at_start",
              "--no-progress", "--stepwise", "--prm", str(tmp_path / "prm")]
    assert error_line(quickstart, common + ["--output_dir", str(tmp_path / "a")]) == (
        "error: --prm is given but --prm_weight is 0: the PRM would score nothing; set --prm_weight > 0")
    quickstart.main(common + ["--prm_weight", "0.5", "--outcome_weight", "0", "--output_dir", str(tmp_path / "b")])
    assert f"prm={tmp_path / 'prm'}" in capsys.readouterr().out
    row = metrics(tmp_path / "b")[-1]
    assert row["prm_score"] == pytest.approx(0.5)  # from_policy's head starts at zero: every step scores 0.5
