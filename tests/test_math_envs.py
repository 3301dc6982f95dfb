"""GSM8K and MATH envs on the shared local files, and the data loading errors (offline)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from lmgym.envs import DataFileNotFoundError, GSM8KEnv, MalformedRowError, MATHEnv
from lmgym.envs.answers import GradingOptions
from lmgym.envs.data import load_rows, read_jsonl

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
GSM8K_TRAIN = SHARED_DATA / "gsm8k" / "train.jsonl"
MATH500_TEST = SHARED_DATA / "math500" / "test.jsonl"


def require(path: Path) -> str:
    if not path.is_file():
        pytest.skip(f"shared data file not found: {path}")
    return str(path)


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---- GSM8K -------------------------------------------------------------------------------------


def test_gsm8k_rows_and_gold_of_row_0():
    env = GSM8KEnv(data_path=require(GSM8K_TRAIN))
    assert env.num_problems == 7473
    problem = env.get_problem(0)
    assert problem.question.startswith("Natalia sold clips to 48 of her friends in April")
    assert problem.gold == "72" and problem.problem_id == "gsm8k/train/0"


def test_gsm8k_single_turn_reward():
    env = GSM8KEnv(data_path=require(GSM8K_TRAIN))
    obs, info = env.reset(options={"index": 0})
    assert obs == info["question"] + " Solve it step by step, then give the final answer after ####."
    assert env.step("48 / 2 = 24 in May, 48 + 24 = 72.\n#### 72")[1] == 1.0
    env.reset(options={"index": 0})
    assert env.step("#### 96")[1] == 0.0


def test_gsm8k_subset_holds_back_the_last_rows():
    path = require(GSM8K_TRAIN)
    held_out = GSM8KEnv(data_path=path, subset=(6973, 7473))
    training = GSM8KEnv(data_path=path, subset=(0, 6973))
    assert (held_out.num_problems, training.num_problems) == (500, 6973)
    full = GSM8KEnv(data_path=path)
    assert held_out.get_problem(0) == full.get_problem(6973)
    assert held_out.get_problem(0).problem_id == "gsm8k/train/6973"
    held_out_ids = {held_out.get_problem(i).problem_id for i in range(500)}
    assert not held_out_ids & {training.get_problem(i).problem_id for i in range(6973)}


def test_gsm8k_data_path_may_be_a_folder_holding_split_jsonl():
    require(GSM8K_TRAIN)
    assert GSM8KEnv(data_path=str(GSM8K_TRAIN.parent), split="train").num_problems == 7473


def test_gsm8k_stepwise_with_calculator_annotation():
    env = GSM8KEnv(data_path=require(GSM8K_TRAIN), mode="stepwise", sym_calc=True)
    prompt, _ = env.reset(options={"index": 0})
    obs, reward, terminated, _, info = env.step("Natalia sold 48/2 = <<48/2=")
    assert info["injected_text"] == "24>>" and obs == prompt + "Natalia sold 48/2 = <<48/2=24>>"
    start, end = info["injected_spans"][-1]
    assert obs[start:end] == "24>>" and (reward, terminated) == (0.0, False)
    _, _, _, _, info = env.step(" clips in May.")  # the line continues, then ends
    assert info["injected_text"] == "\n"
    _, reward, terminated, _, info = env.step("48 + 24 = 72 in total. #### 72")
    assert (reward, terminated, info["correct"]) == (1.0, True, True)


# ---- MATH --------------------------------------------------------------------------------------


def test_math500_rows_gold_and_reward():
    env = MATHEnv(data_path=require(MATH500_TEST))
    assert env.num_problems == 500
    problem = env.get_problem(0)
    assert problem.gold == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert problem.problem_id == "test/precalculus/807.json"
    env.reset(options={"index": 0})
    _, reward, _, _, info = env.step("So the point is $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.")
    assert reward == 1.0 and info["correct"] is True


def test_math_subset_and_stepwise():
    env = MATHEnv(data_path=require(MATH500_TEST), subset=(100, 110), mode="stepwise", max_steps=2)
    assert env.num_problems == 10
    _, info = env.reset(seed=0)
    env.step("Let me think.")
    _, reward, terminated, truncated, info = env.step("Still thinking.")
    assert (reward, terminated, truncated, info["parsed_answer"]) == (0.0, False, True, None)


def test_math_hub_free_local_file_with_problem_solution_answer(tmp_path):
    rows = [{"problem": "What is $1+1$?", "solution": "It is $\\boxed{2}$.", "answer": "2"}]
    path = write_jsonl(tmp_path / "math.jsonl", [json.dumps(row) for row in rows])
    env = MATHEnv(data_path=str(path))
    assert env.get_problem(0).gold == "2" and env.get_problem(0).problem_id == "math/test/0"


def test_math_env_grades_with_its_grading_options(tmp_path):
    rows = [{"problem": "Solve $x^2 = 4$, smallest root first.", "solution": "$\\boxed{-2, 2}$", "answer": "-2, 2"}]
    path = write_jsonl(tmp_path / "math.jsonl", [json.dumps(row) for row in rows])
    strict = MATHEnv(data_path=str(path))
    lenient = MATHEnv(data_path=str(path), grading=GradingOptions(unordered_lists=True))
    for env, reward in ((strict, 0.0), (lenient, 1.0)):  # bare lists keep their order unless unordered_lists
        env.reset(seed=0)
        assert env.step("So \\boxed{2, -2}")[1] == reward
    with pytest.raises(ValueError, match="grading must be a GradingOptions"):
        MATHEnv(data_path=str(path), grading={"unordered_lists": True})


# ---- loading errors ------------------------------------------------------------------------------


def test_missing_data_file_names_the_path(tmp_path):
    missing = tmp_path / "nope" / "gsm8k.jsonl"
    with pytest.raises(DataFileNotFoundError) as error:
        GSM8KEnv(data_path=str(missing))
    assert str(missing) in str(error.value) and "\n" not in str(error.value)
    assert isinstance(error.value, FileNotFoundError)


def test_bad_json_names_the_line(tmp_path):
    good = json.dumps({"question": "q", "answer": "a\n#### 1"})
    path = write_jsonl(tmp_path / "gsm8k.jsonl", [good, "", good, "{not json"])
    with pytest.raises(MalformedRowError,
                       match=r"gsm8k\.jsonl:4: not valid JSON \(Expecting property name enclosed in double quotes\)$"):
        GSM8KEnv(data_path=str(path))


def test_missing_field_names_the_line_and_field(tmp_path):
    good = json.dumps({"question": "q", "answer": "a\n#### 1"})
    path = write_jsonl(tmp_path / "gsm8k.jsonl", [good] * 6 + [json.dumps({"question": "q"})])
    with pytest.raises(MalformedRowError) as error:
        GSM8KEnv(data_path=str(path))
    assert str(error.value).endswith("gsm8k.jsonl:7: missing field 'answer'")
    assert "\n" not in str(error.value)


def test_non_object_row_and_gsm8k_answer_without_marker(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", ["[1, 2]"])
    with pytest.raises(MalformedRowError, match="rows.jsonl:1: expected a JSON object, got list"):
        read_jsonl(path, ["question"])
    path = write_jsonl(tmp_path / "gsm8k.jsonl", [json.dumps({"question": "q", "answer": "just 5"})])
    with pytest.raises(MalformedRowError, match=r"GSM8K train row 0: .*####") as error:
        GSM8KEnv(data_path=str(path))
    assert "\n" not in str(error.value)


def test_empty_file_is_reported(tmp_path):
    path = write_jsonl(tmp_path / "empty.jsonl", [""])
    with pytest.raises(MalformedRowError, match="no rows"):
        MATHEnv(data_path=str(path))


@pytest.mark.parametrize("subset", [(0, 0), (5, 2), (0, 99), (-1, 1), (0.0, 1)])
def test_invalid_subset_names_the_argument(tmp_path, subset):
    path = write_jsonl(tmp_path / "gsm8k.jsonl", [json.dumps({"question": "q", "answer": "#### 1"})] * 3)
    with pytest.raises(ValueError, match=r"^subset must be \(start, stop\)") as error:
        GSM8KEnv(data_path=str(path), subset=subset)
    assert repr(subset) in str(error.value)


def test_argument_errors_come_before_any_loading():
    with pytest.raises(ValueError, match="^mode"):
        GSM8KEnv(data_path="/definitely/missing.jsonl", mode="foo")
    with pytest.raises(ValueError, match="^max_steps"):
        MATHEnv(data_path="/definitely/missing.jsonl", max_steps=0)


# ---- hub path (no network: `datasets` is replaced by a fake module) -------------------------------


def fake_datasets(load_dataset) -> types.ModuleType:
    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset
    return module


def test_hub_failure_tells_the_user_to_pass_data_path(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)\nmore")

    monkeypatch.setitem(sys.modules, "datasets", fake_datasets(offline))
    with pytest.raises(DataFileNotFoundError) as error:
        GSM8KEnv()
    message = str(error.value)
    assert "openai/gsm8k" in message and "data_path" in message and "\n" not in message


def test_hub_rows_are_used_when_no_data_path(monkeypatch):
    calls = []

    class FakeDataset(list):
        column_names = ["question", "answer"]

    def load_dataset(hub_id, config, split):
        calls.append((hub_id, config, split))
        return FakeDataset([{"question": "What is 2 + 2?", "answer": "2 + 2 = 4\n#### 4"}])

    monkeypatch.setitem(sys.modules, "datasets", fake_datasets(load_dataset))
    env = GSM8KEnv(split="test")
    assert calls == [("openai/gsm8k", "main", "test")]
    assert env.get_problem(0).gold == "4"
    assert load_rows("MATH", None, "test", "HuggingFaceH4/MATH-500", None, ["question"])[0]["answer"].endswith("4")


def test_math_envs_pass_the_text_limits_to_the_base_env(tmp_path):
    gsm8k = write_jsonl(tmp_path / "gsm8k.jsonl", [json.dumps({"question": "2 + 2?", "answer": "2 + 2 = 4\n#### 4"})])
    math_rows = write_jsonl(tmp_path / "math.jsonl", [json.dumps({"problem": "2 + 2?", "answer": "4"})])
    for cls, path in ((GSM8KEnv, gsm8k), (MATHEnv, math_rows)):
        env = cls(data_path=str(path), last_number_fallback=False, max_action_chars=50, reward_timeout=None)
        assert (env.last_number_fallback, env.max_action_chars, env.reward_timeout) == (False, 50, None)
        env.reset(seed=0)
        _, _, _, _, info = env.step("So 2 + 2 = 4" + " " * 100)
        assert info["action_truncated"] is True and info["parsed_answer"] is None  # fallback off
        with pytest.raises(ValueError, match="^sym_calc must be True or False; got 'no'$"):
            cls(data_path=str(path), mode="stepwise", sym_calc="no")


@pytest.mark.parametrize(("kwargs", "argument"),
                         [({"split": 3}, "split"), ({"split": ""}, "split"), ({"data_path": 5}, "data_path")])
def test_bad_data_source_kwargs_are_one_line_errors(kwargs, argument):
    for cls in (GSM8KEnv, MATHEnv):
        with pytest.raises(ValueError, match=f"^{argument} must be") as error:
            cls(**{"data_path": "unused.jsonl", **kwargs})
        assert "\n" not in str(error.value)


def test_an_empty_step_ends_a_stepwise_math_episode_and_a_blank_line_does_not():
    """A chat model that stops at its end-of-turn token writes an empty next step: the solution is over and
    is graded as it stands (last-number fallback), instead of running empty steps to max_steps."""
    from lmgym.envs import make

    env = make("Arithmetic-v0", level=1, split="test", mode="stepwise", max_steps=8)
    _, info = env.reset(options={"index": 0})
    gold = info["gold"]
    _, _, terminated, _, _ = env.step("\n")  # a blank line: the solution goes on
    assert not terminated
    _, _, terminated, _, _ = env.step(f"The sum is {gold}")
    assert not terminated
    _, reward, terminated, truncated, step_info = env.step("")  # the policy wrote nothing: done
    assert terminated and not truncated
    assert step_info["parsed_answer"] == gold and step_info["correct"] and reward == 1.0
