"""Model cards (README.md with YAML metadata) of saved folders, adapters naming the embedded model's hub id,
and push_to_hub against a local folder standing in for the hub (tiny model, offline)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from huggingface_hub import ModelCard

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.policies import (
    EMBEDDED_HUB_ID,
    EMBEDDED_MODEL,
    HFPolicy,
    LoraSettings,
    build_tiny_model,
    build_tiny_tokenizer,
)
from lmgym.policies.loading.models import EMBEDDED_BASE_KEY
from lmgym.training.model_card import env_dataset
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


class LocalHub:
    """Stands in for huggingface_hub.HfApi: create_repo makes a folder, upload_folder copies into it."""

    def __init__(self, root: Path):
        self.root, self.created, self.commits = root, [], []

    def create_repo(self, repo_id: str, **kwargs):
        self.created.append((repo_id, kwargs))
        (self.root / repo_id).mkdir(parents=True, exist_ok=kwargs.get("exist_ok", False))
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, *, repo_id: str, folder_path: str, **kwargs):
        assert (self.root / repo_id).is_dir(), "upload before create_repo"
        shutil.copytree(folder_path, self.root / repo_id, dirs_exist_ok=True)
        self.commits.append((repo_id, kwargs.get("commit_message")))
        return f"https://huggingface.co/{repo_id}/commit/0"


def card_data(folder: Path) -> dict:
    return ModelCard.load(folder / "README.md").data.to_dict()


def hub_named_policy(seed: int = 0, lora: LoraSettings | None = None) -> HFPolicy:
    """The tiny model whose config says it came from the hub (as `from_pretrained("user/name")` sets it)."""
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=seed)
    model.config._name_or_path = "someone/tiny-base"
    return HFPolicy(model, tok, device="cpu", lora=lora)


def lora_settings() -> LoraSettings:
    return LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"])


def test_a_saved_model_folder_has_a_card_whose_metadata_parses(tmp_path):
    hub_named_policy().save(tmp_path / "model")
    data = card_data(tmp_path / "model")
    assert data["base_model"] == "someone/tiny-base" and data["library_name"] == "transformers"
    assert "lmgym" in data["tags"] and data["pipeline_tag"] == "text-generation"


def test_a_model_built_in_code_names_no_base_and_a_local_folder_passes_its_cards_base_on(tmp_path):
    tok = build_tiny_tokenizer()
    HFPolicy(build_tiny_model(tok), tok, device="cpu").save(tmp_path / "plain")
    assert "base_model" not in card_data(tmp_path / "plain")  # no hub id known: none invented
    hub_named_policy().save(tmp_path / "first")
    HFPolicy(str(tmp_path / "first"), device="cpu").save(tmp_path / "second")
    assert card_data(tmp_path / "second")["base_model"] == "someone/tiny-base"  # not the local path


def test_the_adapter_card_replaces_peft_s_blank_template(tmp_path):
    hub_named_policy(lora=lora_settings()).save(tmp_path / "adapter")
    text = (tmp_path / "adapter" / "README.md").read_text()
    assert "More Information Needed" not in text  # peft's template
    data = card_data(tmp_path / "adapter")
    assert data["library_name"] == "peft" and data["base_model"] == "someone/tiny-base"
    assert {"lmgym", "lora"} <= set(data["tags"]) and EMBEDDED_BASE_KEY not in data
    recorded = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert recorded == "someone/tiny-base"


@slow
def test_an_adapter_over_the_embedded_model_records_its_hub_id_and_loads_back_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("RLGYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    gguf = tmp_path / "stand-in.gguf"
    gguf.write_bytes(b"")  # never read: the cached plain copy below is complete
    monkeypatch.setenv("RLGYM_EMBEDDED_GGUF", str(gguf))
    tok = build_tiny_tokenizer()
    cached = tmp_path / "cache" / "SmolLM2-135M-Instruct"  # stands in for the embedded model's cached copy
    build_tiny_model(tok, seed=0).save_pretrained(cached)
    tok.save_pretrained(cached)
    policy = HFPolicy(EMBEDDED_MODEL, lora=lora_settings(), device="cpu")
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # B starts at zero: make the adapter change the outputs
    policy.save(tmp_path / "adapter")
    config = (tmp_path / "adapter" / "adapter_config.json").read_text()
    assert json.loads(config)["base_model_name_or_path"] == EMBEDDED_HUB_ID and str(tmp_path) not in config
    data = card_data(tmp_path / "adapter")
    assert data["base_model"] == EMBEDDED_HUB_ID and data[EMBEDDED_BASE_KEY] == EMBEDDED_MODEL
    ids = torch.tensor([policy.format_prompt("3 + 4")])
    with torch.no_grad():
        loaded = HFPolicy(str(tmp_path / "adapter"), device="cpu")  # the hub id maps back to the embedded copy
        assert torch.allclose(loaded.model(input_ids=ids).logits, policy.model(input_ids=ids).logits, atol=1e-5)
    loaded.save(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "adapter_config.json").read_text())["base_model_name_or_path"] == \
        EMBEDDED_HUB_ID and card_data(tmp_path / "again")[EMBEDDED_BASE_KEY] == EMBEDDED_MODEL


def test_push_to_hub_uploads_the_saved_folder_with_its_card(tmp_path):
    hub = LocalHub(tmp_path / "hub")
    hub_named_policy().push_to_hub("me/tiny", hub_api=hub, private=True)
    repo = tmp_path / "hub" / "me" / "tiny"
    assert {"config.json", "model.safetensors", "README.md", "generation_config.json"} <= {
        p.name for p in repo.iterdir()}
    assert card_data(repo)["base_model"] == "someone/tiny-base"
    assert hub.created == [("me/tiny", {"repo_type": "model", "private": True, "exist_ok": True})]
    with pytest.raises(ValueError, match="not a hub repo id") as info:
        hub_named_policy().push_to_hub("not a repo//id", hub_api=hub)
    assert "\n" not in str(info.value) and len(hub.commits) == 1


def test_env_datasets_are_hub_ids_where_known_and_none_for_generated_problems():
    def env(env_id: str):
        return SimpleNamespace(spec=SimpleNamespace(id=env_id))

    assert env_dataset(env("rlgym/GSM8K-v0")) == "openai/gsm8k"
    assert env_dataset(env("GSM8KStepwise-v0")) == "openai/gsm8k"
    assert env_dataset(env("Reflection-MATH-v0")) == "HuggingFaceH4/MATH-500"
    assert env_dataset(env("RAG-HotpotQA-v0")) == "hotpotqa/hotpot_qa"
    assert env_dataset(make("Arithmetic-v0")) is None


@slow
def test_the_push_to_hub_flag_pushes_the_final_model_of_a_tiny_run_with_its_training_card(tmp_path, monkeypatch):
    import huggingface_hub

    from examples.common import example_parser
    from lmgym.training.cli import add_config_arguments, config_from_arguments, train_and_report

    hub = LocalHub(tmp_path / "hub")
    hub.whoami = lambda: {"name": "me"}  # the preflight's check of the token and the hub, before training
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda token=None: hub)  # the default uploader
    monkeypatch.setenv("HF_TOKEN", "hf_fake_token_for_tests")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    parser = example_parser(description="tiny")
    add_config_arguments(parser, GRPOConfig)
    args = parser.parse_args(["--push_to_hub", "me/tiny-grpo", "--train_iterations", "1", "--output_dir",
                              str(tmp_path / "run")])
    config = config_from_arguments(GRPOConfig, args, dict(
        prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4, micro_batch_size=2, eval_episodes=2,
        eval_at_start=False, progress=False))
    policy = hub_named_policy()
    train_and_report(GRPO(policy, make("ToyDigits-v0"), config, eval_env=make("ToyDigits-v0")))
    repo = tmp_path / "hub" / "me" / "tiny-grpo"
    assert (repo / "model.safetensors").is_file() and hub.commits[0][0] == "me/tiny-grpo"
    data = card_data(repo)
    assert data["base_model"] == "someone/tiny-base" and {"lmgym", "grpo"} <= set(data["tags"])
    results = data["model-index"][0]["results"]
    assert {(m["type"], m["name"]) for r in results for m in r["metrics"]} >= {("accuracy", "eval_accuracy")}
    assert data["model-index"][0]["name"] == "tiny-grpo"
    text = (repo / "README.md").read_text()
    assert "## Training configuration" in text and "push_to_hub: me/tiny-grpo" in text and "ToyDigits-v0" in text
