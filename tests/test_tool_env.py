"""ToolEnv: tool calls answered in the episode, stop strings per turn, roles, state, ToolArithmetic-v0, GRPO."""

from __future__ import annotations

import warnings

import pytest
from gymnasium.utils.env_checker import check_env

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import (
    CalculatorTool,
    ToolArithmeticEnv,
    correctness_reward,
    make,
    registered_ids,
)
from lmgym.envs.tool_env import DEFAULT_NUDGE, checked_tools, last_answer
from tests.tiers import slow
from tests.tool_toys import FRUIT_NUMBERS, FruitToolsEnv, LookupTool, ShoutTool

APPLE = list(FRUIT_NUMBERS).index("apple")


def started(**kwargs) -> FruitToolsEnv:
    env = FruitToolsEnv(**kwargs)
    env.reset(options={"index": APPLE})
    return env


def test_a_call_is_answered_and_the_stop_strings_change_per_turn():
    env = started()
    assert env.mode == "multi_turn" and env.stop_strings == ["!", "</answer>"]  # first turn: shout only
    _, reward, terminated, truncated, info = env.step("hey there!")
    assert (reward, terminated, truncated, info["injected_text"], info["injected_role"]) == (
        0.0, False, False, " [HEY THERE]", None)
    assert env.stop_strings == ["</lookup>", "</answer>"]  # shout used up; lookup's phase
    obs, _, _, _, info = env.step("Look: <lookup>apple</lookup>")
    assert info["injected_text"] == "<result>3</result>" and env.stop_strings == ["</answer>"]
    assert obs.endswith("hey there! [HEY THERE]Look: <lookup>apple</lookup><result>3</result>")
    _, reward, terminated, _, info = env.step("It is <answer> 3 </answer>")
    assert (reward, terminated, info["correct"], info["parsed_answer"], info["injected_text"]) == (
        1.0, True, True, "3", "")
    assert info["tool_calls"] == {"shout": 1, "lookup": 1}
    assert info["tool_log"] == [{"tool": "shout", "argument": "hey there", "output": "HEY THERE"},
                                {"tool": "lookup", "argument": "apple", "output": "3"}]


def test_tool_state_restores_exactly_after_branching():
    env = started()
    env.step("hey!")
    saved = env.get_state()
    env.step("<lookup>pear</lookup>")
    assert env.tool_calls == {"shout": 1, "lookup": 1} and env.stop_strings == ["</answer>"]
    env.set_state(saved)
    assert env.tool_calls == {"shout": 1} and len(env.tool_log) == 1
    assert env.stop_strings == ["</lookup>", "</answer>"]
    _, _, _, _, info = env.step("<lookup>apple</lookup>")
    assert info["tool_log"][-1] == {"tool": "lookup", "argument": "apple", "output": "3"}
    env.set_state(saved)
    assert env.get_state() == saved


def test_calls_that_cannot_run_are_answered_with_an_error():
    env = started(max_tool_calls=2, max_steps=5)
    info = env.step("<lookup>apple</lookup>")[4]  # lookup is not available on the first turn
    assert info["injected_text"] == "<result>error: lookup is not available now</result>"
    assert info["tool_calls"] == {}  # not counted against the budget
    info = env.step("<lookup>" + "a" * 30 + "</lookup>")[4]  # over the lookup's input limit
    assert info["injected_text"] == "<result>error: not a valid call; write <lookup>FRUIT</lookup></result>"
    assert info["tool_calls"] == {"lookup": 1}
    info = env.step("<lookup>kiwi</lookup>")[4]
    assert info["injected_text"] == "<result>error: unknown fruit</result>" and info["tool_calls"] == {"lookup": 2}
    info = env.step("<lookup>apple</lookup>")[4]  # used up
    assert info["injected_text"] == "<result>error: lookup is not available now</result>"


def test_an_action_ending_in_a_call_is_not_final_and_the_last_answer_counts():
    env = started(max_steps=4)
    _, _, terminated, _, _ = env.step("<answer>9</answer> wait!")
    assert not terminated
    _, reward, terminated, _, info = env.step("<answer>9</answer> no, <answer>3</answer>")
    assert (terminated, info["parsed_answer"], reward) == (True, "3", 1.0)
    assert last_answer("<answer>  </answer>") is None and last_answer("<answer>4") is None
    assert last_answer("</answer><answer>") is None


def test_max_steps_truncates_and_every_finished_episode_is_scored():
    seen = []
    env = started(max_steps=2, reward_fns={"calls": lambda c, g, info: seen.append(info["tool_calls"]) or -0.5})
    _, reward, terminated, truncated, info = env.step("thinking")
    assert (reward, terminated, truncated, info["injected_text"], seen) == (0.0, False, False, "\n", [])
    _, reward, terminated, truncated, info = env.step("still thinking\n")
    assert (reward, terminated, truncated, info["unparseable"], info["injected_text"]) == (-0.5, False, True, True, "")
    assert seen == [{}]


@pytest.mark.parametrize("role", ["tool", "user"])
def test_chat_mode_injects_results_as_turns_and_nudges_as_user_turns(role):
    env = started(result_role=role)
    info = env.step("hey!")[4]
    assert (info["injected_text"], info["injected_role"]) == (" [HEY]", role)
    info = env.step("hmm")[4]
    assert (info["injected_text"], info["injected_role"]) == (DEFAULT_NUDGE, "user")


