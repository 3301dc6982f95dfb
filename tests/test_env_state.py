"""A generic LanguageEnv: its hooks' defaults, and get_state/set_state round-tripping a subclass's own state."""

from __future__ import annotations

import re
import warnings
from typing import ClassVar

import pytest

from lmgym.envs import ArithmeticEnv, LanguageEnv, Problem, correctness_reward


class GuessEnv(LanguageEnv):
    """Guess the number: each guess is counted and remembered (subclass episode state)."""

    episode_state: ClassVar[dict] = {"guesses": 0, "history": [], "notes": {"last": None}}
    default_reward_fns: ClassVar[dict] = {"correctness": correctness_reward}
    num_problems = 3

    def get_problem(self, index: int) -> Problem:
        return Problem(f"Guess a number below 3 ({index})", str(index), f"guess/{index}")

    def is_final_action(self, action: str) -> bool:
        return action.strip().isdigit()

    def parse_answer(self, solution: str) -> str | None:
        return self.history[-1] if self.history else None

    def respond(self, action: str, final: bool) -> tuple[str, str | None]:
        self.guesses += 1
        self.history.append(action.strip())
        self.notes["last"] = action.strip()
        return f" [{self.guesses}]\n", None

    @property
    def stop_strings(self) -> list[str] | None:
        return ["\n"] if self.guesses < 2 else ["\n", "."]


def guess_state(env: GuessEnv) -> tuple:
    return env.guesses, list(env.history), dict(env.notes), env.render()


def test_a_subclass_with_extra_state_restores_exactly_after_branching():
    env = GuessEnv(mode="stepwise", max_steps=5)
    env.reset(options={"index": 2})
    env.step("maybe small")
    saved = env.get_state()
    at_save = guess_state(env)
    env.step("or large")
    env.step("or middle")
    assert env.guesses == 3 and env.history == ["maybe small", "or large", "or middle"]
    env.set_state(saved)
    assert guess_state(env) == at_save == (1, ["maybe small"], {"last": "maybe small"}, env.render())
    _, _, terminated, _, info = env.step("2")
    assert (env.guesses, env.history, terminated, info["correct"]) == (2, ["maybe small", "2"], True, True)
    env.set_state(saved)  # the saved state was not mutated by the branches
    assert guess_state(env) == at_save


def test_the_state_is_a_deep_copy_both_ways():
    env = GuessEnv(mode="stepwise")
    env.reset(options={"index": 0})
    env.step("one")
    state = env.get_state()
    state["history"].append("injected from outside")
    state["notes"]["last"] = "changed"
    assert env.history == ["one"] and env.notes == {"last": "one"}
    env.set_state(state)
    state["history"].clear()
    assert env.history == ["one", "injected from outside"] and env.notes == {"last": "changed"}


def test_reset_restores_the_declared_start_values():
    env = GuessEnv(mode="stepwise")
    env.reset(options={"index": 0})
    env.step("a")
    env.step("b")
    env.reset(options={"index": 1})
    assert (env.guesses, env.history, env.notes) == (0, [], {"last": None})
    assert GuessEnv.episode_state["history"] == [] and GuessEnv.episode_state["notes"] == {"last": None}


def test_stop_strings_follow_the_restored_state():
    env = GuessEnv(mode="stepwise")
    env.reset(options={"index": 0})
    before = env.get_state()
    env.step("a")
    env.step("b")
    assert env.stop_strings == ["\n", "."]
    env.set_state(before)
    assert env.stop_strings == ["\n"]


def test_a_state_of_another_class_or_with_missing_or_unknown_keys_is_one_line():
    guess, arithmetic = GuessEnv(mode="stepwise"), ArithmeticEnv(mode="stepwise")
    guess.reset(seed=0)
    arithmetic.reset(seed=0)
    expected = f"state is from a lmgym.envs.arithmetic.ArithmeticEnv env; this env is a {GuessEnv.__module__}.GuessEnv"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        guess.set_state({**arithmetic.get_state(), "guesses": 0, "history": [], "notes": {}})
    state = guess.get_state()
    with pytest.raises(ValueError, match="^state is missing key 'history'; pass a dict returned by get_state"):
        guess.set_state({key: value for key, value in state.items() if key != "history"})
    with pytest.raises(ValueError, match="^state has unknown key 'extra'"):
        guess.set_state({**state, "extra": 1})
    with pytest.raises(TypeError, match="^state must be a dict from get_state"):
        guess.set_state([("guesses", 0)])


