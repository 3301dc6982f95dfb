"""Every algorithm learns the toy task (reward = fraction of digits) on the tiny model, on the CPU, in seconds."""
import numpy as np
import pytest

from lmgym.algorithms import (
    GRPO,
    PPO,
    RLOO,
    DrGRPO,
    DrGRPOConfig,
    GRPOConfig,
    PPOConfig,
    ReinforceStable,
    ReinforceStableConfig,
    RLOOConfig,
)
from lmgym.envs import make
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

CASES = {
    "reinforce_stable": (ReinforceStable, ReinforceStableConfig, {}),            # its KL, re-synced every 2
    "ppo": (PPO, PPOConfig, dict(kl_coeff=0.05, update_epochs=2, minibatch_size=0)),  # per-token KL in the reward
    "grpo": (GRPO, GRPOConfig, dict(kl_coeff=0.0)),
    "dr_grpo": (DrGRPO, DrGRPOConfig, {}),
    "rloo": (RLOO, RLOOConfig, {}),
}


@slow
@pytest.mark.parametrize("name", list(CASES))
def test_reward_rises_on_toy_digits(name, tmp_path):
    cls, config_cls, extra = CASES[name]
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    config = config_cls(train_iterations=40, prompts_per_iteration=4, samples_per_prompt=4, max_new_tokens=8,
                        learning_rate=1e-2, micro_batch_size=16, eval_at_start=False, progress=False, seed=0,
                        output_dir=str(tmp_path / name), **extra)
    rows = cls(policy, make("ToyDigits-v0"), config).train()
    rewards = [r["reward_mean"] for r in rows]
    first, last = np.mean(rewards[:5]), np.mean(rewards[-5:])
    assert last > first + 0.15 and last > 1.5 * first, (name, first, last, rewards)
