"""The files that make a training checkpoint folder load the Hugging Face way, beside the trainer's own.

A checkpoint's `model.safetensors` holds the policy's state dict (training/checkpoints/layout.py). For full
fine-tuning that is the transformers model's own state dict, under the names `from_pretrained` expects
(tied embeddings stored once, which `from_pretrained` ties back), so `config.json` and
`generation_config.json` beside it are all `AutoModelForCausalLM.from_pretrained(checkpoint)` needs, as in
an HF Trainer checkpoint. A LoRA policy's state dict is peft's wrapped model's, which transformers does not
read: its adapter goes beside it as peft saves one (`adapter_config.json`, `adapter_model.safetensors`), so
`PeftModel.from_pretrained(base, checkpoint)` (or `AutoPeftModelForCausalLM` when the recorded base resolves)
loads it. The tokenizer goes beside either (its files as `save_pretrained` writes them, the chat template and
the system prompt with them), so `AutoTokenizer.from_pretrained(checkpoint)` loads it too, as from an HF Trainer
checkpoint with its processing class.
"""
from __future__ import annotations

import copy
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from lmgym.policies.loading.hub import recorded_base
from lmgym.policies.loading.models import SYSTEM_PROMPT_FILE
from lmgym.policies.reference_adapter import REFERENCE_ADAPTER

CONFIG = "config.json"
GENERATION_CONFIG = "generation_config.json"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def pretrained_files(policy) -> dict[str, Callable[[Path], None]]:
    """One writer per file (`writers[name](path)`) that makes a checkpoint of `policy` loadable with
    transformers (full fine-tuning) or peft (LoRA); empty for a model that is not a transformers one."""
    model = getattr(policy, "model", None)
    if model is None or not hasattr(getattr(model, "config", None), "to_json_file"):
        return {}
    if hasattr(model, "peft_config"):
        return {**_adapter_files(policy, model), **tokenizer_files(policy)}
    files = {CONFIG: _config_writer(model), **tokenizer_files(policy)}
    generation = policy.generation_config() if hasattr(policy, "generation_config") else getattr(
        model, "generation_config", None)
    if generation is not None:
        files[GENERATION_CONFIG] = lambda path: generation.to_json_file(str(path), use_diff=True)
    return files


def tokenizer_files(policy) -> dict[str, Callable[[Path], None]]:
    """One writer per file of `policy.tokenizer.save_pretrained` (with `chat_template.jinja` and
    `system_prompt.txt` as `HFPolicy.save` writes them); empty for a policy without a tokenizer."""
    tokenizer = getattr(policy, "tokenizer", None)
    if tokenizer is None or not hasattr(tokenizer, "save_pretrained"):
        return {}
    with tempfile.TemporaryDirectory(prefix="lmgym-tokenizer-") as tmp:
        tokenizer.save_pretrained(tmp)
        saved = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir()) if p.is_file()}
    if getattr(tokenizer, "chat_template", None) is not None and "chat_template.jinja" not in saved:
        saved["chat_template.jinja"] = tokenizer.chat_template.encode("utf-8")
    if getattr(policy, "system_prompt", None):
        saved[SYSTEM_PROMPT_FILE] = policy.system_prompt.encode("utf-8")
    return {name: _bytes_writer(data) for name, data in saved.items()}


def _bytes_writer(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data)


def _config_writer(model: torch.nn.Module) -> Callable[[Path], None]:
    """`config.json` as `save_pretrained` writes it: the architecture and the weights' dtype recorded."""
    config = copy.deepcopy(model.config)
    config.architectures = [type(model).__name__]
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    if dtype is not None:
        config.dtype = dtype
    return lambda path: config.to_json_file(str(path), use_diff=True)


def _adapter_files(policy, model: torch.nn.Module) -> dict[str, Callable[[Path], None]]:
    """The active adapter (never the KL reference's) as peft's `save_pretrained` writes it."""
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import save_file

    name = getattr(model, "active_adapter", "default")
    name = name if isinstance(name, str) and name != REFERENCE_ADAPTER else "default"
    config = copy.deepcopy(model.peft_config[name])
    config.base_model_name_or_path = recorded_base(getattr(policy, "base_name_or_path", None))
    config.inference_mode = True
    weights = {k: v.detach().to("cpu").contiguous().clone()
               for k, v in get_peft_model_state_dict(model, adapter_name=name, save_embedding_layers=False).items()}

    def write_config(path: Path) -> None:  # peft's own writer; it names the file adapter_config.json itself
        assert path.name == ADAPTER_CONFIG
        config.save_pretrained(str(path.parent))

    return {ADAPTER_CONFIG: write_config,
            ADAPTER_WEIGHTS: lambda path: save_file(weights, str(path), metadata={"format": "pt"})}
