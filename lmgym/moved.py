"""Old import paths that still work for one release, each with one `MovedModuleWarning` line naming the new one.

0.3.0 made the toolkit one package: `import envs` (0.2.0) is now `import lmgym.envs`. The old top-level names
are installed as thin packages that hand over to this module, so `from envs import make` and
`import training.trainer` keep working until the next release, as the same module objects (a patch applies to
both). Modules that moved inside the package in 0.3.0 are listed in `MOVED_MODULES` and work the same way.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings

OLD_PACKAGES = ("core", "envs", "retrieval", "buffers", "policies", "episodes", "training", "search", "traindata",
                "algorithms", "serving")
MOVED_MODULES: dict[str, str] = {  # modules that moved inside lmgym in 0.3.0: old dotted path -> new one
    "lmgym.algorithms.dapo": "lmgym.algorithms.grpo_variants",
    "lmgym.algorithms.dr_grpo": "lmgym.algorithms.grpo_variants",
    "lmgym.algorithms.rloo": "lmgym.algorithms.grpo_variants",
    "lmgym.algorithms.prm_losses": "lmgym.algorithms.prm.trainer",
    "lmgym.algorithms.prm_reward": "lmgym.algorithms.prm.reward",
    "lmgym.algorithms.prm_trainer": "lmgym.algorithms.prm.trainer",
    "lmgym.algorithms.step_credit": "lmgym.algorithms.prm.step_credit",
    "lmgym.algorithms.verifier_refresh": "lmgym.algorithms.prm.refresh",
    "lmgym.algorithms.verifier_training": "lmgym.algorithms.prm.verifier_training",
    # measuring policies, verifiers and runs: lmgym.evaluation
    "lmgym.search.evaluate": "lmgym.evaluation.evaluate",
    "lmgym.search.rag_evaluate": "lmgym.evaluation.rag_evaluate",
    "lmgym.search.search_eval": "lmgym.evaluation.search_eval",
    "lmgym.search.curves": "lmgym.evaluation.curves",
    "lmgym.search.weighted_vote": "lmgym.search.votes",
    "lmgym.algorithms.verifier_eval": "lmgym.evaluation.verifier_eval",
    "lmgym.algorithms.verifier_metrics": "lmgym.evaluation.verifier_metrics",
    "lmgym.algorithms.reflection_metrics": "lmgym.evaluation.reflection_metrics",
    "lmgym.algorithms.reflection_critic_metrics": "lmgym.evaluation.reflection_critic_metrics",
    "lmgym.algorithms.reflection_plots": "lmgym.evaluation.reflection_metrics",
    "lmgym.algorithms.episode_metrics": "lmgym.evaluation.episode_metrics",
    "lmgym.training.reward_metrics": "lmgym.evaluation.episode_metrics",
    "lmgym.training.tool_errors": "lmgym.evaluation.episode_metrics",
    "lmgym.training.checkpoint_layout": "lmgym.training.checkpoints.layout",
    "lmgym.training.sharded_checkpoints": "lmgym.training.checkpoints.sharded",
    "lmgym.training.trainer_state": "lmgym.training.checkpoints.trainer_state",
    "lmgym.training.state_checks": "lmgym.training.checkpoints.state_checks",
    "lmgym.training.env_info": "lmgym.envs.registry",
    "lmgym.training.epoch_draws": "lmgym.training.token_batches",
    "lmgym.training.interrupts": "lmgym.training.guards",
    "lmgym.training.wandb_auth": "lmgym.training.config",
    "lmgym.policies.fast_decode": "lmgym.policies.decoding.fast",
    "lmgym.policies.decode_layers": "lmgym.policies.decoding.layers",
    "lmgym.policies.decode_step": "lmgym.policies.decoding.step",
    "lmgym.policies.decode_weights": "lmgym.policies.decoding.weights",
    "lmgym.policies.generation": "lmgym.policies.decoding.generation",
    "lmgym.policies.models": "lmgym.policies.loading.models",
    "lmgym.policies.pretrained_files": "lmgym.policies.loading.pretrained_files",
    "lmgym.policies.hub": "lmgym.policies.loading.hub",
    "lmgym.policies.quantization": "lmgym.policies.loading.quantization",
    "lmgym.policies.lora_config": "lmgym.policies.loading.lora_config",
    "lmgym.policies.unsharded": "lmgym.policies.loading.unsharded",
    "lmgym.policies.model_card": "lmgym.policies.loading.model_card",
    "lmgym.policies.card_metadata": "lmgym.policies.loading.models",
    "lmgym.policies.attention_backends": "lmgym.policies.padded_passes",
    "lmgym.policies.checkpointing": "lmgym.policies.padded_passes",
    "lmgym.policies.compile_options": "lmgym.policies.hf",
    "lmgym.envs.reward_batch": "lmgym.envs.rewards.batch",
    "lmgym.envs.reward_forms": "lmgym.envs.rewards.forms",
    "lmgym.envs.reward_guard": "lmgym.envs.rewards.guard",
    "lmgym.envs.hotpotqa_data": "lmgym.envs.hotpotqa.data",
    "lmgym.envs.hotpotqa_retrieved": "lmgym.envs.hotpotqa.retrieved",
    "lmgym.envs.rag": "lmgym.envs.hotpotqa.rag",
    "lmgym.envs.qa_metrics": "lmgym.envs.hotpotqa.metrics",
    "lmgym.envs.rag_rewards": "lmgym.envs.hotpotqa.rewards",
    "lmgym.envs.tool_arithmetic": "lmgym.envs.arithmetic",
    "lmgym.envs.grading.options": "lmgym.envs.answers",
    "lmgym.core.suggestions": "lmgym.core.messages",
    "lmgym.retrieval.metrics": "lmgym.retrieval.fusion",
    "lmgym.episodes.limits": "lmgym.episodes.env_state",
}
# old dotted path -> new dotted path; an entry covers the modules below it too
MOVED: dict[str, str] = {**{name: f"lmgym.{name}" for name in OLD_PACKAGES}, **MOVED_MODULES}


class MovedModuleWarning(FutureWarning):
    """An import used a module path that moved; the message names the new one."""


def new_path(fullname: str) -> str | None:
    """The new dotted path of an old one (the longest moved prefix decides), or None if it did not move."""
    parts = fullname.split(".")
    for n in range(len(parts), 0, -1):
        new = MOVED.get(".".join(parts[:n]))
        if new is not None:
            return ".".join([new, *parts[n:]])
    return None


def _warn(old: str, new: str, stacklevel: int) -> None:
    warnings.warn(f"{old} moved to {new}; import it from there (the old path goes in the next release)",
                  MovedModuleWarning, stacklevel=stacklevel)


def replace_with_new(old: str):
    """Called by an old top-level package's `__init__`: warn and put the new package in its place."""
    new = new_path(old)
    _warn(old, new, stacklevel=4)
    module = importlib.import_module(new)
    sys.modules[old] = module
    return module


