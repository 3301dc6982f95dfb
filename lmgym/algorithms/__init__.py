"""What learns: the `RLAlgorithm` family (REINFORCE-stable, GRPO and its variants, PPO, MCTS-search), SFT,
DPO, the PRM trainer and verifiers trained on the policy's own samples, and the pieces they share (losses, KL,
advantages, reward combination, the reference model). Training infrastructure is in `training`, search at
inference in `search`."""
from lmgym.algorithms.base import RLAlgorithm
from lmgym.algorithms.config import RLConfig
from lmgym.algorithms.dapo import DAPO, DAPOConfig
from lmgym.algorithms.dpo import DPO, IPO, DPOConfig, LengthNormalizedDPO, dpo_loss
from lmgym.algorithms.dr_grpo import DrGRPO, DrGRPOConfig
from lmgym.algorithms.grpo import GRPO, GRPOConfig
from lmgym.algorithms.mcts_search import MCTSSearch, MCTSSearchConfig
from lmgym.algorithms.ppo import PPO, PPOConfig
from lmgym.algorithms.prm_losses import bradley_terry_loss, pointwise_loss
from lmgym.algorithms.prm_trainer import PRMConfig, PRMTrainer
from lmgym.algorithms.reflection_metrics import evaluate_reflection, reflection_episodes, reflection_metrics
from lmgym.algorithms.reflection_metrics import turn_accuracy_curve, turn_metrics
from lmgym.algorithms.reflection_plots import plot_turn_accuracy
from lmgym.algorithms.reinforce import ReinforceStable, ReinforceStableConfig
from lmgym.algorithms.rloo import RLOO, RLOOConfig
from lmgym.algorithms.sft import SFT, SFTConfig
from lmgym.algorithms.verifier_eval import VerifierReport, evaluate_verifier, score_samples
from lmgym.algorithms.verifier_metrics import VerifierMetrics, expected_calibration_error, roc_auc, verifier_metrics
from lmgym.algorithms.verifier_training import VERIFIER_KINDS, verifier_items, verifier_trainer

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

