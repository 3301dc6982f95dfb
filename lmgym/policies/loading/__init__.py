"""Loading and saving models: where a policy's weights come from and what a saved folder holds.

- `models`: the embedded default model, any hub name or local path, a LoRA adapter folder over its base, the
  tiny test model, and a saved card's metadata read back;
- `lora_config`: what `HFPolicy(lora=...)` takes (`LoraSettings` or peft's `LoraConfig`), as a peft config;
- `quantization`: QLoRA's 4-bit base (bitsandbytes NF4);
- `unsharded`: an unsharded copy of an FSDP-sharded policy, to save from;
- `pretrained_files`: the files that make a training checkpoint folder load the Hugging Face way;
- `model_card`: the model card (README.md with YAML metadata) of a saved folder;
- `hub`: Hugging Face Hub names, and uploading a folder (`push_folder`).
"""
from lmgym.policies.loading.models import (
    EMBEDDED_MODEL,
    ModelLoadError,
    ModelNotFoundError,
    build_tiny_model,
    build_tiny_tokenizer,
    load_model_and_tokenizer,
)

__all__ = ["EMBEDDED_MODEL", "ModelLoadError", "ModelNotFoundError", "build_tiny_model", "build_tiny_tokenizer",
           "load_model_and_tokenizer"]
