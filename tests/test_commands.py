"""The installed `lmgym` command (lmgym/commands): `python -m lmgym grpo` end to end on a tiny model saved to a
folder, a local JSONL data set and a reward function given by its dotted name; ppo, reinforce, sft, dpo and eval
in this process; each bad input one line and a non-zero exit; the help; setup.py's console script."""
from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmgym.commands import COMMANDS, dispatch
from lmgym.commands.data import load_data
from lmgym.envs.rewards import accuracy_reward
from lmgym.policies import build_tiny_model, build_tiny_tokenizer
from tests.tiers import slow

ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"prompt": "What is 1 + 1?", "answer": "2"}, {"prompt": "What is 2 + 3?", "answer": "5"},
        {"prompt": "What is 4 + 4?", "answer": "8"}, {"prompt": "What is 3 + 1?", "answer": "4"}]
PROMPTS = [row["prompt"] for row in ROWS]
REWARDS = "cmd_test_rewards"  # the reward module written into the work folder (a name no other test imports)
# the flags of the GRPO run (TRL's names), TensorBoard among its trackers
GRPO_FLAGS = ["--max_steps", "2", "--num_generations", "2", "--per_device_train_batch_size", "2",
              "--max_completion_length", "6", "--save_steps", "1", "--log_completions", "--no-progress",
              "--report_to", "tensorboard"]
SMALL_RL = ["--train_iterations", "1", "--prompts_per_iteration", "2", "--max_new_tokens", "4",
            "--micro_batch_size", "2", "--no-progress"]


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path.name


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A user's folder: the tiny model saved to tiny/, data files and a reward module."""
    folder = tmp_path_factory.mktemp("commands")
    tokenizer = build_tiny_tokenizer()
    build_tiny_model(tokenizer, seed=0).save_pretrained(folder / "tiny")
    tokenizer.save_pretrained(folder / "tiny")
    write_jsonl(folder / "data.jsonl", ROWS)
    write_jsonl(folder / "questions.jsonl", [{"question": row["prompt"]} for row in ROWS])
    write_jsonl(folder / "sft.jsonl", [{"prompt": "What is 1 + 1?", "completion": "2"},
                                       {"messages": [{"role": "user", "content": "Hi"},
                                                     {"role": "assistant", "content": "Hello"}]}])
    write_jsonl(folder / "dpo.jsonl", [{"prompt": "What is 1 + 1?", "chosen": "2", "rejected": "3"},
                                       {"prompt": "What is 2 + 2?", "chosen": "4", "rejected": "5"}])
    (folder / f"{REWARDS}.py").write_text(
        "def has_digit(completions, **kwargs):\n"
        "    return [float(any(ch.isdigit() for ch in c)) for c in completions]\n\n"
        "NOT_A_FUNCTION = 3\n", encoding="utf-8")
    (folder / "broken_rewards.py").write_text("def oops(:\n", encoding="utf-8")
    return folder


@pytest.fixture
def in_work(work, monkeypatch) -> Path:
    monkeypatch.chdir(work)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return work


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------- python -m lmgym grpo, in a subprocess