class _KeepsExportedNames(types.ModuleType):
    """A package below which an old module path was imported. The import system then sets the package's
    attribute of that name to the module; where the package exports another object of that name (the function
    `lmgym.search.evaluate` beside the old module path `lmgym.search.evaluate`), the name stays that object, as
    it was before the module moved."""

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and value.__name__ != f"{self.__name__}.{name}":  # via an old path
            current = getattr(self, name, None)
            if current is not None and not isinstance(current, types.ModuleType):
                return
        super().__setattr__(name, value)


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new path (the same module object)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec):
        if spec.name.partition(".")[0] not in OLD_PACKAGES:  # below an old top-level name, that name warned
            _warn(spec.name, self.new, stacklevel=2)
        parent = sys.modules.get(spec.name.rpartition(".")[0])
        if type(parent) is types.ModuleType:  # exactly a plain module (not a subclass): its class can be swapped
            parent.__class__ = _KeepsExportedNames
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        """Nothing to run: the module at the new path is already imported."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds every old path below a moved package or module (not the old top-level names: their packages
    warn and hand over), and nothing else."""

    def find_spec(self, fullname: str, path=None, target=None):
        new = None if fullname in OLD_PACKAGES else new_path(fullname)
        if new is None or importlib.util.find_spec(new) is None:  # a path that never existed stays an ImportError
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())  # first: else the path finder loads a moved module twice
