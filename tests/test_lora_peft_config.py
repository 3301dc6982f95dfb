"""`HFPolicy(lora=...)` takes peft's own `LoraConfig` as well as `LoraSettings`; any other type is one line."""
import pytest
from peft import LoraConfig

from lmgym.policies import HFPolicy, LoraSettings, add_adapter, build_tiny_model, build_tiny_tokenizer


def lora_policy(lora):
    tok = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu", lora=lora)


def trainable(policy):
    return sorted(n for n, p in policy.model.named_parameters() if p.requires_grad)


def test_peft_lora_config_trains_the_same_parameters_as_lora_settings():
    ours = lora_policy(LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))
    peft_way = lora_policy(LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    assert trainable(peft_way) == trainable(ours)
    assert trainable(ours) and all("lora_" in n for n in trainable(ours))
    assert peft_way.is_lora


def test_peft_lora_config_is_used_as_given_and_not_changed():
    config = LoraConfig(r=2, lora_alpha=6, lora_dropout=0.1, target_modules=["o_proj"], bias="lora_only")
    policy = lora_policy(config)
    used = policy.model.peft_config["default"]
    assert (used.r, used.lora_alpha, used.lora_dropout, used.bias) == (2, 6, 0.1, "lora_only")
    assert set(used.target_modules) == {"o_proj"} and used.task_type == "CAUSAL_LM"
    assert config.task_type is None  # the caller's object is copied, not edited
    names = trainable(policy)
    assert any("o_proj.lora_A" in n for n in names) and not any("q_proj" in n for n in names)


@pytest.mark.parametrize("wrong", [{"r": 4}, 16, "lora"])
def test_a_wrong_type_is_one_line(wrong):
    with pytest.raises(ValueError, match="lora= takes a policies.LoraSettings or a peft.LoraConfig") as err:
        lora_policy(wrong)
    assert "\n" not in str(err.value)


def test_a_peft_config_for_another_task_is_one_line():
    with pytest.raises(ValueError, match="SEQ_CLS") as err:
        lora_policy(LoraConfig(r=2, target_modules=["q_proj"], task_type="SEQ_CLS"))
    assert "\n" not in str(err.value)


def test_add_adapter_takes_a_peft_lora_config():
    policy = lora_policy(LoraSettings(r=2, alpha=4, target_modules=["q_proj"]))
    add_adapter(policy, "checker", LoraConfig(r=3, lora_alpha=6, target_modules=["v_proj"]))
    assert policy.model.peft_config["checker"].r == 3


def test_a_runs_config_json_records_its_lora_and_quantization_settings(tmp_path):
    import json

    import torch
    from transformers import BitsAndBytesConfig

    from lmgym.algorithms import GRPO, GRPOConfig
    from lmgym.envs import make
    from tests.test_algorithms import small_config
    from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

    policy = lora_policy(LoraSettings(r=4, alpha=8, dropout=0.05, target_modules=["v_proj", "q_proj"]))
    config = small_config(GRPOConfig, tmp_path, train_iterations=1, kl_coeff=0.0, save_every=0)
    GRPO(policy, make("ToyDigits-v0"), config).train()
    written = json.loads((tmp_path / "run" / "config.json").read_text())
    assert written["lora"] == {"default": {"r": 4, "alpha": 8, "dropout": 0.05, "target_modules": ["q_proj", "v_proj"],
                                           "bias": "none", "base_model": written["lora"]["default"]["base_model"]}}
    assert written["quantization"] is None  # loaded unquantized

    # a base loaded in 4-bit or 8-bit (CUDA and bitsandbytes only: here its recorded quantization_config)
    for bnb, expected in ((BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                              bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16),
                           {"bits": 4, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
                            "compute_dtype": "bfloat16"}),
                          (BitsAndBytesConfig(load_in_8bit=True),
                           {"bits": 8, "load_in_8bit": True, "compute_dtype": None})):
        policy.model.config.quantization_config = bnb
        described = GRPO(policy, make("ToyDigits-v0"), small_config(GRPOConfig, tmp_path, kl_coeff=0.0)).describe()
        assert expected.items() <= described["quantization"].items(), described["quantization"]
    assert described["lora"]["default"]["r"] == 4
