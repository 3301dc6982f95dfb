"""GRPO variants: DAPO's dynamic sampling and overlong penalty, RLOO's baseline, Dr. GRPO's unscaled advantages."""
from types import SimpleNamespace

import pytest
import torch

from lmgym.algorithms import DAPO, GRPO, RLOO, DAPOConfig, DrGRPO, DrGRPOConfig, GRPOConfig, RLAlgorithm
from lmgym.algorithms.advantages import informative_groups, leave_one_out_advantages
from lmgym.algorithms.grpo_variants import overlong_penalty
from lmgym.algorithms.losses import completion_budget
from lmgym.buffers import Trajectory
from lmgym.envs import make
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

G = 3  # group size


def scripted_sampler(rounds):
    """A stand-in for RLAlgorithm.sample_groups: round k returns groups with the rewards in rounds[k]."""
    calls = []

    def sample_groups(self, num_prompts, first_group_id, seeds=None):
        rewards = rounds[len(calls)]
        calls.append(num_prompts)
        assert len(rewards) == num_prompts, (len(rewards), num_prompts)
        return [Trajectory([1], [5, 6], [-1.0, -1.0], [1, 1], reward=r, group_id=first_group_id + k)
                for k, group in enumerate(rewards) for r in group]

    return sample_groups, calls


def dapo(policy, **overrides):
    values = dict(prompts_per_iteration=4, samples_per_prompt=G, max_new_tokens=8, overlong_buffer=0,
                  max_refill_rounds=3, progress=False)
    values.update(overrides)
    return DAPO(policy, make("ToyDigits-v0"), DAPOConfig(**values))


def test_dynamic_sampling_drops_equal_groups_and_refills(tiny_policy, monkeypatch):
    rounds = [
        [(0, 0, 0), (0, 1, 0), (1, 1, 1), (.5, .5, .5)],    # 1 informative of 4 -> rate 1/4, ask for min(4, 3 / .25)
        [(1, 0, 1), (0, 0, 0), (0, 0, 1), (1, 1, 1)],       # 3 of 8 -> ask for ceil(1 / .375) = 3
        [(0, 0, 0), (1, 0, 0), (.2, .3, .3)],               # 5 informative >= 4: stop
    ]
    fake, calls = scripted_sampler(rounds)
    monkeypatch.setattr(RLAlgorithm, "sample_groups", fake)
    algo = dapo(tiny_policy)
    collected = algo.collect()
    assert calls == [4, 4, 3]
    assert algo._step_metrics["refill_rounds"] == [2.0]
    assert len({t.group_id for t in collected}) == 11  # group ids stay unique across rounds
    selected = algo.select_for_update(collected)
    groups = {}
    for t in selected:
        groups.setdefault(t.group_id, []).append(t.reward)
    assert len(groups) == 4                                             # exactly prompts_per_iteration groups
    assert all(len(r) == G for r in groups.values())                    # whole groups only, never < 2
    assert all(len(set(r)) > 1 for r in groups.values())                # no all-equal group
    assert sorted(groups.values()) == sorted([[0, 1, 0], [1, 0, 1], [0, 0, 1], [1, 0, 0]])


def test_dynamic_sampling_stops_after_max_refill_rounds(tiny_policy, monkeypatch):
    fake, calls = scripted_sampler([[(1, 1, 1)] * 4, [(1, 1, 1)] * 4, [(0, 1, 1)] + [(0, 0, 0)] * 3])
    monkeypatch.setattr(RLAlgorithm, "sample_groups", fake)
    algo = dapo(tiny_policy, max_refill_rounds=2)
    selected = algo.select_for_update(algo.collect())
    assert calls == [4, 4, 4]
    assert [t.reward for t in selected] == [0, 1, 1]  # the one informative group; none is padded in


def test_dynamic_sampling_in_a_training_iteration(tiny_policy, tmp_path, monkeypatch):
    algo = dapo(tiny_policy, output_dir=str(tmp_path / "run"), train_iterations=2, eval_at_start=False,
                micro_batch_size=12, learning_rate=1e-3)
    trained = []
    monkeypatch.setattr(algo, "update", lambda trajs: trained.append(list(trajs)) or {})
    for _ in range(2):
        algo.train_iteration()
    assert trained
    for batch in trained:
        sizes = {}
        for t in batch:
            sizes.setdefault(t.group_id, []).append(t.env_reward)
        assert all(len(r) == G and len(set(r)) > 1 for r in sizes.values())
        assert len(sizes) <= 4


def test_single_sample_group_is_never_informative():
    t = Trajectory([1], [2], [-1.0], [1], reward=1.0, group_id=7)
    assert informative_groups([t]) == []


