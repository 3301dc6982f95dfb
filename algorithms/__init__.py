"""Trainers: the shared `Trainer` loop, RL algorithms on one core (`RLAlgorithm(Trainer)`), the PRM trainer,
SFT, DPO, reflection metrics and pairs, evaluation and search at inference (greedy, maj@n, best-of-n, beam, MCTS)."""
from algorithms.base import RLAlgorithm
from algorithms.config import ConfigError, RLConfig, TrainerConfig, load_config
from algorithms.evaluate import evaluate, pass_at_k
from algorithms.dapo import DAPO, DAPOConfig
from algorithms.dpo import DPO, IPO, DPOConfig, LengthNormalizedDPO, dpo_loss
from algorithms.dr_grpo import DrGRPO, DrGRPOConfig
from algorithms.grpo import GRPO, GRPOConfig
from algorithms.mcts import MCTS, MCTSConfig
from algorithms.mcts_search import MCTSSearch, MCTSSearchConfig
from algorithms.ppo import PPO, PPOConfig
from algorithms.preference_data import PreferencePair, load_preference_pairs, save_preference_pairs
from algorithms.prm_losses import bradley_terry_loss, pointwise_loss
from algorithms.prm_trainer import PRMConfig, PRMTrainer
from algorithms.reflection_metrics import evaluate_reflection, reflection_episodes, reflection_metrics
from algorithms.reflection_pairs import ReflectionTriple, load_triples, pairs_from_episodes, pairs_from_triples
from algorithms.reinforce import ReinforceStable, ReinforceStableConfig
from algorithms.rloo import RLOO, RLOOConfig
from algorithms.search import SearchSettings, run_search
from algorithms.search_eval import evaluate_search
from algorithms.search_types import SearchResult, StepScorer
from algorithms.sft import SFT, SFTConfig
from algorithms.sft_data import (
    ChatExample, SFTExample, arithmetic_sft_examples, gsm8k_sft_examples, load_sft_examples,
)
from algorithms.trainer import Trainer
from episodes.rollout import SamplingSettings, rollout

__all__ = [
    "Trainer", "TrainerConfig", "RLAlgorithm", "RLConfig", "ConfigError", "load_config", "evaluate", "pass_at_k",
    "GRPO", "GRPOConfig",
    "ReinforceStable", "ReinforceStableConfig", "SamplingSettings", "rollout",
    "PPO", "PPOConfig", "DrGRPO", "DrGRPOConfig", "DAPO", "DAPOConfig", "RLOO", "RLOOConfig",
    "PRMConfig", "PRMTrainer", "bradley_terry_loss", "pointwise_loss",
    "MCTS", "MCTSConfig", "MCTSSearch", "MCTSSearchConfig",
    "SearchSettings", "run_search", "evaluate_search", "SearchResult", "StepScorer",
    "DPO", "DPOConfig", "IPO", "LengthNormalizedDPO", "dpo_loss", "PreferencePair", "load_preference_pairs",
    "save_preference_pairs",
    "SFT", "SFTConfig", "SFTExample", "ChatExample", "load_sft_examples", "gsm8k_sft_examples",
    "arithmetic_sft_examples",
    "evaluate_reflection", "reflection_episodes", "reflection_metrics", "ReflectionTriple", "pairs_from_episodes",
    "pairs_from_triples", "load_triples",
]
