"""What a trainer puts on its saved model's card: algorithm, env and dataset, config, last evaluation.

The card itself is policies/loading/model_card.py's (huggingface_hub.ModelCard); this module only gathers the
run's details, which live here (the trainer, its config, its metrics) and not in policies/.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lmgym.envs.registry import env_id
from lmgym.policies.loading.model_card import CARD_FILE, TrainingDetails, write_model_card

# Hub datasets of the built-in envs (the env's own HUB_ID attribute is used for any other env that has one).
# Generated envs (Arithmetic-v0, ToolArithmetic-v0) have none.
ENV_DATASETS = {
    "GSM8K": "openai/gsm8k", "MATH": "HuggingFaceH4/MATH-500",
    "HotpotQA": "hotpotqa/hotpot_qa", "RAG-HotpotQA": "hotpotqa/hotpot_qa",
}
# TRL's tags for the trainers it shares with us (its model cards carry the trainer's name in lower case)
ALGORITHM_TAGS = {"ReinforceStable": "reinforce", "MCTSSearch": "mcts", "PRMTrainer": "prm"}


def env_dataset(env: Any) -> str | None:
    """The hub dataset id an env draws its problems from, where known."""
    if env is None:
        return None
    name = env_id(env).rpartition("/")[2]
    family = name.rpartition("-v")[0] if "-v" in name else name
    for prefix in ("Reflection-",):
        family = family.removeprefix(prefix)
    known = ENV_DATASETS.get(family) or ENV_DATASETS.get(family.removesuffix("Stepwise"))
    hub_id = known or getattr(getattr(env, "unwrapped", env), "HUB_ID", None)
    return hub_id if isinstance(hub_id, str) and "/" in hub_id else None


def last_evaluation(rows: list[dict[str, Any]]) -> tuple[dict[str, float], int | None]:
    """The numeric `eval_*` metrics of the last row that has any, and its iteration."""
    for row in reversed(rows):
        results = {k: float(v) for k, v in row.items()
                   if k.startswith("eval_") and isinstance(v, (int, float)) and not isinstance(v, bool)}
        if results:
            return results, row.get("iteration")
    return {}, None


def training_details(trainer: Any) -> TrainingDetails:
    """The card details of `trainer`'s run: its name (as tag), env, datasets, described config, evaluation."""
    algorithm = type(trainer).__name__
    envs = [getattr(trainer, name, None) for name in ("env", "eval_env")]
    datasets = list(dict.fromkeys(d for d in map(env_dataset, envs) if d))
    rows = trainer.logger.read() if getattr(trainer, "logger", None) is not None else []
    results, at = last_evaluation(rows)
    config = json.loads(json.dumps(trainer.describe(), default=str))  # plain values for YAML
    tag = ALGORITHM_TAGS.get(algorithm, algorithm.lower())
    return TrainingDetails(algorithm=algorithm, env_id=env_id(envs[0]) if envs[0] is not None else None,
                           tags=[tag, "reinforcement-learning"] if hasattr(trainer, "env") else [tag],
                           datasets=datasets, config=config, results=results, results_iteration=at)


def write_trainer_cards(trainer: Any, folder: Path) -> None:
    """Rewrite the cards of a `save_model` folder (and of its `adapter/`) with the run's details; a folder
    its policy wrote no card into (a PRM's) is left as it is."""
    if not (folder / CARD_FILE).is_file():
        return
    policy = trainer.policy
    name = getattr(policy, "base_name_or_path", None) or getattr(policy, "name_or_path", None)
    details = training_details(trainer)
    repo_id = trainer.config.push_to_hub or None
    title = trainer.config.push_to_hub.rpartition("/")[2] or Path(trainer.config.output_dir).resolve().name
    write_model_card(folder, name, adapter=False, details=details, title=title, repo_id=repo_id)
    if (folder / "adapter" / "adapter_config.json").is_file():  # pushed with the folder, as its adapter/
        write_model_card(folder / "adapter", name, adapter=True, details=details, title=f"{title} (LoRA adapter)")
