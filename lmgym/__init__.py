"""lmgym: train language models with reinforcement learning, in the shape of a gym.

    from lmgym import GRPO, GRPOConfig, HFPolicy, make

Importing `lmgym` registers the environments (so `gymnasium.make("lmgym:lmgym/Arithmetic-v0")` works in a fresh
process) and loads the generic env base; every other name below loads its module on first use, so `import lmgym`
stays light (no torch, no sympy).
"""
from __future__ import annotations

import lmgym.moved  # noqa: F401 - installs the finder that keeps MOVED_MODULES' old paths importable
from lmgym.core.extras import lazy_names
from lmgym.envs import __all__ as _ENV_NAMES  # importing lmgym.envs registers the environments (see above)

__version__ = "0.3.0"

# top-level name -> the subpackage that defines it (loaded on first access)
_LAZY: dict[str, str] = {
    **dict.fromkeys(_ENV_NAMES, "lmgym.envs"),
    **{name: "lmgym.algorithms" for name in (
        "RLAlgorithm", "RLConfig", "GRPO", "GRPOConfig", "ReinforceStable", "ReinforceStableConfig", "PPO",
        "PPOConfig", "DrGRPO", "DrGRPOConfig", "DAPO", "DAPOConfig", "RLOO", "RLOOConfig", "MCTSSearch",
        "MCTSSearchConfig", "PRMConfig", "PRMTrainer", "DPO", "DPOConfig", "IPO", "LengthNormalizedDPO", "SFT",
        "SFTConfig")},
    **{name: "lmgym.policies" for name in (
        "Policy", "HFPolicy", "FewShotStepwisePolicy", "LoraSettings", "ProcessRewardModel", "EMBEDDED_MODEL",
        "build_tiny_model", "build_tiny_tokenizer", "load_model_and_tokenizer")},
    **{name: "lmgym.training" for name in ("Trainer", "TrainerConfig", "ConfigError", "load_config", "RunLogger",
                                           "plot_run", "TrainerCallback", "EarlyStopping")},
    **{name: "lmgym.search" for name in ("run_search", "SearchSettings", "MCTS", "MCTSConfig")},
    **{name: "lmgym.evaluation" for name in ("evaluate", "pass_at_k", "evaluate_search", "evaluate_curves")},
    **{name: "lmgym.episodes" for name in ("rollout", "SamplingSettings")},
    **{name: "lmgym.buffers" for name in ("ReplayBuffer", "Trajectory")},
    **{name: "lmgym.retrieval" for name in ("DocumentStore", "StoreConfig")},
    "create_app": "lmgym.serving",
}

__all__ = ["__version__", *_ENV_NAMES, *_LAZY]


# load the subpackage or module that defines a `_LAZY` name on first use
__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
