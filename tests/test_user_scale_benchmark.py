"""The user-scale benchmark harness (W2, W3): model folders of real shapes built in code, one GRPO step of the
toolkit's side on the CPU, the flags both sides get, and the largest-fit search. No GPU, no TRL needed (TRL's
side runs only where trl is importable)."""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.tiers import slow

pytestmark = slow  # the slow tier (tests/tiers.py): runs the benchmark scripts as processes

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import trl_user_scale_baseline as trl_side  # noqa: E402  (import-safe without trl)
import user_scale  # noqa: E402
import user_scale_models as models  # noqa: E402

# The real models' config.json fields (Qwen/Qwen2.5-1.5B-Instruct, meta-llama/Llama-3.1-8B), written out here
# independently of the shapes in user_scale_models.py.
REAL = {
    "w2": {"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 1536, "intermediate_size": 8960,
           "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True,
           "rms_norm_eps": 1e-6, "max_position_embeddings": 32768},
    "w3": {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
           "rms_norm_eps": 1e-5, "max_position_embeddings": 131072, "head_dim": 128},
}
PARAMETERS = {"w2": 1_543_714_304, "w3": 8_030_261_248}
tokenizer = functools.cache(models.build_tokenizer)  # seconds each for the full vocabularies: built once here


@pytest.mark.parametrize("name", ["w2", "w3", "tiny-w2", "tiny-w3"])
def test_tokenizer_has_exactly_the_vocabulary_and_a_chat_template(name):
    tok = tokenizer(name)
    size = models.SHAPES[name].vocab_size
    assert len(tok) == size and tok.convert_ids_to_tokens(size - 1) is not None
    assert tok.eos_token_id == size - len(models.SHAPES[name].chat.specials) + \
        models.SHAPES[name].chat.specials.index(tok.eos_token)
    assert tok.pad_token_id is not None and tok.pad_token_id != tok.eos_token_id
    text = tok.apply_chat_template([{"role": "system", "content": "S"}, {"role": "user", "content": "2 + 2?"}],
                                   add_generation_prompt=True, tokenize=False)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert max(ids) < size and tok.decode(ids) == text  # byte-level: every text round-trips
    question = models.synthetic_question(5)
    if not name.startswith("tiny"):  # the full vocabularies merge printable pairs and triples
        assert len(tok(question)["input_ids"]) < len(question) * 0.6


@pytest.mark.parametrize("name", ["w2", "w3"])
def test_full_shapes_match_the_real_configs_on_the_meta_device(name):
    tok = tokenizer(name)
    config = models.model_config(name, tok)
    for field, value in REAL[name].items():
        assert getattr(config, field) == value, field
    assert config.eos_token_id == tok.eos_token_id and config.pad_token_id == tok.pad_token_id
    model = models.meta_model(name, tok)  # shapes only: no memory
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert sum(p.numel() for p in model.parameters()) == PARAMETERS[name] == models.PARAMETERS[name]
    assert type(model).__name__ == config.architectures[0]
    if name == "w3":
        assert config.rope_parameters["rope_type"] == "llama3" and config.rope_parameters["factor"] == 8.0


def test_a_folder_is_built_once_and_another_shape_is_refused(tmp_path):
    folder = models.build_model_folder("tiny-w3", tmp_path / "m", seed=1, device="cpu")
    weights = (folder / "model.safetensors").stat().st_mtime_ns
    assert models.build_model_folder("tiny-w3", folder, seed=1) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == weights
    assert models.folder_shape(folder) == "tiny-w3"
    with pytest.raises(ValueError, match="already holds another model"):
        models.build_model_folder("tiny-w2", folder, seed=1)


@pytest.mark.parametrize("workload", ["tiny-w2", "tiny-w3"])
def test_one_grpo_step_of_the_harness_on_the_cpu(tmp_path, workload):
    """The folder is built by the harness, loaded by HFPolicy, and one step trains: tiny-w2 fully (a reference
    copy), tiny-w3 with LoRA (the reference is the base: no copy)."""
    folder, out = tmp_path / "model", tmp_path / "out.json"
    user_scale.main(["--workload", workload, "--model", str(folder), "--steps", "1", "--warmup", "0", "--no-fast",
                     "--output-dir", str(tmp_path / "run"), "--out", str(out)])
    report = json.loads(out.read_text())["toolkit"]
    spec = models.WORKLOADS[workload]
    assert models.folder_shape(folder) == spec.shape
    assert 0 < report["completion_tokens"][0] <= spec.prompts * spec.group * spec.max_new
    assert set(report["phases_median_s"]) >= {"sample", "reference", "update"}
    memory = report["memory"]
    assert memory["by_dtype_gb"]["weights"]["bfloat16"] > 0  # --param-dtype bf16, the default
    assert memory["optimizer_state_gb"] > 0
    if spec.lora_r:
        assert memory["reference_gb"] == 0 and memory["gradients_gb"] < memory["weights_gb"] / 2
    else:
        assert memory["reference_gb"] == pytest.approx(memory["weights_gb"])
        assert memory["gradients_gb"] == pytest.approx(memory["weights_gb"], rel=0.01)