@pytest.fixture(scope="module")
def grpo_run(work) -> tuple[Path, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"}
    command = [sys.executable, "-m", "lmgym", "grpo", "--model", "tiny", "--dataset_name", "data.jsonl",
               "--reward_funcs", f"{REWARDS}.has_digit", "format_reward", "--output_dir", "grpo-run", *GRPO_FLAGS]
    result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return work / "grpo-run", result


@slow
def test_python_m_lmgym_grpo_trains_on_a_local_jsonl_with_a_dotted_reward_function(grpo_run):
    run, result = grpo_run
    rows = metrics(run)
    assert [row["iteration"] for row in rows if "loss" in row] == [1, 2]
    config = json.loads((run / "config.json").read_text())
    assert config["algorithm"] == "GRPO" and config["env"] == "Dataset-v0" and config["train_iterations"] == 2
    assert config["samples_per_prompt"] == 2 and config["prompts_per_iteration"] == 1  # TRL's generation batch
    for step in (1, 2):
        assert (run / f"checkpoint-{step}" / "model.safetensors").is_file()
        assert (run / f"checkpoint-{step}" / "trainer_state.json").is_file()
    assert (run / "model" / "model.safetensors").is_file() and (run / "model" / "tokenizer_config.json").is_file()
    assert "run folder: grpo-run" in result.stdout and "Traceback" not in result.stderr


@slow
def test_log_completions_writes_the_sampled_completions_of_the_data_sets_prompts(grpo_run):
    run, _ = grpo_run
    lines = [json.loads(line) for line in (run / "completions.jsonl").read_text().splitlines()]
    assert len(lines) == 2 * 2  # 2 iterations x 1 prompt x 2 completions
    assert all(any(p in line["prompt"] for p in PROMPTS) and isinstance(line["completion"], str) for line in lines)
    assert sorted({line["iteration"] for line in lines}) == [1, 2]


@slow
def test_report_to_tensorboard_gets_trls_names_and_the_completions_table(grpo_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run, _ = grpo_run
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    rows = [row for row in metrics(run) if "loss" in row]
    for key in ("rewards/has_digit/mean", "rewards/format_reward/mean", "reward", "completions/mean_length"):
        assert [(s.step, s.value) for s in events.Scalars(key)] == [
            (row["iteration"], pytest.approx(row[key], rel=1e-6)) for row in rows], key
    tables = events.Tensors("completions/text_summary")
    assert [t.step for t in tables] == [1, 2]
    text = tables[0].tensor_proto.string_val[0].decode()
    assert "rewards/has_digit" in text and any(p in text for p in PROMPTS)


@slow
def test_a_bad_input_through_python_m_lmgym_is_one_line_without_a_traceback(work):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    for argv, status, line in ((["grpoo"], 2, "lmgym: error: unknown command 'grpoo' (did you mean grpo?)"),
                               (["eval", "--dataset_name", "missing.jsonl"], 1,  # eval: no config class to import
                                "error: --dataset_name missing.jsonl: no such file or folder")):
        result = subprocess.run([sys.executable, "-m", "lmgym", *argv], cwd=work, env=env, capture_output=True,
                                text=True, timeout=300)
        lines = [text for text in result.stderr.splitlines() if text.strip()]
        assert result.returncode == status and len(lines) == 1 and lines[0].startswith(line), result.stderr


# ---------------------------------------------------------------- the other commands, in this process


@slow
@pytest.mark.parametrize("command", ["ppo", "reinforce"])
def test_ppo_and_reinforce_train_on_the_data_set(command, in_work):
    rows = dispatch([command, "--model", "tiny", "--dataset_name", "data.jsonl", "--reward_funcs", "format_reward",
                     f"{REWARDS}.has_digit", "--output_dir", f"{command}-run", *SMALL_RL])
    assert rows[-1]["iteration"] == 1 and "loss" in rows[-1]
    assert json.loads((in_work / f"{command}-run" / "config.json").read_text())["env"] == "Dataset-v0"
    assert (in_work / f"{command}-run" / "checkpoint-1").is_dir()


@slow
def test_sft_trains_on_prompt_completion_and_messages_rows_of_one_file(in_work):
    rows = dispatch(["sft", "--model", "tiny", "--dataset_name", "sft.jsonl", "--max_steps", "2", "--max_length",
                     "64", "--output_dir", "sft-run", "--no-progress"])
    assert [row["iteration"] for row in rows if "loss" in row] == [1, 2] and rows[-1]["loss"] > 0
    assert (in_work / "sft-run" / "checkpoint-2").is_dir() and (in_work / "sft-run" / "model").is_dir()


def test_dpo_trains_on_prompt_chosen_rejected_rows_and_scores_a_test_split(in_work):
    rows = dispatch(["dpo", "--model", "tiny", "--dataset_name", "dpo.jsonl", "--dataset_test_split", "held",
                     "--max_steps", "2", "--beta", "0.1", "--output_dir", "dpo-run", "--no-progress"])
    assert rows[-1]["iteration"] == 2 and "reward_margin" in rows[-1] and "eval_loss" in rows[-1]
    assert json.loads((in_work / "dpo-run" / "config.json").read_text())["beta"] == 0.1


def test_eval_on_a_data_set_writes_the_metrics_and_each_problems_record(in_work, capsys):
    result = dispatch(["eval", "--model", "tiny", "--dataset_name", "data.jsonl", "--max_new_tokens", "4",
                       "--reward_funcs", "accuracy_reward", f"{REWARDS}.has_digit", "--output_file", "ev/eval.json"])
    assert result["episodes"] == len(PROMPTS) and 0 <= result["accuracy"] <= 1
    assert {"reward_accuracy_reward", "reward_has_digit"} <= set(result)
    assert json.loads((in_work / "ev" / "eval.json").read_text()) == pytest.approx(result)
    assert len((in_work / "ev" / "eval.problems.jsonl").read_text().splitlines()) == len(PROMPTS)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == pytest.approx(result)


def test_eval_on_a_registered_env(in_work):
    result = dispatch(["eval", "--model", "tiny", "--env", "Arithmetic-v0", "--env_kwargs",
                       '{"level": 1, "split": "test"}', "--episodes", "2", "--max_new_tokens", "4"])
    assert result["episodes"] == 2 and result["mean_length"] == pytest.approx(4.0)


# ---------------------------------------------------------------- refusals: one line, a non-zero exit


def refusal(argv: list[str], capsys) -> tuple[object, str]:
    """(exit status, the one line the user sees) of a refused command line."""
    with pytest.raises(SystemExit) as exit_info:
        dispatch(argv)
    code, err = exit_info.value.code, capsys.readouterr().err
    if isinstance(code, str):  # run_with_clear_errors: "error: ..." printed by Python on exit, status 1
        assert "\n" not in code and "Traceback" not in err, (code, err)  # err: progress bars at most
        return 1, code
    lines = [text for text in err.splitlines() if text.strip()]
    assert code != 0 and len(lines) == 1, err
    return code, lines[0]


GRPO = ["grpo", "--model", "tiny", "--dataset_name", "data.jsonl"]
REFUSALS = [
    ([], 2, "lmgym: error: no command given"),
    (["--frobnicate"], 2, "lmgym: error: unknown flag '--frobnicate'"),
    (["grpo", "--model", "tiny"], 2, "lmgym grpo: error: the following arguments are required: --dataset_name, "
                                     "--reward_funcs"),
    ([*GRPO, "--reward_funcs", "format_reward", "--learning_rat", "1e-5"], 2,
     "lmgym grpo: error: unknown flag --learning_rat (did you mean --learning_rate?)"),
    ([*GRPO, "--reward_funcs", "format_reward", "--learning_rate", "-1"], 1,
     "error: GRPOConfig.learning_rate must be > 0"),
    (["grpo", "--dataset_name", "nope.jsonl", "--reward_funcs", "format_reward"], 1,
     "error: --dataset_name nope.jsonl: no such file or folder"),
    ([*GRPO, "--reward_funcs", "no_such_module.fn"], 1,
     "error: --reward_funcs no_such_module.fn: cannot import no_such_module (ModuleNotFoundError"),
    ([*GRPO, "--reward_funcs", "broken_rewards.oops"], 1,
     "error: --reward_funcs broken_rewards.oops: cannot import broken_rewards (SyntaxError"),
    ([*GRPO, "--reward_funcs", f"{REWARDS}.nothing"], 1, f"error: --reward_funcs {REWARDS}.nothing: module "
                                                          f"{REWARDS} has no 'nothing'"),
    ([*GRPO, "--reward_funcs", f"{REWARDS}.NOT_A_FUNCTION"], 1, "error: --reward_funcs "
                                                                f"{REWARDS}.NOT_A_FUNCTION: NOT_A_FUNCTION is a int"),
    ([*GRPO, "--reward_funcs", "corectness_reward"], 1,
     "error: --reward_funcs 'corectness_reward' is neither a built-in name nor module.fn (did you mean "
     "correctness_reward?)"),
    ([*GRPO, "--reward_funcs", "format_reward", "--config", "no.yaml"], 1, "error: config file not found: no.yaml"),
    (["grpo", "--dataset_name", "questions.jsonl", "--reward_funcs", "format_reward", "--model", "nowhere"], 1,
     "error: dataset has no 'prompt' column"),  # said before the model (not there) loads
    ([*GRPO, "--reward_funcs", "format_reward", "--reward_weights", "1", "2"], 1,
     "error: GRPO: reward_weights has 2 weights for 1 reward functions (format_reward)"),
    (["sft", "--model", "tiny", "--dataset_name", "data.jsonl"], 1, "error: --dataset_name data.jsonl (train): "
                                                                    "row 0: expected 'prompt' and 'completion'"),
    (["dpo", "--model", "tiny", "--dataset_name", "data.jsonl"], 1,
     "error: --dataset_name data.jsonl (train): row 0: missing field(s) chosen, rejected"),
    (["eval", "--model", "tiny"], 1, "error: lmgym eval: give one of --env"),
    (["eval", "--model", "tiny", "--env", "Nope-v0"], 1, "error: unknown env id 'Nope-v0'"),
    (["eval", "--model", "tiny", "--env", "Arithmetic-v0", "--env_kwargs", "{bad"], 1,
     "error: --env_kwargs is not JSON"),
    (["serve", "--timeout_seconds", "0"], 1, "error: ServerLimits.timeout_seconds must be > 0"),
]


@pytest.mark.parametrize(("argv", "status", "line"), REFUSALS, ids=[" ".join(argv)[-50:] for argv, _, _ in REFUSALS])
def test_each_bad_input_is_one_line_and_a_non_zero_exit(argv, status, line, in_work, capsys):
    code, shown = refusal(argv, capsys)
    assert code == status and shown.startswith(line), shown


# ---------------------------------------------------------------- help, the entry point, the data sets


def test_help_lists_the_commands_and_a_commands_help_lists_its_flags(capsys):
    assert dispatch(["--help"]) is None
    shown = capsys.readouterr().out
    assert all(f"  {name} " in shown for name in COMMANDS) and set(COMMANDS) == {
        "grpo", "ppo", "reinforce", "sft", "dpo", "eval", "serve"}
    with pytest.raises(SystemExit) as exit_info:
        dispatch(["grpo", "--help"])
    shown = capsys.readouterr().out
    assert exit_info.value.code == 0
    for flag in ("--model", "--dataset_name", "--dataset_config", "--dataset_train_split", "--reward_funcs",
                 "--config", "--learning_rate", "--samples_per_prompt", "--num_generations", "--log_completions",
                 "--resume_from_checkpoint", "--use_peft"):
        assert flag in shown, flag


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_commands_help_prints_and_exits_0(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        dispatch([command, "--help"])
    shown = capsys.readouterr().out
    assert exit_info.value.code == 0 and shown.startswith(f"usage: lmgym {command} ") and "--model" in shown


def test_setup_py_installs_the_lmgym_console_script_and_its_function_runs(capsys):
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    call = next(node for node in ast.walk(tree)
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup")
    entry_points = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "entry_points"))
    [script] = entry_points["console_scripts"]
    name, _, target = (part.strip() for part in script.partition("="))
    module, _, function = target.partition(":")
    assert name == "lmgym"
    main = getattr(importlib.import_module(module), function)
    assert main(["--version"]) == 0
    from lmgym import __version__

    assert capsys.readouterr().out.strip() == f"lmgym {__version__}"
    assert (ROOT / "lmgym" / "__main__.py").is_file()


def test_local_csv_parquet_and_saved_folders_load_under_the_split_asked_for(tmp_path):
    import datasets

    table = datasets.Dataset.from_list([{"prompt": p} for p in PROMPTS])
    table.to_csv(tmp_path / "d.csv")
    table.to_parquet(tmp_path / "d.parquet")
    table.save_to_disk(tmp_path / "saved")
    datasets.DatasetDict({"train": table, "test": table.select([0])}).save_to_disk(tmp_path / "splits")
    for name in ("d.csv", "d.parquet", "saved"):
        assert load_data(str(tmp_path / name), split="anything")["prompt"] == PROMPTS, name
    assert load_data(str(tmp_path / "splits"), split="test")["prompt"] == PROMPTS[:1]
    with pytest.raises(ValueError, match=r"no split 'dev'; it has train, test"):
        load_data(str(tmp_path / "splits"), split="dev")


def test_accuracy_reward_grades_against_the_solution_column_as_trls_does():
    row = {"fields": {"solution": "1 + 1 is two, so \\boxed{2}"}}
    assert accuracy_reward("The answer is #### 2", "", row) == 1.0
    assert accuracy_reward("The answer is #### 3", "", row) == 0.0
    assert accuracy_reward("#### 5", "5", {"fields": {}}) == 1.0  # no solution column: graded against the gold
