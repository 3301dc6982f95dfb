"""Old import paths of modules and names that left `algorithms/` (0.1.0 -> 0.2.0): `import algorithms.trainer`
still works for this release, gives the module's new home (`training.trainer`), and warns once with the new
path; `from algorithms import evaluate` gives `search.evaluate`'s function the same way. The aliases go in
the next release.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings

MOVED = {
    "atomic_io": "core.atomic_io",
    "beam_search": "search.beam_search",
    "checkpoints": "training.checkpoints",
    "cli": "training.cli",
    "data_parallel": "training.data_parallel",
    "distributed": "training.distributed",
    "env_info": "training.env_info",
    "epoch_draws": "training.epoch_draws",
    "evaluate": "search.evaluate",
    "fsdp": "training.fsdp",
    "guards": "training.guards",
    "mcts": "search.mcts",
    "mcts_tree": "search.mcts_tree",
    "pipeline_table": "training.pipeline_table",
    "plots": "training.plots",
    "preference_data": "traindata.preference_data",
    "progress": "training.progress",
    "reflection_pairs": "traindata.reflection_pairs",
    "run_logger": "training.run_logger",
    "search": "search.search",
    "search_eval": "search.search_eval",
    "search_play": "search.search_play",
    "search_types": "search.search_types",
    "sft_data": "traindata.sft_data",
    "sharded_checkpoints": "training.sharded_checkpoints",
    "state_checks": "training.state_checks",
    "step_data": "traindata.step_data",
    "tool_errors": "training.tool_errors",
    "trainer": "training.trainer",
    "trainer_state": "training.trainer_state",
    "trl_names": "training.trl_names",
    "wandb_auth": "training.wandb_auth",
}


# names `from algorithms import X` gave in 0.1.0 that now live in another package
MOVED_NAMES = {
    **{name: "training" for name in ("Trainer", "TrainerConfig", "ConfigError", "load_config")},
    **{name: "search" for name in ("evaluate", "pass_at_k", "MCTS", "MCTSConfig", "SearchSettings", "run_search",
                                   "evaluate_search", "SearchResult", "StepScorer")},
    **{name: "traindata" for name in ("PreferencePair", "load_preference_pairs", "save_preference_pairs",
                                      "SFTExample", "ChatExample", "load_sft_examples", "gsm8k_sft_examples",
                                      "arithmetic_sft_examples", "ReflectionTriple", "pairs_from_episodes",
                                      "pairs_from_triples", "load_triples")},
    **{name: "episodes" for name in ("SamplingSettings", "rollout")},
}


class MovedModuleWarning(FutureWarning):
    """An import used a module path that moved; the message names the new one."""


def moved_name(name: str):
    """`algorithms.<name>` for a name that moved to another package: that package's object, with one warning
    line naming where to import it from. Raises AttributeError for any other name."""
    package = MOVED_NAMES.get(name)
    if package is None:
        raise AttributeError(f"module 'algorithms' has no attribute {name!r}")
    warnings.warn(f"algorithms.{name} moved to {package}.{name}; import it with `from {package} import {name}` "
                  f"(the old name goes in the next release)", MovedModuleWarning, stacklevel=3)
    return getattr(importlib.import_module(package), name)


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new path (the same module object, so patches apply to both)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec):
        warnings.warn(f"{spec.name} moved to {self.new}; import it from there (the old path goes in the next "
                      f"release)", MovedModuleWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        """Nothing to run: the module at the new path is already imported."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds `algorithms.<old>` (and `algorithms.<old>.<sub>`) for every moved module and nothing else."""

    def find_spec(self, fullname: str, path=None, target=None):
        package, _, name = fullname.partition(".")
        head, dot, rest = name.partition(".")
        new = MOVED.get(head) if package == "algorithms" else None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new + dot + rest)) if new else None


if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())  # first: else the path finder loads a moved package's submodule twice