def test_tool_env_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match="^mode must be one of 'multi_turn'; got 'single'$"):
        FruitToolsEnv(mode="single")
    with pytest.raises(ValueError, match="^result_role must be one of None, 'tool', 'user'; got 'system'$"):
        FruitToolsEnv(result_role="system")
    with pytest.raises(ValueError, match="^max_tool_calls must be an int >= 1; got 0$"):
        FruitToolsEnv(max_tool_calls=0)
    with pytest.raises(ValueError, match="^tools must be a non-empty list of Tool objects; got \\[\\]$"):
        checked_tools([])
    with pytest.raises(ValueError, match="^tools must be Tool objects .*; got str$"):
        checked_tools(["calc"])
    with pytest.raises(ValueError, match="^tool names must be unique; 'lookup' is used twice$"):
        checked_tools([LookupTool(), LookupTool()])
    with pytest.raises(ValueError, match="'</x!' ends with '!'$"):
        checked_tools([ShoutTool(), type("Clash", (ShoutTool,), {"name": "x", "stop_string": "</x!"})()])


# ---- ToolArithmetic-v0 -------------------------------------------------------------------------------


def test_tool_arithmetic_is_registered_and_solved_with_the_calculator():
    assert "ToolArithmetic-v0" in registered_ids() and "rlgym/ToolArithmetic-v0" not in registered_ids()
    env = make("ToolArithmetic-v0")
    assert isinstance(env, ToolArithmeticEnv) and (env.level, env.mode, env.max_steps) == (2, "multi_turn", 4)
    obs, info = env.reset(seed=3)
    assert "<calc>EXPRESSION</calc>" in obs and "<answer>...</answer>" in obs
    expression = info["question"].removeprefix("What is ").removesuffix("?")
    result = env.step(f"<calc>{expression}</calc>")[4]["injected_text"]
    assert result == f"<result>{info['gold']}</result>"
    _, reward, terminated, _, info = env.step(f"<answer>{int(info['gold']):,}</answer>")  # graded as math
    assert (reward, terminated, info["correct"]) == (1.0, True, True)


def test_tool_arithmetic_passes_the_gymnasium_checker():
    env = make("ToolArithmetic-v0", result_role="tool")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)
    assert isinstance(ToolArithmeticEnv(level=0).tools[0], CalculatorTool)


# ---- training ----------------------------------------------------------------------------------------


def replay(trajectory) -> tuple[list[str], list[str], list[list[str]]]:
    """(actions, the text the env injected after each, the stop strings before each) from a fresh env."""
    env = FruitToolsEnv()
    fruit = trajectory.info["problem_id"].removeprefix("fruit/")
    env.reset(options={"index": list(FRUIT_NUMBERS).index(fruit)})
    actions, injected, stops = trajectory.info["steps"], [], []
    for action in actions:
        stops.append(env.stop_strings)
        injected.append(env.step(action)[4]["injected_text"])
    return actions, injected, stops


@slow
def test_grpo_trains_on_the_two_tool_env_with_tool_output_masked(tiny_policy, tmp_path):
    config = GRPOConfig(train_iterations=2, prompts_per_iteration=4, samples_per_prompt=4, max_new_tokens=12,
                        learning_rate=1e-2, micro_batch_size=16, eval_at_start=False, progress=False, seed=0,
                        kl_coeff=0.0, output_dir=str(tmp_path / "run"))
    before = [p.detach().clone() for p in tiny_policy.parameters()]
    tool_use = {"correct": correctness_reward, "tool_use": lambda c, g, info: float(sum(info["tool_calls"].values()))}
    algo = GRPO(tiny_policy, make("ToyFruitTools-v0", reward_fns=tool_use), config)
    rows = algo.train()
    assert len(rows) == 2 and any(not a.equal(b) for a, b in zip(before, tiny_policy.parameters()))
    decode = tiny_policy.tokenizer.decode
    called = 0
    for trajectory in algo.buffer:
        actions, injected, stops = replay(trajectory)
        called += trajectory.info["tool_calls"].get("shout", 0)
        appended = injected[:-1] if trajectory.info["steps"] and not trajectory.info.get("unfinished") else injected
        masked = [t for t, m in zip(trajectory.completion_ids, trajectory.completion_mask) if m == 0]
        trained = [t for t, m in zip(trajectory.completion_ids, trajectory.completion_mask) if m == 1]
        assert decode(masked) == "".join(appended)  # the tool output (and line breaks) never trained on
        assert decode(trained, skip_special_tokens=True) == "".join(actions)
        for action, active in zip(actions, stops):  # an action stops at the first stop string of its turn
            for stop in active:
                assert action.find(stop) in (-1, len(action) - len(stop)), (action, active)
        check_stopped_by_its_turns_strings(trajectory, actions, stops, config.max_new_tokens,
                                           tiny_policy.tokenizer.eos_token_id)
    assert called > 0  # the tiny model shouted, so tool output was injected and masked


def check_stopped_by_its_turns_strings(trajectory, actions, stops, max_new_tokens, eos_id) -> None:
    """Each action ends at one of its own turn's stop strings, its length limit or EOS (never at a stop string
    of an earlier turn: the sampler reads the stop strings per branch and turn)."""
    first = 0
    for action, active, last in zip(actions, stops, trajectory.step_ends):
        tokens = [t for t, m in zip(trajectory.completion_ids[first : last + 1], trajectory.completion_mask[first:])
                  if m]
        first = last + 1
        assert any(action.endswith(stop) for stop in active) or len(tokens) == max_new_tokens or tokens[-1] == eos_id, (
            action, active)