def test_episode_state_must_be_a_dict_of_names():
    with pytest.raises(TypeError, match=r"episode_state must be a dict of attribute name -> start value"):
        type("TupleDeclared", (GuessEnv,), {"episode_state": ("guesses", "history")})
    with pytest.raises(TypeError, match="may not declare 'mode'"):
        type("ModeDeclared", (GuessEnv,), {"episode_state": {"mode": "single"}})


class LeakyEnv(GuessEnv):
    """Changes attributes that are not declared: a counter it rebinds and a list it appends to."""

    shared_attributes = ("calls_seen",)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.leaked_count = 0
        self.leaked_list: list[str] = []
        self.calls_seen = 0

    def respond(self, action: str, final: bool) -> tuple[str, str | None]:
        self.leaked_count += 1
        self.leaked_list.append(action)
        self.calls_seen += 1  # shared on purpose: no warning
        return super().respond(action, final)


def test_an_undeclared_attribute_changed_by_step_warns_once_per_attribute():
    env = LeakyEnv(mode="stepwise")
    env.reset(seed=0)
    with pytest.warns(RuntimeWarning) as caught:
        env.step("a")
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2
    assert messages[0].startswith("LeakyEnv.step() changed attribute 'leaked_count', which is not in episode_state")
    assert messages[1].startswith("LeakyEnv.step() changed attribute 'leaked_list'")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.step("b")  # warned once already
    assert env.calls_seen == 2


def test_declared_state_does_not_warn():
    env = GuessEnv(mode="stepwise")
    env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.step("a")
        env.step("1")


# ---- the generic hooks -------------------------------------------------------------------------------


class EchoEnv(LanguageEnv):
    """No hook overridden but the rewards: the base's generic behaviour."""

    default_reward_fns: ClassVar[dict] = {"correctness": correctness_reward}
    num_problems = 2

    def get_problem(self, index: int) -> Problem:
        return Problem(f"Say {['yes', 'no'][index]}", ["yes", "no"][index], str(index))


def test_base_hooks_exact_match_and_blank_is_unparseable():
    env = EchoEnv()
    env.reset(options={"index": 0})
    info = env.step("  yes \n")[4]
    assert (info["parsed_answer"], info["correct"], info["unparseable"]) == ("yes", True, False)
    env.reset(options={"index": 0})
    info = env.step("#### yes")[4]  # no math markers in the base: the whole solution is the answer
    assert (info["parsed_answer"], info["correct"]) == ("#### yes", False)
    env.reset(options={"index": 1})
    info = env.step("   ")[4]
    assert (info["parsed_answer"], info["correct"], info["unparseable"]) == (None, False, True)


def test_base_stepwise_runs_to_max_steps_and_writes_line_breaks():
    env = EchoEnv(mode="stepwise", max_steps=2)
    env.reset(options={"index": 0})
    assert (env.stop_strings, env.current_role, env.steps_taken) == (["\n"], "policy", 0)
    _, _, terminated, truncated, info = env.step("#### yes")
    assert (terminated, truncated, info["injected_text"], info["injected_role"]) == (False, False, "\n", None)
    _, _, terminated, truncated, info = env.step("yes")
    assert (terminated, truncated, info["unparseable"], env.steps_taken) == (False, True, True, 2)


def test_single_mode_has_no_stop_strings_and_injects_nothing():
    env = EchoEnv()
    env.reset(options={"index": 1})
    assert env.stop_strings is None
    info = env.step("no")[4]
    assert (info["injected_text"], info["injected_role"], info["correct"]) == ("", None, True)


def test_each_env_class_is_watched_for_its_first_steps_only(monkeypatch):
    """The undeclared-change watch costs as much as a plain step: it runs on a class's first WATCHED_STEPS steps."""
    from lmgym.envs import episode_state

    class LateLeakyEnv(LeakyEnv):
        pass

    monkeypatch.setattr(episode_state, "WATCHED_STEPS", 3)  # (a fourth watched step would warn: see the first test)
    env = LateLeakyEnv(mode="stepwise", max_steps=50)
    env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            env.step("a")
    # forget that this class warned: what a fourth step leaks would warn again if it were watched
    episode_state._WARNED.difference_update({k for k in episode_state._WARNED if k[0].endswith("LateLeakyEnv")})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.step("b")
    assert episode_state._WATCHED[LateLeakyEnv] == 3
