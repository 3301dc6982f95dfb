"""examples/merge_lora.py: a LoRA adapter folder written by HFPolicy.save -> a merged Hugging Face model folder."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from tests.test_examples import load_script as load_example

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "merge_lora.py"


def load_script():
    return load_example(SCRIPT)


@pytest.fixture
def trained_adapter(tmp_path):
    """(policy with a LoRA adapter that changes its outputs, the adapter folder it saved, the base folder)."""
    base = tmp_path / "base"
    tok = build_tiny_tokenizer()
    build_tiny_model(tok, seed=0).save_pretrained(base)
    tok.save_pretrained(base)
    policy = HFPolicy(str(base), lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]), device="cpu",
                      system_prompt="Be brief.")
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # B starts at zero: make the adapter matter
    policy.save(tmp_path / "adapter", generation={"do_sample": False, "max_new_tokens": 7})
    return policy, tmp_path / "adapter", base


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_the_merged_folder_loads_in_plain_transformers_and_matches_the_merged_policy(trained_adapter, tmp_path):
    from transformers import AutoModelForCausalLM, GenerationConfig

    policy, adapter, base = trained_adapter
    load_script().main([str(adapter), str(tmp_path / "merged")])
    out = tmp_path / "merged"
    assert not (out / "adapter_config.json").exists()
    ids = torch.tensor([policy.format_prompt("3 + 4")])
    expected = logits(copy.deepcopy(policy.model).merge_and_unload(), ids)
    assert torch.allclose(logits(policy.model, ids), expected, atol=1e-5)
    merged = AutoModelForCausalLM.from_pretrained(out)
    assert torch.allclose(logits(merged, ids), expected, atol=1e-5)
    assert not torch.allclose(logits(AutoModelForCausalLM.from_pretrained(base), ids), expected, atol=1e-3)
    again = HFPolicy(str(out), device="cpu")  # tokenizer, chat template and system prompt came along
    assert not again.is_lora and again.system_prompt == "Be brief."
    assert again.format_prompt("3 + 4") == policy.format_prompt("3 + 4")
    assert GenerationConfig.from_pretrained(out).max_new_tokens == 7


def test_base_model_overrides_the_recorded_base_and_bad_input_is_one_line(trained_adapter, tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    policy, adapter, base = trained_adapter
    moved = base.rename(tmp_path / "moved")  # the recorded base is gone
    script = load_script()
    with pytest.raises(SystemExit, match="^error: cannot load model"):
        script.main([str(adapter), str(tmp_path / "merged")])
    script.main([str(adapter), str(tmp_path / "merged"), "--base_model", str(moved)])
    ids = torch.tensor([policy.format_prompt("1 + 1")])
    assert torch.allclose(logits(AutoModelForCausalLM.from_pretrained(tmp_path / "merged"), ids),
                          logits(policy.model, ids), atol=1e-5)
    with pytest.raises(SystemExit, match="already exists: pass --overwrite"):
        script.main([str(adapter), str(tmp_path / "merged"), "--base_model", str(moved)])
    script.main([str(adapter), str(tmp_path / "merged"), "--base_model", str(moved), "--overwrite"])
    with pytest.raises(SystemExit, match=r"^error: .*moved is not a LoRA adapter folder \(no adapter_config.json\)$"):
        script.main([str(moved), str(tmp_path / "other")])
    assert not (tmp_path / "other").exists()
