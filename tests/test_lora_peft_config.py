"""`HFPolicy(lora=...)` takes peft's own `LoraConfig` as well as `LoraSettings`; any other type is one line."""
import pytest
from peft import LoraConfig

from policies import HFPolicy, LoraSettings, add_adapter, build_tiny_model, build_tiny_tokenizer


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
