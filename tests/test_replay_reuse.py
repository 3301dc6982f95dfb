"""Off-policy reuse: episodes of earlier iterations, kept in the replay buffer, are trained on again."""
import json

import numpy as np
import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig, ReinforceStable, ReinforceStableConfig
from lmgym.algorithms.replay import truncated_importance_weights
from lmgym.buffers import ReplayBuffer
from lmgym.envs import make
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.training.config import ConfigError
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


def tiny():
    tok = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")


def grpo(out, iterations=3, replay=1, **extra):
    config = GRPOConfig(train_iterations=iterations, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=6,
                        learning_rate=1e-2, micro_batch_size=8, eval_at_start=False, progress=False, seed=0,
                        replay_iterations=replay, output_dir=str(out), **extra)
    return GRPO(tiny(), make("ToyDigits-v0"), config)


@slow
def test_each_iteration_also_trains_on_the_previous_ones(tmp_path):
    algo = grpo(tmp_path / "run", iterations=4, replay=2)
    rows = algo.train()
    assert [r["replayed_trajectories"] for r in rows] == [0, 8, 16, 16]  # 8 episodes an iteration, 2 kept
    assert [r["trained_trajectories"] for r in rows] == [8, 8, 8, 8]     # fresh ones (the metric's meaning is kept)
    assert sorted({t.iteration for t in algo.buffer}) == [1, 2, 3]        # the last iteration and the two before


@slow
def test_replay_changes_the_update_and_off_is_on_policy(tmp_path):
    on = grpo(tmp_path / "on", replay=0).train()
    off = grpo(tmp_path / "off", replay=1).train()
    assert "replayed_trajectories" not in on[0]
    assert on[0]["loss"] == pytest.approx(off[0]["loss"], abs=1e-7)  # nothing to replay in the first iteration
    assert abs(on[1]["grad_norm"] - off[1]["grad_norm"]) > 1e-6         # the second trains on 16, not 8


@slow
def test_a_resumed_run_replays_exactly_what_an_uninterrupted_one_does(tmp_path):
    whole = grpo(tmp_path / "whole", iterations=4, kl_coeff=0.04).train()
    grpo(tmp_path / "cut", iterations=2, kl_coeff=0.04).train()
    resumed = grpo(tmp_path / "cut", iterations=4, kl_coeff=0.04).train(resume=True)
    for a, b in zip(whole, resumed):
        assert a["rewards"] == b["rewards"]
        assert a.get("replayed_trajectories") == b.get("replayed_trajectories")
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)


def test_replayed_tokens_are_weighed_by_the_truncated_importance_ratio():
    logprobs = torch.log(torch.tensor([[0.5, 0.2], [0.5, 0.2]]))
    behaviour = torch.log(torch.tensor([[0.25, 0.4], [0.25, 0.4]]))
    weights = truncated_importance_weights(logprobs, behaviour, torch.tensor([False, True]))
    assert torch.allclose(weights, torch.tensor([[1.0, 1.0], [1.0, 0.5]]))  # ratio 2 is cut to 1, 0.5 kept


@slow
def test_reinforce_stable_replays_its_cached_episodes(tmp_path):
    config = ReinforceStableConfig(train_iterations=3, prompts_per_iteration=4, max_new_tokens=6, learning_rate=1e-2,
                                   micro_batch_size=8, eval_at_start=False, progress=False, seed=0,
                                   replay_iterations=1, output_dir=str(tmp_path))
    algo = ReinforceStable(tiny(), make("ToyDigits-v0"), config)
    rows = algo.train()
    assert [r["replayed_trajectories"] for r in rows] == [0, 4, 4]
    assert all(np.isfinite(r["loss"]) for r in rows)
    saved = tmp_path.glob("checkpoint-*/buffer.jsonl")
    lines = max(saved).read_text().splitlines()[1:]
    assert sorted({json.loads(line)["iteration"] for line in lines}) == [1, 2]  # what a resume replays


def test_a_buffer_too_small_for_the_replay_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"replay_iterations=2 keeps 3 iterations of 8 episodes \(24\); the replay "
                                         r"buffer holds 10"):
        GRPO(tiny(), make("ToyDigits-v0"), GRPOConfig(prompts_per_iteration=2, samples_per_prompt=4,
                                                      replay_iterations=2, output_dir=str(tmp_path)),
             buffer=ReplayBuffer(10))


def test_replay_is_refused_over_several_processes():
    config = GRPOConfig(prompts_per_iteration=2, samples_per_prompt=4, replay_iterations=1)
    config.check_shards(1)
    with pytest.raises(ConfigError, match="replay_iterations needs a single process"):
        config.check_shards(2)
