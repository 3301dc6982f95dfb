"""Run folders: the Hugging Face model folder, config.json, checkpoints without a re-derivable reference,
LoRA adapter folders, wandb offline (metrics and plots), the plot's panels, and progress bars.

One quickstart subprocess (tiny model built in code and saved to disk, `--wandb offline`) serves the
end-to-end checks; the rest run in this process on the tiny model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from tests import checkpoint_state
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)
from tests.wandb_history import written_history

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.py"


def save_tiny(folder: Path) -> Path:
    tok = build_tiny_tokenizer()
    build_tiny_model(tok, seed=0).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory) -> Path:
    """examples/quickstart.py on the tiny model for 2 iterations, wandb offline, in a temporary folder."""
    tmp = tmp_path_factory.mktemp("quickstart")
    model = save_tiny(tmp / "tiny")
    run = tmp / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2",
           "WANDB_MODE": "offline", "WANDB_DIR": str(tmp / "wandb-dir"), "WANDB_SILENT": "true",
           "WANDB_CACHE_DIR": str(tmp / "wandb-cache"), "WANDB_CONFIG_DIR": str(tmp / "wandb-config")}
    result = subprocess.run(
        [sys.executable, str(QUICKSTART), "--preset", "cpu", "--model", str(model), "--train_iterations", "2",
         "--prompts_per_iteration", "2", "--samples_per_prompt", "2", "--max_new_tokens", "6",
         "--eval_episodes", "4", "--micro_batch_size", "4", "--output_dir", str(run), "--wandb", "offline"],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "held-out accuracy: " in result.stdout and "(iteration 0) -> " in result.stdout, result.stdout
    return run


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@slow
def test_the_quickstart_model_folder_loads_with_plain_transformers(quickstart_run):
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, pipeline

    folder = quickstart_run / "model"
    assert (folder / "model.safetensors").is_file() and not list(folder.glob("*.bin"))
    model = AutoModelForCausalLM.from_pretrained(folder)
    state = checkpoint_state.read(quickstart_run / "checkpoint-2")
    for name, value in model.state_dict().items():  # the weights of the last checkpoint (the trained policy)
        assert torch.equal(value, state["policy"][name]), name
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.chat_template and "<|im_start|>" in tokenizer.chat_template
    generation = GenerationConfig.from_pretrained(folder)
    assert generation.do_sample is False and generation.max_new_tokens == 6
    assert generation.eos_token_id == tokenizer.eos_token_id
    generator = pipeline("text-generation", model=str(folder), device="cpu")
    out = generator([{"role": "user", "content": "What is 2 + 3?"}], max_new_tokens=4)
    assert out[0]["generated_text"][-1]["role"] == "assistant"


@slow
def test_the_quickstart_config_names_the_model_and_the_envs(quickstart_run):
    config = json.loads((quickstart_run / "config.json").read_text())
    assert config["model"] == str(quickstart_run.parent / "tiny") and config["algorithm"] == "GRPO"
    assert config["env"] == "Arithmetic-v0" and config["env_kwargs"]["level"] == 1
    assert config["env_kwargs"]["split"] == "train" and config["eval_env_kwargs"]["split"] == "test"
    assert config["train_iterations"] == 2 and config["samples_per_prompt"] == 2


@slow
def test_the_before_evaluation_is_iteration_0_and_no_checkpoint_stores_the_initial_reference(quickstart_run):
    rows = metrics(quickstart_run)
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    assert "eval_accuracy" in rows[0] and "reward" not in rows[0] and "eval_accuracy" in rows[2]
    state = checkpoint_state.read(quickstart_run / "checkpoint-2")
    assert state["reference"] is None and state["reference_source"] == "initial"  # kl_coeff 0.04, never synced
    assert (quickstart_run / "metrics.png").is_file()


@slow
def test_wandb_offline_holds_the_metrics_and_the_plot(quickstart_run):
    runs = list((quickstart_run / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, runs
    rows = metrics(quickstart_run)
    logged = {row["_step"]: row for row in written_history(next(runs[0].glob("*.wandb")), rows=len(rows))}
    assert sorted(logged) == [r["iteration"] for r in rows]
    for row in rows:
        for key, value in row.items():
            assert logged[row["iteration"]][key] == pytest.approx(value), key
    last = logged[rows[-1]["iteration"]]
    assert last["plots/metrics/_type"] == "image-file"
    image = runs[0] / "files" / last["plots/metrics/path"]
    assert image.is_file() and image.read_bytes() == (quickstart_run / "metrics.png").read_bytes()


# ---------------------------------------------------------------- in process, tiny model


def tiny_algo(tmp_path, policy=None, **overrides) -> GRPO:
    tok = build_tiny_tokenizer()
    policy = policy or HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    values = dict(train_iterations=3, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                  micro_batch_size=2, learning_rate=1e-2, kl_coeff=0.1, ref_sync_every=2, save_every=1,
                  keep_checkpoints=5, eval_at_start=False, progress=False, output_dir=str(tmp_path / "run"))
    values.update(overrides)
    return GRPO(policy, make("ToyDigits-v0"), GRPOConfig(**values))


@slow
def test_checkpoints_store_the_reference_only_when_it_is_nowhere_else(tmp_path):
    algo = tiny_algo(tmp_path)
    algo.train()
    folders = tmp_path / "run"
    states = {i: checkpoint_state.read(folders / f"checkpoint-{i}") for i in (1, 2, 3)}
    assert [states[i]["reference_source"] for i in (1, 2, 3)] == ["initial", "policy", "stored"]
    assert states[1]["reference"] is None and states[2]["reference"] is None
    assert all(torch.equal(v, states[2]["policy"][k]) for k, v in states[3]["reference"].items())
    ref = algo.ref_policy.state_dict()
    initial = build_tiny_model(build_tiny_tokenizer(), seed=0).state_dict()
    for iteration, expected in ((1, initial), (2, states[2]["policy"]), (3, ref)):
        fresh = tiny_algo(tmp_path)
        fresh.load(folders / f"checkpoint-{iteration}")
        for name, value in fresh.ref_policy.state_dict().items():
            assert torch.equal(value, expected[name]), (iteration, name)
    synced = tiny_algo(tmp_path)
    synced.load(folders / "checkpoint-3")
    with pytest.raises(ValueError, match="reference was already synced") as info:
        synced.load(folders / "checkpoint-1")
    assert "\n" not in str(info.value)


def test_save_model_writes_the_system_prompt_and_loads_back_through_hfpolicy(tmp_path):
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, system_prompt="Answer with a number.", device="cpu")
    algo = tiny_algo(tmp_path, policy, train_iterations=1, kl_coeff=0.0)
    algo.train()
    folder = algo.save_model()
    assert folder == tmp_path / "run" / "model" and not (tmp_path / "run" / ".tmp-model").exists()
    assert (folder / "system_prompt.txt").read_text() == "Answer with a number."
    again = HFPolicy(str(folder), device="cpu")
    assert again.system_prompt == "Answer with a number."
    assert again.format_prompt("1 + 1") == policy.format_prompt("1 + 1")
    for name, value in again.state_dict().items():
        assert torch.equal(value, policy.state_dict()[name]), name
    algo.save_model()  # saving again replaces the folder whole
    assert sorted(p.name for p in folder.parent.iterdir() if "model" in p.name) == ["model"]


def lora_settings() -> LoraSettings:
    return LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"])


@slow
def test_a_lora_adapter_folder_loads_back_and_names_its_base_not_a_cache_path(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("RLGYM_CACHE", str(tmp_path / "cache"))
    save_tiny(tmp_path / "cache" / "SmolLM2-135M-Instruct")  # stands in for the embedded model's cached copy
    policy = HFPolicy("embedded", lora=lora_settings(), device="cpu", system_prompt="Be brief.")
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # B starts at zero: make the adapter change the outputs
    algo = tiny_algo(tmp_path, policy, train_iterations=1)
    folder = algo.save_model()
    adapter = folder / "adapter"
    recorded = json.loads((adapter / "adapter_config.json").read_text())
    assert recorded["base_model_name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"  # its hub id
    assert str(tmp_path) not in (adapter / "adapter_config.json").read_text()
    ids = torch.tensor([policy.format_prompt("3 + 4")])
    with torch.no_grad():
        expected = policy.model(input_ids=ids).logits
        loaded = HFPolicy(str(adapter), device="cpu")
        assert loaded.is_lora and loaded.system_prompt == "Be brief."
        assert torch.allclose(loaded.model(input_ids=ids).logits, expected, atol=1e-5)
        loaded.save(tmp_path / "again")  # an adapter saved again still names the same base
        assert json.loads((tmp_path / "again" / "adapter_config.json").read_text())["base_model_name_or_path"] == \
            "HuggingFaceTB/SmolLM2-135M-Instruct"
        merged = AutoModelForCausalLM.from_pretrained(folder)  # the run's model/: merged, plain transformers
        assert torch.allclose(merged(input_ids=ids).logits, expected, atol=1e-4)
        base = HFPolicy("embedded", device="cpu").model(input_ids=ids).logits
        assert not torch.allclose(base, expected, atol=1e-3)


@slow
def test_the_plot_has_iteration_0_integer_ticks_and_a_fraction_for_0_1_rewards(tmp_path):
    from lmgym.training.plots import draw_metrics

    rows = [{"iteration": 0, "eval_accuracy": 0.25},
            {"iteration": 1, "reward_mean": 0.5, "train_accuracy": 0.5, "rewards": [0.0, 1.0, 1.0, 0.0]},
            {"iteration": 2, "reward_mean": 0.75, "train_accuracy": 0.75, "rewards": [1.0, 1.0, 1.0, 0.0],
             "eval_accuracy": 0.5}]
    fig = draw_metrics(rows)
    panels = {ax.get_title(): ax for ax in fig.axes}
    eval_line = [line for line in panels["accuracy"].get_lines() if line.get_label() == "eval_accuracy"][0]
    assert list(eval_line.get_xdata()) == [0, 2] and list(eval_line.get_ydata()) == [0.25, 0.5]
    fraction = panels["fraction of episodes rewarded 1 per iteration"].get_lines()[0]
    assert list(fraction.get_xdata()) == [1, 2] and list(fraction.get_ydata()) == [0.5, 0.75]
    fig.canvas.draw()
    for ax in fig.axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), (ax.get_title(), ticks)
    for few in (rows[1:2], rows[:2]):  # one iteration, with and without the evaluation before it
        fig = draw_metrics(few)
        fig.canvas.draw()
        for ax in fig.axes:
            ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
            assert ticks == list(range(few[0]["iteration"], 2)), (ax.get_title(), ticks)
    graded = [dict(r, rewards=[0.2, 0.9, 0.5]) if "rewards" in r else r for r in rows]
    assert "reward distribution per iteration" in {ax.get_title() for ax in draw_metrics(graded).axes}


@slow
def test_progress_bars_cover_evaluation_sampling_scoring_and_the_update(tmp_path, capsys):
    algo = tiny_algo(tmp_path, train_iterations=1, progress=True, eval_at_start=True, eval_episodes=3)
    algo.eval_env = make("ToyDigits-v0")
    algo.train()
    err = capsys.readouterr().err
    for phase in ("evaluate", "sample", "reference", "update", "GRPO"):
        assert f"{phase}:" in err, (phase, err[-2000:])
    assert "/3 [" in err and "tokens=" in err  # 3 evaluation episodes, tokens sampled as the postfix
    assert "/2 [" in err  # reference and update: 2 prompts x 2 samples in micro-batches of 2
    quiet = tiny_algo(tmp_path, train_iterations=1, progress=False, eval_at_start=True, eval_episodes=3)
    quiet.eval_env = make("ToyDigits-v0")
    quiet.train()
    assert capsys.readouterr().err == ""
