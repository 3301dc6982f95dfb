"""LanguageEnv behaviour (episodes, modes, rewards, state) on the offline arithmetic env."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from lmgym.envs import AnyText, ArithmeticEnv, EpisodeOverError, LanguageEnv, make
from lmgym.envs.arithmetic import LEVELS, generate, split_indices
from lmgym.envs.calculator import apply_calculator


def single_line(message: str) -> bool:
    return "\n" not in message


# ---- AnyText --------------------------------------------------------------------------


def test_anytext_accepts_any_str_up_to_max_length():
    space = AnyText(max_length=10)
    assert "héllo\n$\\frac{1}{2}$"[:10] in space
    assert "" in space
    assert "x" * 11 not in space
    assert 5 not in space and b"bytes" not in space


def test_anytext_seeded_sample_repr_eq():
    a, b = AnyText(seed=3), AnyText(seed=3)
    samples_a = [a.sample() for _ in range(5)]
    assert samples_a == [b.sample() for _ in range(5)]
    assert all(s in a for s in samples_a)
    assert len(a.sample(mask=7)) == 7
    assert repr(AnyText(50)) == "AnyText(max_length=50)"
    assert AnyText(50) == AnyText(50) and AnyText(50) != AnyText(51)


# ---- reset, seeding, options -------------------------------------------------------------


def test_reset_returns_prompt_and_info_keys():
    env = ArithmeticEnv(level=1)
    obs, info = env.reset(seed=0)
    assert set(info) >= {"question", "gold", "problem_id", "mode"}
    assert re.fullmatch(r"What is \d\d \+ \d\d\? Give the final answer after ####\.", obs)
    assert obs == info["question"] + " Give the final answer after ####."
    assert info["mode"] == "single"


def test_same_seed_same_episode_and_different_seeds_differ():
    env_a, env_b = ArithmeticEnv(level=2), ArithmeticEnv(level=2)
    assert env_a.reset(seed=7) == env_b.reset(seed=7)
    assert env_a.reset() == env_b.reset()  # the generator continues identically
    golds = {ArithmeticEnv(level=2).reset(seed=s)[1]["question"] for s in range(10)}
    assert len(golds) > 1


def test_reset_options_index_is_deterministic_and_checked():
    env = ArithmeticEnv(level=3)
    obs_1, info_1 = env.reset(options={"index": 5})
    obs_2, info_2 = env.reset(seed=123, options={"index": 5})
    assert (obs_1, info_1) == (obs_2, info_2)
    assert env.reset(options={"index": env.num_problems - 1})[0] != obs_1
    for bad in (-1, env.num_problems, "3"):
        with pytest.raises(ValueError, match="index") as error:
            env.reset(options={"index": bad})
        assert single_line(str(error.value))
    with pytest.raises(ValueError, match="colour"):
        env.reset(options={"colour": 1})


# ---- episode order ---------------------------------------------------------------------------


def test_step_before_reset_and_after_end_raise_episode_over():
    env = ArithmeticEnv()
    with pytest.raises(EpisodeOverError, match=r"call reset\(\)"):
        env.step("#### 1")
    env.reset(seed=0)
    env.step("#### 1")
    with pytest.raises(EpisodeOverError, match=r"episode is over; call reset\(\)"):
        env.step("#### 1")


def test_non_str_action_raises_type_error():
    env = ArithmeticEnv()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="action must be a str"):
        env.step(42)


# ---- single-turn rewards --------------------------------------------------------------------------


def test_single_turn_correct_wrong_unparseable():
    env = ArithmeticEnv(level=1)
    _, info = env.reset(seed=1)
    gold = info["gold"]
    obs, reward, terminated, truncated, step_info = env.step(f"I add them. #### {gold}")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert step_info["correct"] is True and step_info["parsed_answer"] == gold
    assert step_info["reward_components"] == {"correctness": 1.0}
    assert obs.endswith(f"#### {gold}") and step_info["injected_text"] == ""

    env.reset(seed=1)
    _, reward, _, _, step_info = env.step(f"#### {int(gold) + 1}")
    assert reward == 0.0 and step_info["correct"] is False and step_info["unparseable"] is False

    env.reset(seed=1)
    _, reward, terminated, _, step_info = env.step("I have no idea.")
    assert reward == 0.0 and terminated
    assert step_info["parsed_answer"] is None and step_info["unparseable"] is True


def test_reward_fns_and_weights_combine_as_weighted_sum():
    def length_bonus(completion: str, gold: str, info: dict) -> float:
        return 0.5

    env = ArithmeticEnv(reward_fns={"correctness": _correctness, "bonus": length_bonus}, reward_weights={"bonus": 2.0})
    _, info = env.reset(seed=0)
    _, reward, _, _, step_info = env.step(f"#### {info['gold']}")
    assert step_info["reward_components"] == {"correctness": 1.0, "bonus": 0.5}
    assert reward == pytest.approx(1.0 + 2.0 * 0.5)
    with pytest.raises(ValueError, match="reward_weights"):
        ArithmeticEnv(reward_weights={"nope": 1.0})


def _correctness(completion: str, gold: str, info: dict) -> float:
    return 1.0 if completion.strip().endswith(gold) else 0.0


# ---- stepwise ------------------------------------------------------------------------------------


def test_stepwise_steps_accumulate_and_marker_terminates():
    env = ArithmeticEnv(level=1, mode="stepwise")
    prompt, info = env.reset(seed=4)
    assert prompt.endswith("\n")
    obs, reward, terminated, truncated, step_info = env.step("First I add the tens.")
    assert obs == prompt + "First I add the tens.\n"
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert step_info["injected_text"] == "\n" and step_info["steps"] == ["First I add the tens."]
    obs2, reward, terminated, truncated, step_info = env.step(f"#### {info['gold']}\n")
    assert obs2 == obs + f"#### {info['gold']}\n" and step_info["injected_text"] == ""
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert step_info["steps"] == ["First I add the tens.", f"#### {info['gold']}\n"]
    assert env.render() == obs2


@pytest.mark.parametrize("marker", ["#### 5", "so \\boxed{5}", "The answer is 5."])
def test_stepwise_every_final_answer_marker_terminates(marker):
    env = ArithmeticEnv(mode="stepwise")
    env.reset(seed=0)
    assert env.step(marker)[2] is True


def test_stepwise_max_steps_truncates_with_zero_reward():
    env = ArithmeticEnv(mode="stepwise", max_steps=3)
    _, info = env.reset(seed=0)
    for _ in range(2):
        assert env.step(f"thinking about {info['gold']}")[2:4] == (False, False)
    _, reward, terminated, truncated, step_info = env.step(f"still thinking {info['gold']}")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert step_info["parsed_answer"] is None and step_info["unparseable"] is True
    assert step_info["reward_components"] == {"correctness": 0.0}
    with pytest.raises(EpisodeOverError):
        env.step("more")


def test_sym_calc_injects_result_with_exact_spans():
    env = ArithmeticEnv(mode="stepwise", sym_calc=True)
    prompt, _ = env.reset(seed=0)
    action = "Half of 48 is 48 / 2 ="
    obs, _, _, _, info = env.step(action)
    calculator_text = apply_calculator(action)[1]
    assert "24" in calculator_text
    assert info["injected_text"] == calculator_text  # the line stays open: the model continues it
    assert obs == prompt + action + info["injected_text"]
    assert [obs[start:end] for start, end in info["injected_spans"]] == [info["injected_text"]]

    obs, _, _, _, info = env.step("Then 24 + 1 =")
    assert obs.endswith("Then 24 + 1 =" + info["injected_text"]) and "25" in info["injected_text"]
    pieces = [obs[start:end] for start, end in info["injected_spans"]]
    assert pieces == [calculator_text, info["injected_text"]]
    previous_ends = [len(prompt)] + [end for _, end in info["injected_spans"]]
    model_text = "".join(obs[end:start] for end, (start, _) in zip(previous_ends, info["injected_spans"]))
    assert model_text == action + "Then 24 + 1 ="


def test_stop_strings_follow_the_mode():
    assert ArithmeticEnv().stop_strings is None
    assert ArithmeticEnv(mode="stepwise").stop_strings == ["\n"]
    assert ArithmeticEnv(mode="stepwise", sym_calc=True).stop_strings == ["\n", "="]


def test_sym_calc_without_arithmetic_keeps_the_line_open_and_plain_steps_get_a_newline():
    env = ArithmeticEnv(mode="stepwise", sym_calc=True)
    env.reset(seed=0)
    assert env.step("Let x =")[4]["injected_text"] == ""
    assert env.step(" the sum")[4]["injected_text"] == "\n"


def test_sym_calc_requires_stepwise_mode():
    with pytest.raises(ValueError, match="sym_calc"):
        ArithmeticEnv(mode="single", sym_calc=True)


# ---- branching -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["single", "stepwise"])
def test_get_state_set_state_branches_independently(mode):
    env = ArithmeticEnv(level=2, mode=mode)
    _, info = env.reset(seed=11)
    if mode == "stepwise":
        env.step("Let me compute.")
    saved = env.get_state()
    results = []
    for answer in (info["gold"], "-99999"):
        env.set_state(saved)
        obs, reward, terminated, _, step_info = env.step(f"#### {answer}")
        results.append((obs, reward, terminated, step_info["steps"]))
    assert results[0][1] == 1.0 and results[1][1] == 0.0
    assert results[0][0] != results[1][0] and results[0][3][:-1] == results[1][3][:-1]
    env.set_state(saved)  # the saved state was not mutated by either branch
    assert env.get_state() == saved and "#### 0" in env.step("#### 0")[0]


def test_set_state_rejects_foreign_state():
    env = ArithmeticEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="mode"):
        ArithmeticEnv(mode="stepwise").set_state(env.get_state())
    with pytest.raises(ValueError, match="missing key"):
        env.set_state({"mode": "single"})


# ---- arithmetic problems ----------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_arithmetic_train_and_test_are_disjoint(level):
    train_env, test_env = ArithmeticEnv(level=level), ArithmeticEnv(level=level, split="test")
    train = {train_env.get_problem(i).question for i in range(train_env.num_problems)}
    test = {test_env.get_problem(i).question for i in range(test_env.num_problems)}
    assert train and test and not train & test
    total = len(split_indices(level, "train")) + len(split_indices(level, "test"))
    assert len(train) + len(test) == total  # every problem is in exactly one split, no duplicates


def test_a_splits_first_problems_are_a_uniform_sample_in_a_fixed_order():
    """The level enumerates one operation after another (level 2: sums, then differences, then products); a
    split lists its problems in a fixed shuffled order, so its first n problems mix them as the split does. The
    order is a stable hash of level and index: these ids are the same on every machine."""
    test = ArithmeticEnv(level=2, split="test")
    assert [test.get_problem(i).problem_id for i in range(3)] == [
        "arithmetic/L2/14205", "arithmetic/L2/11062", "arithmetic/L2/6173"]
    first = Counter(re.search(r" ([+\-*]) ", test.get_problem(i).question).group(1) for i in range(300))
    assert set(first) == {"+", "-", "*"} and min(first.values()) > 60  # about 100 each
    ordered = sorted(int(test.get_problem(i).problem_id.rsplit("/", 1)[1]) for i in range(test.num_problems))
    assert ordered == sorted(split_indices(2, "test").tolist())  # a permutation of the split, nothing more


def test_train_test_disjoint_across_levels_for_same_expression():
    level1_test = ArithmeticEnv(level=1, split="test")
    test_sums = {level1_test.get_problem(i).question for i in range(level1_test.num_problems)}
    level2_train = ArithmeticEnv(level=2)
    level2_train_questions = {level2_train.get_problem(i).question for i in range(level2_train.num_problems)}
    assert not test_sums & level2_train_questions


def _python_value(question: str) -> int:
    expression = re.fullmatch(r"What is ([\d +\-*]+)\?", question).group(1)
    assert re.fullmatch(r"[\d +\-*]+", expression)
    return eval(expression)  # our own generated digits and operators only


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_arithmetic_gold_matches_python(level):
    for split in ("train", "test"):
        env = ArithmeticEnv(level=level, split=split)
        for index in range(0, env.num_problems, max(1, env.num_problems // 200)):
            problem = env.get_problem(index)
            assert problem.gold == str(_python_value(problem.question)), problem.question


def test_level_prompts_match_the_published_formats():
    assert generate(0, 35).question == "What is 3 + 5?"
    env = ArithmeticEnv(level=1)
    obs, info = env.reset(seed=0)
    a, b = map(int, re.fullmatch(r"What is (\d+) \+ (\d+)\?", info["question"]).groups())
    assert 10 <= a <= 99 and 10 <= b <= 99
    assert obs == f"What is {a} + {b}? Give the final answer after ####."
    assert any(generate(2, i).question == "What is 47 * 38?" for i in range(2 * 8100, 3 * 8100))
    assert any(generate(3, i).question == "What is 12 + 7 * 3?" and generate(3, i).answer == 33 for i in range(72000))


def test_level4_word_problems_have_integer_answers():
    env = ArithmeticEnv(level=4)
    bags = re.compile(
        r"(\w+) has (\d+) (\w+), buys (\d+) bags of (\d+) \3, and gives away (\d+)\. How many \3 does \1 have\?"
    )
    checked = 0
    for index in range(0, env.num_problems, 7):
        problem = env.get_problem(index)
        assert re.fullmatch(r"\d+", problem.gold) and problem.question.endswith("?")
        match = bags.fullmatch(problem.question)
        if match:
            a, b, c, d = (int(match.group(i)) for i in (2, 4, 5, 6))
            assert problem.gold == str(a + b * c - d)
            checked += 1
    assert checked > 100
    assert any(
        bags.fullmatch(generate(4, i).question) and generate(4, i).answer == 19
        for i in range(10_000)
        if "has 12 " in generate(4, i).question and "buys 3 bags of 4 " in generate(4, i).question
    )


# ---- constructor validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"level": 99}, "level"),
        ({"level": True}, "level"),
        ({"mode": "foo"}, "mode"),
        ({"max_steps": 0}, "max_steps"),
        ({"split": "validation"}, "split"),
        ({"render_mode": "human"}, "render_mode"),
    ],
)
def test_invalid_constructor_values_name_the_argument(kwargs, argument):
    with pytest.raises(ValueError) as error:
        ArithmeticEnv(**kwargs)
    message = str(error.value)
    assert message.startswith(argument) and repr(next(iter(kwargs.values()))) in message
    assert single_line(message)


def test_invalid_values_through_make_also_raise():
    with pytest.raises(ValueError, match="level"):
        make("Arithmetic-v0", level=99)


def test_language_env_is_abstract():
    with pytest.raises(TypeError):
        LanguageEnv()
