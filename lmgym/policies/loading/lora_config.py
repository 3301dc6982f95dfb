"""What `HFPolicy(lora=...)` takes: the toolkit's `LoraSettings` or peft's own `LoraConfig`, as a peft config."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from lmgym.core.checked_config import CheckedConfig


@dataclass
class LoraSettings(CheckedConfig):
    """LoRA adapters through peft; `target_modules` default to the attention and MLP projections."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    load_in_4bit: bool = False  # QLoRA: the frozen base loaded in 4-bit (NF4) through bitsandbytes (CUDA)


def peft_lora_config(lora: Any, where: str = "HFPolicy") -> Any:
    """A `peft.LoraConfig` for `lora`: built from `LoraSettings`, or a copy of a `peft.LoraConfig` used as
    given (r, alpha, dropout, target_modules, bias, ...; its task_type set to CAUSAL_LM when unset). Any
    other type, or a peft config for another task, is a one-line ValueError."""
    from peft import LoraConfig

    if isinstance(lora, LoraSettings):
        return LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                          target_modules=lora.target_modules, task_type="CAUSAL_LM")
    if isinstance(lora, LoraConfig):
        config = copy.deepcopy(lora)
        task = getattr(config.task_type, "value", config.task_type)
        if task not in (None, "CAUSAL_LM"):
            raise ValueError(f"{where}: lora= is a peft LoraConfig for task_type {task!r}; a policy is a causal LM "
                             "(task_type='CAUSAL_LM' or unset)")
        config.task_type = "CAUSAL_LM"
        return config
    raise ValueError(f"{where}: lora= takes a policies.LoraSettings or a peft.LoraConfig, got "
                     f"{type(lora).__module__}.{type(lora).__qualname__}")


def wants_4bit(lora: Any) -> bool:
    """Whether `lora` asks for a 4-bit (QLoRA) base: `LoraSettings.load_in_4bit` (a peft config cannot)."""
    return isinstance(lora, LoraSettings) and lora.load_in_4bit


def lora_description(model: Any) -> dict[str, Any] | None:
    """What a run's config.json records of `model`'s LoRA adapters (peft's `peft_config`): per adapter its r,
    alpha, dropout, target modules (sorted), bias and the base it adapts; None for a model without adapters."""
    configs = getattr(model, "peft_config", None)
    if not configs:
        return None
    described = {}
    for name, config in configs.items():
        targets = config.target_modules
        described[name] = {"r": config.r, "alpha": config.lora_alpha, "dropout": config.lora_dropout,
                           "target_modules": sorted(targets) if isinstance(targets, (set, list, tuple)) else targets,
                           "bias": config.bias, "base_model": config.base_model_name_or_path}
    return described