def test_options_go_where_the_toolkit_has_them_or_fail_in_one_line(tmp_path):
    from lmgym.algorithms import GRPOConfig
    from lmgym.policies import HFPolicy

    def args(*extra):
        return user_scale.parse_args(["--workload", "tiny-w2", "--model", str(tmp_path), "--out", "-", *extra])

    assert user_scale.toolkit_kwargs(args()) == ({}, {})  # nothing given: nothing passed
    fields = set(GRPOConfig.__dataclass_fields__)
    for flag, name, value in (("--gradient-checkpointing", "gradient_checkpointing", None),
                              ("--max-tokens-per-microbatch", "max_tokens_per_microbatch", "512")):
        given = args(flag, *([value] if value else []))
        if name in fields:
            assert name in user_scale.toolkit_kwargs(given)[0]
        elif name in HFPolicy.__init__.__code__.co_varnames:
            assert name in user_scale.toolkit_kwargs(given)[1]
        else:
            with pytest.raises(SystemExit, match=f"no '{name}' setting yet"):
                user_scale.toolkit_kwargs(given)
    with pytest.raises(SystemExit, match="give --lora-r"):
        user_scale.toolkit_kwargs(args("--load-in-4bit", "--lora-r", "0"))
    lora = user_scale.toolkit_kwargs(args("--lora-r", "16", "--load-in-4bit"))[1]["lora"]
    assert (lora.r, lora.alpha, lora.load_in_4bit) == (16, 32, True)


def test_both_sides_get_the_same_settings(tmp_path):
    args = user_scale.parse_args(["--workload", "w3", "--model", str(tmp_path), "--prompts-file", "q.jsonl",
                                  "--max-new", "256", "--trl-script", "trl.py", "--trl-liger", "--load-in-4bit",
                                  "--memory-cap-gb", "78", "--out", "-"])
    toolkit = user_scale.parse_args(user_scale.toolkit_command(args)[2:])
    trl = trl_side.parse_args(user_scale.trl_command(args, "paged")[2:])
    shared = ("model", "prompts_file", "prompts", "group", "max_new", "steps", "warmup", "lora_r", "param_dtype",
              "beta", "lr", "seed", "load_in_4bit", "micro_batch", "memory_cap_gb")
    assert {k: getattr(toolkit, k) for k in shared} == {k: getattr(args, k) for k in shared}
    assert {k: getattr(trl, k) for k in shared} == {k: getattr(args, k) for k in shared}
    assert (args.lora_r, args.group, args.max_new, trl.mode, trl.liger, trl.gradient_checkpointing) == \
        (16, 8, 256, "paged", True, False)
    assert toolkit.child and toolkit.gradient_checkpointing is None


