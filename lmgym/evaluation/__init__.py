"""Every way a policy, a verifier or a run is measured: greedy accuracy, pass@k and maj@k (`evaluate`), search
methods side by side at equal token budgets and accuracy-vs-tokens curves (`evaluate_search`, `evaluate_curves`),
verifiers compared on one pool of samples (`evaluate_reranking`) and every rule's curve from that pool (`pool_curves`),
HotpotQA episodes' retrieval and answers (`evaluate_rag`), reflection's per-turn metrics (`evaluate_reflection`),
a verifier's accuracy, AUC and calibration (`evaluate_verifier`), the metrics each iteration logs about its
episodes (`episode_metrics`), and how sure a comparison is (`paired_bootstrap`, `seed_spread`)."""
from lmgym.evaluation.curves import evaluate_curves, plot_curves, save_curves
from lmgym.evaluation.episode_metrics import (
                                              ToolErrorCounter,
                                              component_means,
                                              component_metrics,
                                              count_tool_errors,
                                              episode_metrics,
)
from lmgym.evaluation.evaluate import evaluate, majority_correct, pass_at_k, sampled_metrics
from lmgym.evaluation.pool_curves import pool_curves
from lmgym.evaluation.rag_evaluate import evaluate_rag
from lmgym.evaluation.reflection_critic_metrics import CRITIC_METRICS, critic_metrics
from lmgym.evaluation.reflection_metrics import (
                                              evaluate_reflection,
                                              plot_turn_accuracy,
                                              reflection_episodes,
                                              reflection_metrics,
                                              turn_accuracy_curve,
                                              turn_metrics,
)
from lmgym.evaluation.rerank_eval import evaluate_reranking
from lmgym.evaluation.search_eval import evaluate_search
from lmgym.evaluation.statistics import (
    PairedDifference,
    SeedComparison,
    SeedSpread,
    compare_seeds,
    interval_text,
    paired_bootstrap,
    seed_mean_paired,
    seed_spread,
)
from lmgym.evaluation.verifier_eval import VerifierReport, evaluate_verifier, score_samples
from lmgym.evaluation.verifier_metrics import VerifierMetrics, expected_calibration_error, roc_auc, verifier_metrics

__all__ = [
    "evaluate", "pass_at_k", "majority_correct", "sampled_metrics", "evaluate_search", "evaluate_reranking",
    "pool_curves", "evaluate_curves", "plot_curves", "save_curves", "evaluate_rag", "evaluate_reflection",
    "reflection_episodes", "reflection_metrics",
    "turn_metrics", "turn_accuracy_curve", "plot_turn_accuracy", "CRITIC_METRICS", "critic_metrics",
    "VerifierReport", "evaluate_verifier", "score_samples", "VerifierMetrics", "expected_calibration_error",
    "roc_auc", "verifier_metrics", "episode_metrics", "component_means", "component_metrics", "count_tool_errors",
    "ToolErrorCounter", "PairedDifference", "SeedSpread", "paired_bootstrap", "seed_spread",
    "SeedComparison", "compare_seeds", "interval_text", "seed_mean_paired",
]