def test_rloo_hand_values(tiny_policy):
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 4.0, 5.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 2])
    # group 0: 1 - (0 + 0 + 1) / 3 = 2/3, 0 - (1 + 0 + 1) / 3 = -2/3; group 1: 2 - 4, 4 - 2; a lone sample: 0
    expected = torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3, -2.0, 2.0, 0.0])
    assert torch.allclose(leave_one_out_advantages(rewards, groups), expected)
    algo = RLOO(tiny_policy, make("ToyDigits-v0"), GRPOConfig(samples_per_prompt=4, progress=False))
    batch = SimpleNamespace(rewards=rewards, group_ids=groups, loss_mask=torch.tensor([[1.0, 1.0, 0.0]] * 7))
    adv = algo.advantages(batch)
    assert torch.allclose(adv[:, 0], expected) and torch.all(adv[:, 2] == 0)


def test_dr_grpo_has_no_std_scaling(tiny_policy):
    rewards = torch.tensor([0.0, 2.0, 0.0, 0.0, 0.0, 1.0])
    batch = SimpleNamespace(rewards=rewards, group_ids=torch.tensor([0, 0, 1, 1, 1, 1]), loss_mask=torch.ones(6, 2),
                            fields={})  # no per-token fields: outcome advantages
    dr = DrGRPO(tiny_policy, make("ToyDigits-v0"), DrGRPOConfig(samples_per_prompt=2, progress=False))
    assert dr.config.loss_aggregation == "constant" and not dr.config.scale_by_std
    assert torch.allclose(dr.advantages(batch)[:, 0], torch.tensor([-1.0, 1.0, -0.25, -0.25, -0.25, 0.75]))
    grpo = GRPO(tiny_policy, make("ToyDigits-v0"), GRPOConfig(samples_per_prompt=2, progress=False))
    std = 2.0 ** 0.5  # sample std of (0, 2)
    assert grpo.advantages(batch)[0, 0].item() == pytest.approx(-1.0 / (std + 1e-4))


def test_dapo_overlong_penalty_values():
    # budget 20, buffer 4: free up to 16 tokens, then -1/4 per token down to -1 at 20
    assert [overlong_penalty(n, 20, 4) for n in (10, 16, 17, 18, 19, 20, 25)] == [0, 0, -0.25, -0.5, -0.75, -1, -1]
    assert overlong_penalty(18, 20, 4, factor=0.5) == -0.25
    assert overlong_penalty(20, 20, 0) == 0.0  # no buffer: no penalty


def test_dapo_applies_the_penalty_to_sampled_rewards(tiny_policy, monkeypatch):
    def fake(self, num_prompts, first_group_id, seeds=None):
        return [Trajectory([1], [5] * n, [-1.0] * n, [1] * n, reward=1.0, group_id=first_group_id)
                for n in (4, 7, 8)]

    monkeypatch.setattr(RLAlgorithm, "sample_groups", fake)
    algo = dapo(tiny_policy, max_new_tokens=8, overlong_buffer=4)
    trajs = algo.sample_groups(1, 0)
    assert [t.reward for t in trajs] == [1.0, 0.25, 0.0]
    assert [t.step_rewards[-1] for t in trajs] == [1.0, 0.25, 0.0]
    assert [t.env_reward for t in trajs] == [1.0, 1.0, 1.0]
    assert [t.shaping for t in trajs] == [{"overlong_penalty": 0.0}, {"overlong_penalty": -0.75},
                                          {"overlong_penalty": -1.0}]
    assert informative_groups(trajs) == []  # dynamic sampling looks at the env reward


def test_dapo_config_defaults_and_checks():
    c = DAPOConfig()
    assert (c.clip_low, c.clip_high, c.loss_aggregation, c.kl_coeff) == (0.2, 0.28, "token_mean", 0.0)
    from lmgym.training import ConfigError

    with pytest.raises(ConfigError, match="overlong_buffer"):
        DAPOConfig(max_new_tokens=8, overlong_buffer=8)


def test_one_completion_budget_for_the_loss_dapo_and_its_config_check(tiny_policy):
    stepwise = make("Arithmetic-v0", mode="stepwise", max_steps=3)
    algo = DAPO(tiny_policy, stepwise, DAPOConfig(max_new_tokens=8, overlong_buffer=4, progress=False))
    assert algo.completion_budget == completion_budget(algo.config, stepwise) == 8 * 3  # every step's tokens
    single = DAPO(tiny_policy, make("Arithmetic-v0"), DAPOConfig(max_new_tokens=8, overlong_buffer=4, progress=False))
    assert single.completion_budget == completion_budget(single.config) == 8
    assert completion_budget(DAPOConfig(max_new_tokens=8, loss_length_normalizer=50), stepwise) == 50
    from lmgym.training import ConfigError

    with pytest.raises(ConfigError, match=r"must be in \[0, 8\) \(the completion budget of one action"):
        DAPOConfig(max_new_tokens=8, overlong_buffer=8)  # what every env allows at least
