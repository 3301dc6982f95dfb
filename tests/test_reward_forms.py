"""Reward functions in both forms (per-sample and TRL-style), None as "not applicable", and every
reward function called on every finished episode, parsable or not."""
import json

import numpy as np
import pytest

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import (
    ArithmeticEnv,
    GSM8KEnv,
    MathEnv,
    Problem,
    correctness_reward,
    per_sample_reward,
    reward_form,
    trl_reward,
)
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from tests.tiers import slow


def no_hashes_penalty(completion: str, gold: str, info: dict) -> float:
    """The format penalty of the issue: -1 for a completion without ####."""
    return 0.0 if "####" in completion else -1.0


def trl_digits(prompts, completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


# ---- detection --------------------------------------------------------------------------------


def test_the_form_is_read_from_the_signature():
    assert reward_form(lambda text, gold, info: 1.0) == "per_sample"
    assert reward_form(correctness_reward) == "per_sample"
    assert reward_form(trl_digits) == "trl"
    assert reward_form(lambda completions, **kwargs: [1.0]) == "trl"
    assert reward_form(lambda prompts, **kwargs: [1.0]) == "trl"
    assert reward_form(trl_reward(lambda *args, **kwargs: [1.0])) == "trl"
    assert reward_form(per_sample_reward(lambda *args, **kwargs: 1.0)) == "per_sample"


def test_a_signature_of_neither_form_is_one_clear_line():
    def graded(text):
        return 1.0

    with pytest.raises(ValueError, match="reward function 'graded' has signature \\(text\\), which fits neither"
                       ) as error:
        ArithmeticEnv(reward_fns={"graded": graded})
    assert "\n" not in str(error.value) and "trl_reward" in str(error.value)


def test_a_trl_function_that_needs_token_ids_is_accepted_but_env_step_alone_cannot_score_it():
    """completion_ids come from the episode engine (tests/test_batched_rewards.py); env.step has no tokens."""
    def by_tokens(completions, completion_ids, **kwargs):
        return [len(ids) for ids in completion_ids]

    env = ArithmeticEnv(reward_fns={"tokens": by_tokens})
    env.reset(seed=0)
    _, reward, _, _, info = env.step("3")
    assert reward == 0.0 and info["reward_errors"]["tokens"].startswith("ValueError: completion_ids are passed only")


# ---- what a TRL-style function receives -------------------------------------------------------


@pytest.fixture
def gsm8k_file(tmp_path):
    rows = [{"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = 7\n#### 7"},
            {"question": "Ann has 10 pens and loses 2. How many?", "answer": "10 - 2 = 8\n#### 8"}]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_trl_function_gets_prompts_completions_and_the_dataset_columns(gsm8k_file):
    seen = {}

    def spy(prompts, completions, **kwargs):
        seen.update(prompts=prompts, completions=completions, **kwargs)
        return [0.25]

    env = GSM8KEnv(data_path=gsm8k_file, reward_fns={"correctness": correctness_reward, "spy": spy})
    prompt, info = env.reset(options={"index": 1})
    _, reward, _, _, step_info = env.step("10 - 2 = 8 #### 8")
    assert reward == 1.25 and step_info["reward_components"] == {"correctness": 1.0, "spy": 0.25}
    assert seen["prompts"] == [prompt] and seen["completions"] == ["10 - 2 = 8 #### 8"]
    assert seen["answer"] == ["10 - 2 = 8\n#### 8"]  # the row's own column, as TRL passes it
    assert seen["question"] == [info["question"]] and seen["gold"] == ["8"]
    assert seen["problem_id"] == ["gsm8k/train/1"] and seen["parsed_answer"] == ["8"] and seen["correct"] == [True]
    assert "completion_ids" not in seen and "trainer_state" not in seen  # env.step alone: no token ids


def test_answer_is_the_gold_without_a_row_and_a_function_without_kwargs_gets_only_what_it_names():
    def accuracy(completions, answer):
        return [1.0 if c.strip().endswith(a) else 0.0 for c, a in zip(completions, answer)]

    env = ArithmeticEnv(reward_fns={"accuracy": accuracy})
    _, info = env.reset(seed=0)
    _, reward, _, _, step_info = env.step(f"so {info['gold']}")
    assert step_info["reward_errors"] == {} and reward == 1.0


def test_conversational_trl_functions_get_message_lists():
    def says_paris(prompts, completions, **kwargs):
        assert prompts[0][0]["role"] == "user" and completions[0][0]["role"] == "assistant"
        return [float("Paris" in completions[0][0]["content"])]

    env = ArithmeticEnv(reward_fns={"paris": trl_reward(says_paris, conversational=True)})
    env.reset(seed=0)
    _, reward, _, _, info = env.step("Paris")
    assert reward == 1.0 and info["reward_errors"] == {}


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (lambda completions, **kwargs: 0.5, "TypeError: a TRL-style reward function must return a list"),
        (lambda completions, **kwargs: [0.5, 0.5], "ValueError: a TRL-style reward function must return one reward"),
        (lambda completions, **kwargs: ["high"], "TypeError: reward must be a real number or None; got str"),
        (lambda completions, **kwargs: 1 / 0, "ZeroDivisionError: division by zero"),
    ],
    ids=["bare-float", "two-values", "str", "raises"],
)
def test_a_failing_trl_function_is_contained_like_a_per_sample_one(fn, expected):
    env = ArithmeticEnv(reward_fns={"correctness": correctness_reward, "bad": fn})
    _, info = env.reset(seed=0)
    _, reward, _, _, step_info = env.step(f"#### {info['gold']}")
    assert reward == 1.0 and step_info["reward_components"]["bad"] == 0.0
    assert step_info["reward_errors"]["bad"].startswith(expected)


