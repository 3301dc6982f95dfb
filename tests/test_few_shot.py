"""FewShotStepwisePolicy: system prompt, n worked examples, never the asked question, deterministic, clear errors."""
from __future__ import annotations

import json

import pytest

from lmgym.envs import DataFileNotFoundError, make
from lmgym.policies import FewShotStepwisePolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.few_shot import DEFAULT_SYSTEM_PROMPT_PATH, PromptFileNotFoundError, gsm8k_solution_steps


@pytest.fixture(scope="module")
def tiny():
    tokenizer = build_tiny_tokenizer()
    return build_tiny_model(tokenizer), tokenizer




def rows_of(path, count):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(next(handle)) for _ in range(count)]


def make_policy(tiny, **kwargs):
    model, tokenizer = tiny
    return FewShotStepwisePolicy(model, tokenizer, device="cpu", **kwargs)


def test_gsm8k_answer_becomes_one_step_per_line():
    answer = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72"
    assert gsm8k_solution_steps(answer) == (
        "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips.\n#### 72")
    kept = gsm8k_solution_steps(answer, keep_annotations=True)
    assert kept.splitlines()[0] == "Natalia sold 48/2 = <<48/2=24>>24 clips in May." and kept.endswith("\n#### 72")
    with pytest.raises(ValueError, match="####"):
        gsm8k_solution_steps("no final answer here")


def test_prompt_has_the_system_prompt_and_exactly_n_examples(tiny, gsm8k_train):
    env = make("GSM8K-v0", data_path=gsm8k_train, mode="stepwise")
    policy = make_policy(tiny, examples=gsm8k_train, n_few_shot=3)
    observation, info = env.reset(seed=0)
    text = policy.prompt_text(observation)
    system_prompt = DEFAULT_SYSTEM_PROMPT_PATH.read_text().strip()
    assert text.startswith("<|im_start|>system\n" + system_prompt)
    assert text.count("<|im_start|>user") == 4 and text.count("<|im_start|>assistant") == 4  # 3 examples + the turn
    assert text.endswith(observation + "<|im_end|>\n<|im_start|>assistant\n")
    messages = policy.build_messages(observation)
    solutions = [m["content"] for m in messages if m["role"] == "assistant"]
    assert len(solutions) == 3 and all(s.splitlines()[-1].startswith("#### ") for s in solutions)
    assert not any("<<" in s for s in solutions)  # annotations dropped unless keep_annotations
    examples = [m["content"] for m in messages if m["role"] == "user"][:-1]
    assert all(e.endswith(" Solve it step by step, then give the final answer after ####.\n") for e in examples)
    assert policy.format_prompt(observation) == policy.tokenizer(text, add_special_tokens=False)["input_ids"]
    annotated = make_policy(tiny, examples=gsm8k_train, n_few_shot=3, keep_annotations=True)
    assert any("<<" in m["content"] for m in annotated.build_messages(observation) if m["role"] == "assistant")


def test_examples_never_equal_the_question_asked(tiny, gsm8k_train):
    rows = rows_of(gsm8k_train, 4)
    env = make("GSM8K-v0", data_path=gsm8k_train, mode="stepwise", subset=(0, 4))
    policy = make_policy(tiny, examples=rows, n_few_shot=3)
    for index in range(4):  # every question in the pool is asked once
        observation, info = env.reset(options={"index": index})
        chosen = [q for q, _ in policy.select_examples(observation)]
        assert len(chosen) == 3 and info["question"].strip() not in chosen
    tight = make_policy(tiny, examples=rows[:3], n_few_shot=3)
    observation, _ = env.reset(options={"index": 0})
    with pytest.raises(ValueError, match="only 2 examples .* differ from the question asked"):
        tight.format_prompt(observation)


def test_selection_is_deterministic_and_seeded(tiny, gsm8k_train):
    env = make("GSM8K-v0", data_path=gsm8k_train, mode="stepwise")
    observation, _ = env.reset(seed=1)
    first = make_policy(tiny, examples=gsm8k_train, n_few_shot=2, seed=0)
    again = make_policy(tiny, examples=gsm8k_train, n_few_shot=2, seed=0)
    other = make_policy(tiny, examples=gsm8k_train, n_few_shot=2, seed=1)
    assert first.format_prompt(observation) == again.format_prompt(observation)
    assert first.select_examples(observation) != other.select_examples(observation)
    next_observation, _ = env.reset(seed=2)  # a fixed set of examples across questions (no collision here)
    assert first.select_examples(observation) == first.select_examples(next_observation)
    assert first.frozen_copy().format_prompt(observation) == first.format_prompt(observation)


def test_plain_text_prompt_without_a_chat_template(gsm8k_train):
    tokenizer = build_tiny_tokenizer()
    tokenizer.chat_template = None
    policy = FewShotStepwisePolicy(build_tiny_model(tokenizer), tokenizer, device="cpu",
                                   examples=rows_of(gsm8k_train, 2), n_few_shot=1)
    observation = "What is 2 + 3? Solve it step by step, then give the final answer after ####.\n"
    text = policy.prompt_text(observation)
    question, solution = policy.select_examples(observation)[0]
    system_prompt = DEFAULT_SYSTEM_PROMPT_PATH.read_text().strip()
    assert text == f"{system_prompt}\n\n{question}{policy.question_suffix}{solution}\n\n{observation}"
    assert "<|im_start|>" not in text
    assert policy.format_prompt(observation) == tokenizer(text)["input_ids"]


def test_clear_errors(tiny, gsm8k_train, tmp_path):
    rows = rows_of(gsm8k_train, 3)
    with pytest.raises(PromptFileNotFoundError, match="system prompt file not found: .*missing.txt"):
        make_policy(tiny, system_prompt_path=tmp_path / "missing.txt", examples=rows, n_few_shot=1)
    assert issubclass(PromptFileNotFoundError, FileNotFoundError)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(ValueError, match="system prompt file is empty"):
        make_policy(tiny, system_prompt_path=empty, examples=rows, n_few_shot=1)
    with pytest.raises(ValueError, match=r"n_few_shot=5 examples asked for, but 3 in the examples list"):
        make_policy(tiny, examples=rows, n_few_shot=5)
    with pytest.raises(ValueError, match="none were given"):
        make_policy(tiny, n_few_shot=1)
    with pytest.raises(ValueError, match="n_few_shot must be an int >= 0"):
        make_policy(tiny, examples=rows, n_few_shot=-1)
    with pytest.raises(DataFileNotFoundError, match="data file not found"):
        make_policy(tiny, examples=tmp_path / "nope.jsonl", n_few_shot=1)
    with pytest.raises(ValueError, match=r"examples\[0\] must be a dict"):
        make_policy(tiny, examples=[{"question": "q"}], n_few_shot=1)
    no_system = make_policy(tiny, system_prompt_path=None, n_few_shot=0)
    assert no_system.build_messages("Q") == [{"role": "user", "content": "Q"}]
