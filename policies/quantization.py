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