# ---- None: not applicable ---------------------------------------------------------------------


def test_none_is_left_out_of_the_weighted_sum_in_both_forms():
    env = ArithmeticEnv(
        reward_fns={"correctness": correctness_reward, "trl": lambda completions, **kw: [None],
                    "mine": lambda c, g, i: None},
        reward_weights={"correctness": 2.0, "trl": 5.0, "mine": 7.0},
    )
    _, info = env.reset(seed=0)
    _, reward, _, _, step_info = env.step(f"#### {info['gold']}")
    assert reward == 2.0 and step_info["no_applicable_reward"] is False
    assert step_info["reward_components"] == {"correctness": 1.0, "trl": None, "mine": None}
    assert step_info["reward_errors"] == {}


def test_an_episode_where_every_reward_is_none_scores_zero_and_says_so():
    env = ArithmeticEnv(reward_fns={"code_only": lambda completions, **kw: [None for _ in completions]})
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("#### 3")
    assert terminated and reward == 0.0 and info["no_applicable_reward"] is True


# ---- every reward function scores every finished episode --------------------------------------


def test_a_format_penalty_is_paid_on_unparseable_outputs():
    env = ArithmeticEnv(reward_fns={"correctness": correctness_reward, "format": no_hashes_penalty},
                        last_number_fallback=False)
    _, info = env.reset(seed=0)
    _, reward, _, _, step_info = env.step(f"I think it is {info['gold']}")
    assert step_info["unparseable"] is True and step_info["parsed_answer"] is None
    assert reward == -1.0 and step_info["reward_components"] == {"correctness": 0.0, "format": -1.0}
    env.reset(seed=0)
    assert env.step(f"#### {info['gold']}")[1] == 1.0


def test_a_truncated_stepwise_episode_is_scored_by_every_function_and_earlier_steps_are_not():
    calls = []

    def penalty(completion, gold, info):
        calls.append(info["parsed_answer"])
        return no_hashes_penalty(completion, gold, info)

    env = ArithmeticEnv(mode="stepwise", max_steps=2, reward_fns={"correctness": correctness_reward, "fmt": penalty})
    env.reset(seed=0)
    assert env.step("thinking")[1] == 0.0 and calls == []
    _, reward, terminated, truncated, info = env.step("still thinking")
    assert (terminated, truncated, reward) == (False, True, -1.0) and calls == [None]
    assert info["reward_components"] == {"correctness": 0.0, "fmt": -1.0}


class HashOnlyEnv(MathEnv):
    """Only answers after #### parse, so nearly every output of a random model is unparseable."""

    num_problems = 4

    def get_problem(self, index: int) -> Problem:
        return Problem(f"Say digits {index}", "7", str(index), fields={"topic": "digits"})

    def build_prompt(self, problem: Problem) -> str:
        return problem.question


@slow
def test_a_trl_reward_and_a_format_penalty_train_a_custom_env(tmp_path):
    topics = []

    def digits(prompts, completions, topic, **kwargs):  # TRL-style, with a dataset column
        topics.extend(topic)
        return trl_digits(prompts, completions)

    env = HashOnlyEnv(reward_fns={"digits": digits, "format": no_hashes_penalty}, last_number_fallback=False)
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    config = GRPOConfig(train_iterations=8, prompts_per_iteration=4, samples_per_prompt=4, max_new_tokens=8,
                        learning_rate=2e-2, micro_batch_size=16, eval_at_start=False, progress=False, seed=0,
                        kl_coeff=0.0, output_dir=str(tmp_path / "run"))
    algo = GRPO(policy, env, config)
    rewards = [row["reward_mean"] for row in algo.train()]
    assert set(topics) == {"digits"}
    unparseable = [t for t in algo.buffer if t.info["unparseable"]]
    assert unparseable and all(t.info["reward_components"]["format"] == -1.0 for t in unparseable)
    assert all(t.info["reward_errors"] == {} for t in algo.buffer)
    first, last = np.mean(rewards[:3]), np.mean(rewards[-3:])  # about -0.9 (few digits) -> about -0.1
    assert last > first + 0.3, (first, last, rewards)
