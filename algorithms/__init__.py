"""RL algorithms sharing one core (`RLAlgorithm`), plus evaluation."""
from algorithms.base import RLAlgorithm
from algorithms.config import ConfigError, RLConfig, load_config
from algorithms.evaluate import evaluate, pass_at_k
from algorithms.dapo import DAPO, DAPOConfig
from algorithms.dr_grpo import DrGRPO, DrGRPOConfig
from algorithms.grpo import GRPO, GRPOConfig
from algorithms.ppo import PPO, PPOConfig
from algorithms.reinforce import ReinforceStable, ReinforceStableConfig
from algorithms.rloo import RLOO, RLOOConfig
from episodes.rollout import SamplingSettings, rollout

__all__ = [
    "RLAlgorithm", "RLConfig", "ConfigError", "load_config", "evaluate", "pass_at_k", "GRPO", "GRPOConfig",
    "ReinforceStable", "ReinforceStableConfig", "SamplingSettings", "rollout",
    "PPO", "PPOConfig", "DrGRPO", "DrGRPOConfig", "DAPO", "DAPOConfig", "RLOO", "RLOOConfig",
]
