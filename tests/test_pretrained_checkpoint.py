"""A checkpoint folder loads the Hugging Face way: `AutoModelForCausalLM.from_pretrained(checkpoint)` for full
fine-tuning (config.json beside model.safetensors, as in an HF Trainer checkpoint), peft's
`PeftModel.from_pretrained(base, checkpoint)` for a LoRA policy; and resuming from it is unchanged."""
import json

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

IDS = torch.tensor([[1, 5, 9, 13, 2, 7, 3]])


def trained(tmp_path, lora=False, iterations=2, resume=False):
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu",
                      lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]) if lora else None)
    algo = GRPO(policy, make("ToyDigits-v0"), GRPOConfig(
        train_iterations=iterations, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
        micro_batch_size=2, output_dir=str(tmp_path / "run"), progress=False, eval_at_start=False,
        learning_rate=5e-2, save_every=1, seed=5))
    algo.train(resume=resume)
    return algo, tmp_path / "run" / f"checkpoint-{iterations}"


def logits(model):
    with torch.no_grad():
        return model(IDS).logits


@slow
def test_full_fine_tuning_checkpoint_loads_with_from_pretrained(tmp_path):
    algo, folder = trained(tmp_path)
    untrained = build_tiny_model(build_tiny_tokenizer(), seed=0)
    loaded = AutoModelForCausalLM.from_pretrained(folder)
    assert torch.equal(logits(loaded), logits(algo.policy.model))
    assert not torch.equal(logits(untrained), logits(algo.policy.model))  # the checkpoint's weights, not the start
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == [type(algo.policy.model).__name__] and config["dtype"] == "float32"
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["eos_token_id"] == algo.policy.tokenizer.eos_token_id
    manifest = json.loads((folder / "MANIFEST.json").read_text())["files"]
    assert {"config.json", "generation_config.json"} <= set(manifest)  # verified at resume like the rest


def test_lora_checkpoint_loads_the_peft_way(tmp_path):
    algo, folder = trained(tmp_path, lora=True)
    assert not (folder / "config.json").exists()  # model.safetensors holds peft's names: transformers can't
    adapter = json.loads((folder / "adapter_config.json").read_text())
    assert adapter["r"] == 4 and adapter["peft_type"] == "LORA" and adapter["inference_mode"] is True
    loaded = PeftModel.from_pretrained(build_tiny_model(build_tiny_tokenizer(), seed=0), folder)
    assert torch.equal(logits(loaded), logits(algo.policy.model))
    assert algo.policy.model.peft_config["default"].inference_mode is False  # the policy's own config untouched


@slow
def test_resuming_from_it_still_continues(tmp_path):
    straight, _ = trained(tmp_path / "a", iterations=3)
    trained(tmp_path / "b", iterations=2)
    resumed, folder = trained(tmp_path / "b", iterations=3, resume=True)
    assert resumed.iteration == 3 and not list((tmp_path / "b" / "run").glob("*.bak"))  # resumed, not restarted
    assert torch.equal(logits(resumed.policy.model), logits(straight.policy.model))
    assert torch.equal(logits(AutoModelForCausalLM.from_pretrained(folder)), logits(straight.policy.model))
