"""The GSM8K example scripts end to end (tiny model saved to disk, real GSM8K rows, CPU, offline).

Each subprocess imports torch and transformers (~10 s of CPU), so there are five: the second of two
REINFORCE-stable runs sharing a buffer cache (the first runs in this process, as does the GRPO run from the
YAML config) and four bad inputs, each script run as a user runs it. The other bad inputs call the scripts'
main() in this process.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tiers import slow
from tests.tiny_models import save_tiny_model_dir

pytestmark = slow  # the slow tier (tests/tiers.py): runs every example as a process

ROOT = Path(__file__).resolve().parents[1]
REINFORCE = ROOT / "examples" / "reinforce_stable_gsm8k.py"
GRPO_SCRIPT = ROOT / "examples" / "grpo_gsm8k.py"
PPO_SCRIPT = ROOT / "examples" / "ppo_gsm8k.py"
QUICKSTART = ROOT / "examples" / "quickstart.py"


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> str:
    from lmgym.policies import build_tiny_model

    return save_tiny_model_dir(tmp_path_factory, build_tiny_model)


def run_script(script: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2", "WANDB_MODE": "disabled",
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(script), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def load_script(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def error_line(module, argv: list[str]) -> str:
    """main(argv) must exit with a one-line "error: ..." message (what the user sees on stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        module.main(argv)
    message = exit_info.value.code
    assert isinstance(message, str) and message.startswith("error: ") and "\n" not in message, message
    return message


def test_reinforce_stable_gsm8k_runs_and_reuses_its_buffer_cache(tiny_model_dir, gsm8k_train, tmp_path, capsys):
    cache = tmp_path / "buffer.jsonl"
    common = ["--model_name_or_path", tiny_model_dir, "--ref_model_name", tiny_model_dir,
              "--train_data_file", gsm8k_train, "--gsm8k_path", gsm8k_train, "--sys_prompt_path",
              str(ROOT / "lmgym" / "prompts" / "stepwise_solver_sys.txt"), "--n_few_shot_examples", "1",
              "--num_collection_episodes", "2", "--max_trajectory_steps", "2", "--max_new_tokens", "8",
              "--num_update_steps", "2", "--gradient_accumulation_steps", "2", "--n_eval_steps", "2",
              "--kl_coeff", "0.25", "--update_ref_iterations", "1", "--sym_calc",
              "--cache_buffer", "--buffer_cache_path", str(cache)]
    # the first run in this process (no interpreter start-up of its own), the second in a fresh one, as a user runs it
    load_script(REINFORCE).main([*common, "--num_iterations", "1", "--save_path", str(tmp_path / "run1")])
    assert "the last 500 of 7473 training rows are held back" in capsys.readouterr().out
    rows = metrics(tmp_path / "run1")
    assert rows[-1]["iteration"] == 1 and rows[-1]["buffer_from_cache"] == 0.0 and "eval_accuracy" in rows[-1]
    assert (tmp_path / "run1" / "checkpoint-1" / "MANIFEST.json").is_file()
    assert (tmp_path / "run1" / "model" / "config.json").is_file()
    cached = cache.read_text()
    assert len(cached.splitlines()) == 3  # header + the 2 collected episodes

    second = run_script(REINFORCE, *common, "--num_iterations", "2", "--save_path", str(tmp_path / "run2"))
    assert second.returncode == 0, second.stderr[-3000:]
    assert "first iteration trains on 2 cached episodes" in second.stdout
    assert "warning" not in second.stdout  # same model and prompt: the cache matches
    rows = [r for r in metrics(tmp_path / "run2") if "buffer_from_cache" in r]
    assert [r["buffer_from_cache"] for r in rows] == [1.0, 0.0]
    assert cache.read_text() == cached  # the cache asked for is kept; the new collection goes next to it
    assert len((tmp_path / "buffer_updated.jsonl").read_text().splitlines()) == 3
    assert (tmp_path / "run2" / "checkpoint-2" / "MANIFEST.json").is_file()


def test_grpo_gsm8k_runs_from_the_yaml_config(tiny_model_dir, gsm8k_train, tmp_path):
    run_dir = tmp_path / "grpo"
    # in this process (the script as a fresh process: the bad-YAML test below)
    load_script(GRPO_SCRIPT).main(["--config", str(ROOT / "examples" / "configs" / "grpo_gsm8k.yaml"),
                                   "--model", tiny_model_dir, "--data_path", gsm8k_train, "--train_iterations", "1",
                                   "--prompts_per_iteration", "1", "--samples_per_prompt", "2", "--max_new_tokens",
                                   "8", "--eval_episodes", "2", "--no-eval_at_start", "--output_dir", str(run_dir)])
    rows = metrics(run_dir)
    assert len(rows) == 1 and rows[0]["iteration"] == 1 and rows[0]["eval_episodes"] == 2.0
    config = json.loads((run_dir / "config.json").read_text())
    assert config["micro_batch_size"] == 32  # from the YAML file (the script's own default is 16)
    assert config["samples_per_prompt"] == 2  # flags override the file
    assert (run_dir / "checkpoint-1" / "MANIFEST.json").is_file()
    assert (run_dir / "model" / "config.json").is_file()


def test_a_missing_train_file_is_a_one_line_error(tmp_path):
    result = run_script(REINFORCE, "--train_data_file", str(tmp_path / "missing.jsonl"))
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [f"error: data file not found: {tmp_path / 'missing.jsonl'}"]


def only_error_line(result: subprocess.CompletedProcess) -> str:
    """The script failed with exactly one line on stderr, `error: ...`, and no traceback."""
    assert result.returncode == 1, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    return lines[0]


def test_a_bad_yaml_file_is_one_error_line_from_the_script(tmp_path):
    bad = _yaml(tmp_path, "learning_rate: 1e-5\nadam_betas: [0.9, 0.99\nseed: 1\n")
    line = only_error_line(run_script(GRPO_SCRIPT, "--config", str(bad)))
    assert line.startswith(f"error: {bad}: invalid YAML at line 3, column 5:"), line


def test_an_infinite_temperature_flag_is_one_error_line_from_the_script(tmp_path):
    line = only_error_line(run_script(PPO_SCRIPT, "--temperature", "inf", "--output_dir", str(tmp_path / "run")))
    assert line == "error: PPOConfig.temperature expects a finite number, got inf"


@pytest.mark.parametrize("script", [QUICKSTART, GRPO_SCRIPT, PPO_SCRIPT, REINFORCE], ids=lambda p: p.stem)
def test_every_example_turns_config_errors_into_one_line(script, tmp_path, monkeypatch):
    """Bad YAML (syntax, values, shape) and bad flags stop every script before any model or data is loaded."""
    monkeypatch.delenv("RLGYM_TRACEBACK", raising=False)
    module, name = load_script(script), ("ReinforceStableConfig" if script == REINFORCE
                                         else "PPOConfig" if script == PPO_SCRIPT else "GRPOConfig")
    out = ["--save_path" if script == REINFORCE else "--output_dir", str(tmp_path / "run")]
    cases = [("seed: 1\n  temperature: 2\n", "invalid YAML at line 2, column"),
             ("temperature: null\n", f"{name}.temperature expects a number, got None"),
             ("adam_betas: [0.9]\n", f"{name}.adam_betas expects a list of 2 numbers, got [0.9]"),
             ("seed: abc\n", f"{name}.seed expects an integer, got 'abc'"),
             ("kl_in_reward: 'maybe'\n", f"{name}.kl_in_reward expects true or false"),
             ("- learning_rate\n", "expected a mapping of field: value at the top level, got a list")]
    for text, expected in cases:
        path = _yaml(tmp_path, text)
        message = error_line(module, ["--config", str(path), *out])
        assert message.startswith(f"error: {path}: ") and expected in message, (text, message)
    assert "is a directory, not a YAML file" in error_line(module, ["--config", str(tmp_path), *out])
    assert f"{name}.learning_rate expects a finite number, got inf" in error_line(
        module, ["--learning_rate", "inf", *out])
    afile = _yaml(tmp_path, "seed: 1\n")
    assert f"{name}.output_dir must be a folder, not an existing file" in error_line(module, [out[0], str(afile)])


def test_bad_inputs_are_one_line_errors(tiny_model_dir, gsm8k_train, tmp_path):
    reinforce, grpo = load_script(REINFORCE), load_script(GRPO_SCRIPT)
    assert "kl_coeff must be >= 0" in error_line(reinforce, ["--train_data_file", gsm8k_train, "--kl_coeff", "-1"])
    assert "kl_coeff must be >= 0" in error_line(grpo, ["--data_path", gsm8k_train, "--kl_coeff", "-1"])
    missing_model = str(tmp_path / "no_model")
    assert "cannot load model" in error_line(reinforce, ["--train_data_file", gsm8k_train, "--model_name_or_path",
                                                         missing_model, "--n_few_shot_examples", "0"])
    assert "cannot load model" in error_line(grpo, ["--data_path", gsm8k_train, "--model", missing_model])
    assert "system prompt file not found" in error_line(grpo, ["--data_path", gsm8k_train, "--system_prompt_path",
                                                               str(tmp_path / "none.txt")])
    assert "n_few_shot=9 examples asked for, but 2 in the examples list" in error_line(
        reinforce, ["--train_data_file", gsm8k_train, "--model_name_or_path", tiny_model_dir,
                    "--gsm8k_path", str(_two_rows(gsm8k_train, tmp_path)), "--n_few_shot_examples", "9"])
    assert "--cache_buffer needs --buffer_cache_path" in error_line(reinforce, ["--cache_buffer"])
    assert "unknown ReinforceStableConfig field(s): nonsense" in error_line(
        reinforce, ["--config", str(_yaml(tmp_path, "nonsense: 1\n"))])


def test_seed_002_flags_map_onto_the_config(tmp_path):
    reinforce = load_script(REINFORCE)
    yaml_file = ROOT / "examples" / "configs" / "reinforce_stable_gsm8k.yaml"
    args = reinforce.build_parser().parse_args(["--config", str(yaml_file)])
    config, cap = reinforce.resolve_config(args)
    assert (config.prompts_per_iteration, config.minibatch_size, config.eval_episodes, cap) == (100, 32, 101, 0)
    assert config.eval_at_start is True and config.ref_sync_every == 2 and reinforce.trajectory_steps(args) == 10
    args = reinforce.build_parser().parse_args([
        "--config", str(yaml_file), "--num_collection_episodes", "6", "--max_trajectory_steps", "3",
        "--gradient_accumulation_steps", "4", "--micro_batch_size", "2", "--num_update_steps", "3",
        "--evaluation_iterations", "5", "--n_eval_steps", "7", "--no-evaluation_at_start", "--save_path", "out",
        "--n_save_iterations", "4", "--update_ref_iterations", "3", "--kl_coeff", "0.1"])
    config, cap = reinforce.resolve_config(args)
    assert (config.prompts_per_iteration, config.samples_per_prompt, reinforce.trajectory_steps(args)) == (6, 1, 3)
    assert (config.minibatch_size, config.micro_batch_size, cap) == (8, 2, 6)
    assert (config.eval_every, config.eval_episodes, config.eval_at_start) == (5, 7, False)
    assert (config.output_dir, config.save_every, config.ref_sync_every, config.kl_coeff) == ("out", 4, 3, 0.1)


def _two_rows(source: str, tmp_path: Path) -> Path:
    with open(source, encoding="utf-8") as handle:
        lines = [next(handle) for _ in range(2)]
    path = tmp_path / "two.jsonl"
    path.write_text("".join(lines))
    return path


def _yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


def _refuse_work(*args, **kwargs):
    raise AssertionError("a model, env or evaluation was started before the config was checked")


@pytest.mark.parametrize("script", [QUICKSTART, GRPO_SCRIPT, PPO_SCRIPT, REINFORCE], ids=lambda p: p.stem)
def test_wandb_asked_for_but_not_installed_is_one_line_before_any_work(script, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` fails, as when it is not installed
    module = load_script(script)
    for name in ("HFPolicy", "FewShotStepwisePolicy", "make", "gsm8k_train_test", "evaluate"):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, _refuse_work)
    name = ("ReinforceStableConfig" if script == REINFORCE else "PPOConfig" if script == PPO_SCRIPT
            else "GRPOConfig")
    out = ["--save_path" if script == REINFORCE else "--output_dir", str(tmp_path / "run")]
    assert error_line(module, ["--wandb", "offline", *out]) == (
        f"error: {name}.wandb is 'offline', but wandb is not installed: pip install wandb (or set wandb to off)")


def test_quickstart_wandb_without_wandb_fails_before_loading_the_model(tmp_path):
    """The reported case, as a user runs it: a fresh process where wandb cannot be imported."""
    code = ("import runpy, sys; sys.modules['wandb'] = None; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    # runpy.run_path, unlike `python examples/quickstart.py`, leaves the script's folder (its `common`) off the path
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "examples")])}
    result = subprocess.run([sys.executable, "-c", code, str(QUICKSTART), "--wandb", "offline", "--model",
                             str(tmp_path / "no_such_model"), "--output_dir", str(tmp_path / "run")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    # a model load would have failed first with "cannot load model"; nothing was printed before the error
    assert only_error_line(result) == ("error: GRPOConfig.wandb is 'offline', but wandb is not installed: "
                                       "pip install wandb (or set wandb to off)")
    assert result.stdout == "" and not (tmp_path / "run").exists()


def test_quickstart_says_when_resume_finds_no_checkpoint(tiny_model_dir, tmp_path, capsys):
    quickstart = load_script(QUICKSTART)
    run_dir = tmp_path / "run"
    quickstart.main(["--preset", "cpu", "--model", tiny_model_dir, "--resume", "--max_steps", "1",
                     "--prompts_per_iteration", "1", "--num_generations", "2", "--max_new_tokens", "4",
                     "--eval_episodes", "2", "--no-progress", "--output_dir", str(run_dir)])
    out = capsys.readouterr().out
    assert f"note: --resume: no checkpoint in {run_dir}, starting from iteration 0" in out
    assert metrics(run_dir)[-1]["iteration"] == 1  # TRL's max_steps (one optimizer step per iteration here)
