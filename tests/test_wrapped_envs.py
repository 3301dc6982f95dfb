"""Trainers and evaluate take gymnasium-wrapped envs; the wrappers' logic applies on every branch."""
import gymnasium
import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import ArithmeticEnv, make
from lmgym.episodes.rollout import SamplingSettings, rollout
from lmgym.evaluation import evaluate
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


class AskPolitely(gymnasium.ObservationWrapper):
    """A text observation wrapper: puts "Q: " before the prompt."""

    def observation(self, observation: str) -> str:
        return "Q: " + observation


class StepBonus(gymnasium.RewardWrapper):
    """A reward wrapper: +0.5 per step taken."""

    def reward(self, reward: float) -> float:
        return reward + 0.5


def wrapped_stepwise_env(max_episode_steps: int = 2) -> gymnasium.Env:
    base = ArithmeticEnv(level=1, mode="stepwise", max_steps=8)
    return StepBonus(gymnasium.wrappers.TimeLimit(AskPolitely(base), max_episode_steps=max_episode_steps))


def test_time_limit_and_reward_wrappers_apply_to_each_branch_on_its_own(tiny_policy):
    env = wrapped_stepwise_env(max_episode_steps=2)
    settings = SamplingSettings(max_new_tokens=4, temperature=1.0)
    trajs = rollout(env, tiny_policy, [{"seed": 0}, {"seed": 1}], 4, settings, torch.Generator().manual_seed(0))
    assert len(trajs) == 8
    # TimeLimit counts each branch's own steps: a counter shared by the 4 branches would end them after 1 step
    assert [len(t.step_ends) for t in trajs] == [2] * 8 and all(t.truncated for t in trajs)
    assert [t.step_rewards for t in trajs] == [[0.5, 0.5]] * 8  # StepBonus on every step, no correctness
    prompt = tiny_policy.tokenizer.decode(trajs[0].prompt_ids)
    assert "Q: What is" in prompt  # the observation wrapper changed the prompt the policy saw


@slow
def test_grpo_trains_a_wrapped_env_and_evaluate_takes_it(tiny_policy, tmp_path):
    env = StepBonus(gymnasium.wrappers.TimeLimit(AskPolitely(make("ToyDigits-v0")), max_episode_steps=1))
    test_env = gymnasium.wrappers.TimeLimit(make("Arithmetic-v0", split="test"), max_episode_steps=1)
    config = GRPOConfig(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=6,
                        learning_rate=1e-2, eval_every=2, eval_episodes=4, eval_at_start=False, progress=False,
                        seed=0, output_dir=str(tmp_path / "run"))
    before = [p.detach().clone() for p in tiny_policy.parameters()]
    algo = GRPO(tiny_policy, env, config, eval_env=test_env)
    rows = algo.train()
    assert len(rows) == 2 and len(algo.buffer) == 8
    for t in algo.buffer:  # the env's digit fraction plus the wrapper's bonus
        assert t.reward == pytest.approx(t.info["reward_components"]["digits"] + 0.5)
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_policy.parameters()))
    result = evaluate(tiny_policy, test_env, episodes=4, max_new_tokens=4)
    assert result["episodes"] == 4.0  # the trained policy scores the same on the wrapped and the bare test env
    assert result == evaluate(tiny_policy, make("Arithmetic-v0", split="test"), episodes=4, max_new_tokens=4)


def test_evaluate_on_a_wrapped_env_matches_the_bare_env(tiny_policy):
    bare = evaluate(tiny_policy, make("Arithmetic-v0", split="test"), episodes=6, max_new_tokens=4)
    wrapped_env = gymnasium.wrappers.TimeLimit(make("Arithmetic-v0", split="test"), max_episode_steps=10)
    assert evaluate(tiny_policy, wrapped_env, episodes=6, max_new_tokens=4) == bare