def test_trl_flags_map_to_its_config_fields():
    args = trl_side.parse_args(["--model", "m", "--prompts", "16", "--group", "8", "--micro-batch", "4",
                                "--gradient-checkpointing", "--liger"])
    new = trl_side.config_kwargs(args, {"shuffle_dataset", "use_liger_kernel"}, cuda=True)
    batch = (new["per_device_train_batch_size"], new["gradient_accumulation_steps"], new["num_generations"])
    assert batch == (4, 32, 8)
    assert new["gradient_checkpointing"] and new["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
    assert new["use_liger_kernel"] and new["cache_implementation"] == "static" and not new["shuffle_dataset"]
    assert new["bf16"] and not new["use_cpu"] and new["beta"] == 0.04
    old = trl_side.config_kwargs(trl_side.parse_args(["--model", "m", "--liger", "--mode", "paged"]),
                                 {"use_liger_loss"}, cuda=False)
    assert old["use_liger_loss"] and old["use_transformers_paged"] and "cache_implementation" not in old
    assert "shuffle_dataset" not in old and not old["gradient_checkpointing"] and old["use_cpu"]
    with pytest.raises(SystemExit):
        trl_side.parse_args(["--model", "m", "--prompts", "3", "--group", "3", "--micro-batch", "2"])


def test_the_largest_fit_doubles_then_bisects():
    calls = []

    def fits(limit):
        def run(value):
            calls.append(value)
            return {"status": "fits" if value <= limit else "oom"}
        return run

    assert user_scale.largest_fitting(1024, fits(3500), 5, 128)[0] == 3072
    assert calls == [1024, 2048, 4096, 3072, 3584]  # doubled to the first OOM, then bisected while tries remain
    calls.clear()
    assert user_scale.largest_fitting(1024, fits(3100), 9, 1024)[0] == 3072 and calls == [1024, 2048, 4096, 3072]
    assert user_scale.largest_fitting(1024, fits(100), 5, 128) == (None, [{"value": 1024, "status": "oom"}])
    calls.clear()
    assert user_scale.largest_fitting(8, fits(10**6), 3, 2)[0] == 32 and calls == [8, 16, 32]
    stop = user_scale.largest_fitting(8, lambda v: {"status": "fits" if v < 16 else "timeout"}, 5, 2)
    assert stop[0] == 8 and [t["status"] for t in stop[1]] == ["fits", "timeout"]


def test_a_child_is_judged_by_its_result_line():
    run = user_scale.run_child
    assert run([sys.executable, "-c", "print('RESULT {\"median_step_s\": 1.5}')"], 60) == \
        {"status": "fits", "median_step_s": 1.5}
    assert run([sys.executable, "-c", "raise SystemExit('torch.OutOfMemoryError: CUDA out of memory')"],
               60)["status"] == "oom"
    assert run([sys.executable, "-c", "raise SystemExit('boom')"], 60)["status"] == "error"


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="trl is not installed")
def test_trl_side_runs_one_step_on_the_cpu(tmp_path):
    from trl import GRPOConfig

    folder = models.build_model_folder("tiny-w2", tmp_path / "model", device="cpu")
    args = trl_side.parse_args(["--model", str(folder), "--prompts", "2", "--group", "2", "--max-new", "4",
                                "--micro-batch", "2", "--steps", "1", "--warmup", "0", "--mode", "default",
                                "--output-dir", str(tmp_path / "trl")])
    GRPOConfig(**trl_side.config_kwargs(args, set(GRPOConfig.__dataclass_fields__), cuda=False))
    report = trl_side.run(args)
    assert report["anchor"] == "trl.GRPOTrainer" and len(report["step_s"]) == 1
    assert report["memory"]["reference_gb"] > 0 and torch.isfinite(torch.tensor(report["median_step_s"]))


def test_trl_side_imports_nothing_of_the_toolkit():
    """TRL's process must run TRL as it comes: no toolkit module (one could set torch flags) is imported."""
    code = ("import sys; sys.path.insert(0, 'benchmarks'); import trl_user_scale_baseline; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'policies', 'algorithms', 'training', "
            "'episodes', 'envs', 'core', 'retrieval', 'buffers', 'transformers'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_folder_of_another_shape_is_refused_in_one_line(tmp_path):
    folder = models.build_model_folder("tiny-w3", tmp_path / "m", device="cpu")
    with pytest.raises(SystemExit, match="holds shape 'tiny-w3'; workload tiny-w2 needs 'tiny-w2'"):
        user_scale.main(["--workload", "tiny-w2", "--model", str(folder), "--out", "-"])


def test_two_fsdp_ranks_take_their_own_prompts_and_sum_their_tokens(tmp_path):
    """Under torchrun (2 gloo ranks, FSDP2) every rank samples its own prompts x group (weak scaling), the
    report counts both ranks' tokens, shows each rank, and the memory breakdown counts this rank's shards."""
    folder = tmp_path / "model"
    models.build_model_folder("tiny-w2", folder)
    common = ["--workload", "tiny-w2", "--model", str(folder), "--steps", "2", "--warmup", "1", "--no-fast",
              "--output-dir", str(tmp_path / "run")]
    user_scale.main([*common, "--out", str(tmp_path / "one.json")])
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(ROOT / "benchmarks" / "user_scale.py"), *common, "--data-parallel", "fsdp",
                           "--output-dir", str(tmp_path / "run2"), "--out", str(tmp_path / "two.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    one = json.loads((tmp_path / "one.json").read_text())["toolkit"]
    two = json.loads((tmp_path / "two.json").read_text())["toolkit"]
    spec = models.WORKLOADS["tiny-w2"]
    assert one["completion_tokens"] == [spec.prompts * spec.group * spec.max_new] * 2  # random weights: full length
    assert two["completion_tokens"] == [2 * t for t in one["completion_tokens"]]
    assert (two["world_size"], two["data_parallel"]) == (2, "fsdp") and [r["rank"] for r in two["per_rank"]] == [0, 1]
    assert two["memory"]["weights_gb"] < 0.8 * one["memory"]["weights_gb"]  # the layers are sharded


def test_torchrun_runs_the_toolkit_alone(monkeypatch, capsys):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    with pytest.raises(SystemExit):
        user_scale.parse_args(["--workload", "tiny-w2", "--model", "m", "--trl-script", "x.py", "--out", "-"])
    assert "under torchrun only the toolkit runs" in capsys.readouterr().err
