"""TRL-style reward functions are called once per batch of episodes, as TRL's GRPOTrainer calls them: with
prompts, completions, completion_ids and every extra column as lists (envs/rewards/batch.py)."""
import gymnasium
import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make, per_sample_reward
from lmgym.episodes import EpisodeEngine, SamplingSettings, rollout

ROWS = [
    {"prompt": "Name a color.", "answer": "red", "topic": "colors"},
    {"prompt": [{"role": "user", "content": "What is 2+2?"}], "answer": "4", "topic": "sums"},
    {"prompt": "Name a fruit.", "answer": "fig", "topic": "fruits"},
]
SETTINGS = SamplingSettings(max_new_tokens=6, temperature=1.0)


def vowel_share(completions, **kwargs):
    return [sum(ch in "aeiou" for ch in str(c)) / max(len(str(c)), 1) for c in completions]


class Spy:
    """A TRL-style reward that records every call's keyword lists."""

    def __init__(self, values=vowel_share):
        self.calls, self.values = [], values

    def __call__(self, prompts, completions, completion_ids, **kwargs):
        self.calls.append({"prompts": prompts, "completions": completions, "completion_ids": completion_ids,
                           **kwargs})
        return self.values(completions)


def test_a_rollout_calls_it_once_with_the_whole_batch_and_the_sampled_token_ids(tiny_policy):
    spy = Spy()
    env = make("Dataset-v0", dataset=ROWS, reward_fns={"spy": spy})
    starts = [{"options": {"index": k}} for k in range(3)]
    trajectories = rollout(env, tiny_policy, starts, 4, SETTINGS, sample_key=7)
    [call] = spy.calls
    assert len(call["completions"]) == len(call["completion_ids"]) == len(call["prompts"]) == 12
    assert call["completion_ids"] == [t.completion_ids for t in trajectories]  # the tokens as sampled
    assert call["topic"] == ["colors"] * 4 + ["sums"] * 4 + ["fruits"] * 4  # extra columns, one per completion
    assert call["prompts"][4] == ROWS[1]["prompt"] and call["completions"][4][0]["role"] == "assistant"
    assert call["completions"][0] == trajectories[0].text
    assert [t.reward for t in trajectories] == vowel_share(call["completions"])
    assert all(t.info["reward_components"]["spy"] == t.reward and "pending_rewards" not in t.info
               for t in trajectories)


def test_batched_scores_equal_per_episode_scores_in_a_stepwise_env(tiny_policy):
    """Episodes that end at different steps are still scored in one call, to the same rewards."""
    def share(completions, **kwargs):
        calls.append(len(completions))
        return vowel_share(completions)

    calls = []
    batched = rollout(make("ArithmeticStepwise-v0", max_steps=3, reward_fns={"r": share}), tiny_policy,
                      [{"seed": s} for s in range(3)], 3, SETTINGS, sample_key=3)
    per_episode = rollout(make("ArithmeticStepwise-v0", max_steps=3,
                               reward_fns={"r": per_sample_reward(lambda c, g, i: vowel_share([c])[0])}),
                          tiny_policy, [{"seed": s} for s in range(3)], 3, SETTINGS, sample_key=3)
    assert calls == [9]
    assert [t.step_rewards for t in batched] == [t.step_rewards for t in per_episode]
    assert [t.completion_ids for t in batched] == [t.completion_ids for t in per_episode]


def test_grpo_calls_it_once_per_iteration_with_prompts_x_samples(tiny_policy, tmp_path):
    spy = Spy()
    env = make("Dataset-v0", dataset=ROWS, reward_fns={"spy": spy})
    config = GRPOConfig(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=3, max_new_tokens=6,
                        eval_every=0, micro_batch_size=6, learning_rate=1e-2, output_dir=str(tmp_path),
                        progress=False, seed=0, eval_at_start=False)
    before = [p.detach().clone() for p in tiny_policy.model.parameters()]
    rows = GRPO(tiny_policy, env, config).train()
    training_calls = [c for c in spy.calls if len(c["completions"]) == 6]
    assert len(rows) == 2 and len(training_calls) == 2
    assert all(len(ids) > 0 for c in training_calls for ids in c["completion_ids"])
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_policy.model.parameters()))


def test_the_engine_settles_what_one_advance_ended(tiny_policy):
    """Search and other engine users read rewards right after advance: they are settled there."""
    spy = Spy()
    engine = EpisodeEngine(make("Dataset-v0", dataset=ROWS, reward_fns={"spy": spy}), tiny_policy, SETTINGS)
    branches = engine.start([{"options": {"index": 0}}], group_size=2)
    engine.advance(branches, sample_key=1)
    assert len(spy.calls) == 1 and len(spy.calls[0]["completions"]) == 2
    assert all("pending_rewards" not in b.info and b.step_rewards == [b.info["reward_components"]["spy"]]
               for b in branches)


def test_none_for_one_sample_and_a_failing_call_are_contained_per_batch(tiny_policy):
    def first_none(completions, **kwargs):
        return [None] + [1.0] * (len(completions) - 1)

    def broken(completions, **kwargs):
        raise RuntimeError("reward server down")

    env = make("Dataset-v0", dataset=ROWS, reward_fns={"first": first_none, "broken": broken,
                                                       "short": lambda completions, **kw: [1.0]})
    trajectories = rollout(env, tiny_policy, [{"options": {"index": 0}}], 3, SETTINGS, sample_key=0)
    first = trajectories[0].info
    assert first["reward_components"]["first"] is None and trajectories[1].info["reward_components"]["first"] == 1.0
    assert all(t.info["reward_errors"]["broken"] == "RuntimeError: reward server down" for t in trajectories)
    assert trajectories[0].info["reward_errors"]["short"].startswith(
        "ValueError: a TRL-style reward function must return one reward per completion (3); got 1")
    assert [t.reward for t in trajectories] == [0.0, 1.0, 1.0]


def test_env_step_alone_scores_one_completion_without_token_ids():
    spy = Spy()
    env = make("Dataset-v0", dataset=ROWS, reward_fns={"spy": spy})
    env.reset(options={"index": 0})
    _, _, _, _, info = env.step("blue")
    assert info["reward_errors"]["spy"].startswith("ValueError: completion_ids are passed only when the episode "
                                                   "engine scores a batch")

    seen = []
    env = make("Dataset-v0", dataset=ROWS, reward_fns={"r": lambda completions, **kw: seen.append(kw) or [0.5]})
    env.reset(options={"index": 0})
    assert env.step("blue")[1] == 0.5 and seen[0]["topic"] == ["colors"] and "completion_ids" not in seen[0]


def test_a_wrapped_env_calls_it_once_per_episode_so_the_wrapper_sees_every_reward(tiny_policy):
    calls = []

    def counted(completions, **kwargs):
        calls.append(len(completions))
        return [1.0] * len(completions)

    env = gymnasium.wrappers.TransformReward(make("Dataset-v0", dataset=ROWS, reward_fns=[counted]),
                                             lambda r: 10 * r)
    trajectories = rollout(env, tiny_policy, [{"options": {"index": 0}}], 3, SETTINGS, sample_key=0)
    assert calls == [1, 1, 1] and [t.reward for t in trajectories] == [10.0] * 3


def test_trainer_state_must_have_a_default():
    def staged(completions, trainer_state, **kwargs):
        return [0.0] * len(completions)

    with pytest.raises(ValueError, match="requires 'trainer_state', which this toolkit does not pass"):
        make("Dataset-v0", dataset=ROWS, reward_fns=[staged])
