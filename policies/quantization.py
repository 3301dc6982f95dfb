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
