"""What learns: the `RLAlgorithm` family (REINFORCE-stable, GRPO and its variants, PPO, MCTS-search), SFT,
DPO, the PRM trainer and verifiers trained on the policy's own samples, and the pieces they share (losses, KL, advantages, reward combination, the
reference model). Training infrastructure is in `training`, search at inference in `search`."""
from algorithms.moved import moved_name  # old paths (algorithms.trainer, algorithms.evaluate) warn and work
from algorithms.base import RLAlgorithm
from algorithms.config import RLConfig
from algorithms.dapo import DAPO, DAPOConfig
from algorithms.dpo import DPO, IPO, DPOConfig, LengthNormalizedDPO, dpo_loss
from algorithms.dr_grpo import DrGRPO, DrGRPOConfig
from algorithms.grpo import GRPO, GRPOConfig
from algorithms.mcts_search import MCTSSearch, MCTSSearchConfig
from algorithms.ppo import PPO, PPOConfig
from algorithms.prm_losses import bradley_terry_loss, pointwise_loss
from algorithms.prm_trainer import PRMConfig, PRMTrainer
from algorithms.reflection_metrics import evaluate_reflection, reflection_episodes, reflection_metrics
from algorithms.reflection_metrics import turn_accuracy_curve, turn_metrics
from algorithms.reflection_plots import plot_turn_accuracy
from algorithms.reinforce import ReinforceStable, ReinforceStableConfig
from algorithms.rloo import RLOO, RLOOConfig
from algorithms.sft import SFT, SFTConfig
from algorithms.verifier_eval import VerifierReport, evaluate_verifier, score_samples
from algorithms.verifier_metrics import VerifierMetrics, expected_calibration_error, roc_auc, verifier_metrics
from algorithms.verifier_training import VERIFIER_KINDS, verifier_items, verifier_trainer

__all__ = [
    "RLAlgorithm", "RLConfig", "GRPO", "GRPOConfig", "ReinforceStable", "ReinforceStableConfig",
    "PPO", "PPOConfig", "DrGRPO", "DrGRPOConfig", "DAPO", "DAPOConfig", "RLOO", "RLOOConfig",
    "MCTSSearch", "MCTSSearchConfig", "PRMConfig", "PRMTrainer", "bradley_terry_loss", "pointwise_loss",
    "DPO", "DPOConfig", "IPO", "LengthNormalizedDPO", "dpo_loss", "SFT", "SFTConfig",
    "evaluate_reflection", "reflection_episodes", "reflection_metrics",
    "turn_metrics", "turn_accuracy_curve", "plot_turn_accuracy",
    "VERIFIER_KINDS", "VerifierMetrics", "VerifierReport", "evaluate_verifier", "expected_calibration_error",
    "roc_auc", "score_samples", "verifier_items", "verifier_metrics", "verifier_trainer",
]


def __getattr__(name: str):
    """Names that moved to another package in 0.2.0 (`from algorithms import evaluate`), with a warning."""
    return moved_name(name)
