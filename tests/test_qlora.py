"""QLoRA by config: LoraSettings(load_in_4bit=True) loads the base in 4-bit through bitsandbytes, or says why not."""
from __future__ import annotations

import importlib.util

import pytest

from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.loading.quantization import QuantizationUnavailableError, four_bit_config

HAS_BNB = importlib.util.find_spec("bitsandbytes") is not None


@pytest.mark.skipif(HAS_BNB, reason="bitsandbytes is installed here")
def test_4bit_without_bitsandbytes_is_one_clear_line(tmp_path):
    with pytest.raises(QuantizationUnavailableError, match="needs bitsandbytes, which is not installed") as info:
        HFPolicy(str(tmp_path / "never-read"), lora=LoraSettings(load_in_4bit=True), device="cpu")
    assert "\n" not in str(info.value)
    with pytest.raises(ImportError, match="pip install bitsandbytes"):
        four_bit_config()


def test_4bit_needs_a_model_name_not_a_built_model():
    tok = build_tiny_tokenizer()
    with pytest.raises(ValueError, match="load_in_4bit loads the base itself: pass a model name or path") as info:
        HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu", lora=LoraSettings(load_in_4bit=True))
    assert "\n" not in str(info.value)


@pytest.mark.skipif(not HAS_BNB, reason="bitsandbytes is not installed")
def test_the_4bit_config_is_nf4_with_double_quantization():
    config = four_bit_config()
    assert config.load_in_4bit and config.bnb_4bit_quant_type == "nf4" and config.bnb_4bit_use_double_quant


def test_the_reinforce_stable_example_takes_lora_qlora_and_activation_checkpointing_flags():
    import importlib

    from lmgym.training import ConfigError

    example = importlib.import_module("examples.reinforce_stable_gsm8k")
    args = example.build_parser().parse_args(["--lora_r", "8", "--load_in_4bit", "--gradient_checkpointing"])
    assert args.lora_r == 8 and args.load_in_4bit and args.gradient_checkpointing
    example.resolve_config(args)
    with pytest.raises(ConfigError, match="> 0 with --load_in_4bit"):
        example.resolve_config(example.build_parser().parse_args(["--load_in_4bit"]))


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_4bit_base_keeps_the_unquantized_weights_in_the_asked_dtype(dtype):
    """float32 (the default): peft's preparation, which casts the unquantized weights to float32. bf16: they stay
    bf16 (peft's cast made W3's QLoRA residual stream float32: 70 GB against TRL's 42 GB); frozen either way."""
    import torch

    from lmgym.policies.loading.quantization import prepare_for_adapters

    model = build_tiny_model(build_tiny_tokenizer(), seed=0).to(torch.bfloat16)
    prepared = prepare_for_adapters(model, getattr(torch, dtype))
    assert {p.dtype for p in prepared.parameters()} == {getattr(torch, dtype)}
    assert not any(p.requires_grad for p in prepared.parameters())
