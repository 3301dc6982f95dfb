"""What learns: the `RLAlgorithm` family (REINFORCE-stable, GRPO and its variants, PPO, MCTS-search), SFT,
DPO, the PRM trainer and verifiers trained on the policy's own samples, and the pieces they share (losses, KL,
advantages, reward combination, the reference model). Training infrastructure is in `training`, search at
inference in `search`, measuring policies, verifiers and runs in `evaluation`."""
from lmgym.algorithms.base import RLAlgorithm
from lmgym.algorithms.config import RLConfig
from lmgym.algorithms.dpo import DPO, IPO, DPOConfig, LengthNormalizedDPO, dpo_loss
from lmgym.algorithms.grpo import GRPO, GRPOConfig
from lmgym.algorithms.grpo_variants import DAPO, RLOO, DAPOConfig, DrGRPO, DrGRPOConfig, RLOOConfig
from lmgym.algorithms.mcts_search import MCTSSearch, MCTSSearchConfig
from lmgym.algorithms.ppo import PPO, PPOConfig
from lmgym.algorithms.prm.trainer import PRMConfig, PRMTrainer, bradley_terry_loss, pointwise_loss
from lmgym.algorithms.prm.verifier_training import VERIFIER_KINDS, verifier_items, verifier_trainer
from lmgym.algorithms.reinforce import ReinforceStable, ReinforceStableConfig
from lmgym.algorithms.sft import SFT, SFTConfig

# exported here until 0.3.0, now lmgym.evaluation's: still importable from here for one release (not in __all__)
from lmgym.evaluation import (  # noqa: F401
    VerifierMetrics,
    VerifierReport,
    evaluate_reflection,
    evaluate_verifier,
    expected_calibration_error,
    plot_turn_accuracy,
    reflection_episodes,
    reflection_metrics,
    roc_auc,
    score_samples,
    turn_accuracy_curve,
    turn_metrics,
    verifier_metrics,
)

__all__ = [
    "RLAlgorithm", "RLConfig", "GRPO", "GRPOConfig", "ReinforceStable", "ReinforceStableConfig",
    "PPO", "PPOConfig", "DrGRPO", "DrGRPOConfig", "DAPO", "DAPOConfig", "RLOO", "RLOOConfig",
    "MCTSSearch", "MCTSSearchConfig", "PRMConfig", "PRMTrainer", "bradley_terry_loss", "pointwise_loss",
    "DPO", "DPOConfig", "IPO", "LengthNormalizedDPO", "dpo_loss", "SFT", "SFTConfig",
    "VERIFIER_KINDS", "verifier_items", "verifier_trainer",
]

