"""QLoRA's 4-bit base: the bitsandbytes NF4 quantization config transformers loads a model with."""
from __future__ import annotations

import importlib.util

import torch


class QuantizationUnavailableError(ImportError):
    """4-bit loading was asked for where bitsandbytes is not installed."""


def four_bit_config(compute_dtype: torch.dtype = torch.bfloat16):
    """A `transformers.BitsAndBytesConfig` for QLoRA (NF4, double quantization, `compute_dtype` matmuls);
    one clear error line without bitsandbytes."""
    if importlib.util.find_spec("bitsandbytes") is None:
        raise QuantizationUnavailableError("load_in_4bit (QLoRA) needs bitsandbytes, which is not installed "
                                           "(pip install bitsandbytes; CUDA GPU)")
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute_dtype)


def prepare_for_adapters(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A 4-bit model made ready for LoRA in the weight dtype the user asked for.

    With float32 (HFPolicy's default) that is peft's `prepare_model_for_kbit_training`, which also casts the
    weights that stay unquantized (embedding, head, norms) to float32. With bf16 those weights stay bf16, as
    TRL leaves them: on W3 (8B, benchmarks/RESULTS.md) peft's cast put 4.4 GB of them in float32, which made
    the residual stream float32 under autocast, and the update's activations came to 55.6 GB against TRL's
    36.2 GB. The model is frozen either way (the adapters are the only trained weights)."""
    if dtype == torch.float32:
        from peft import prepare_model_for_kbit_training

        return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    model.requires_grad_(False)
    return model


def quantization_description(model: torch.nn.Module) -> dict | None:
    """What a run's config.json records of how `model`'s weights were loaded quantized (the
    `quantization_config` transformers keeps on its config): 4-bit or 8-bit, the 4-bit type, double
    quantization and the compute dtype; None for a model loaded unquantized."""
    config = getattr(getattr(model, "config", None), "quantization_config", None)
    if config is None:
        return None
    values = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    four, eight = bool(values.get("load_in_4bit")), bool(values.get("load_in_8bit"))
    return {"bits": 4 if four else 8 if eight else None, "load_in_4bit": four, "load_in_8bit": eight,
            "quant_method": str(values.get("quant_method", "")) or None,
            "bnb_4bit_quant_type": values.get("bnb_4bit_quant_type") if four else None,
            "bnb_4bit_use_double_quant": values.get("bnb_4bit_use_double_quant") if four else None,
            "compute_dtype": str(values.get("bnb_4bit_compute_dtype")).replace("torch.", "") if four else None}
