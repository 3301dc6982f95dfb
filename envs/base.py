"""The base class of every language environment: episodes, modes, rewards and state.

A subclass only says which problems exist (``num_problems``, ``get_problem``) and,
optionally, how to build the prompt and parse an answer. The base class runs the
episode in one of two modes:

- ``"single"``: the action is a whole solution; the episode ends after one step.
- ``"stepwise"``: each action is one reasoning step; the episode ends when a step
  contains a final-answer marker (terminated) or after ``max_steps`` steps (truncated).

Every observation is the full transcript so far, and each new observation is the
previous one plus the action plus ``info["injected_text"]`` (what the env wrote
after it), so a trainer can rebuild token sequences incrementally. In stepwise mode
the reset observation is the prompt followed by a newline, so the first step
starts on a new line. Each step ends with a line break (the env adds one if the
action has none), except that with the calculator on (``sym_calc``) an action
ending in "=" gets the arithmetic's result instead and the line stays open for the
next action (``stop_strings`` tells a policy where to stop for that).

Actions longer than ``max_action_chars`` (default 20,000) are cut to their first
``max_action_chars`` characters, as a generation cut at its length limit would be;
the transcript and the scoring see the cut action and ``info["action_truncated"]``
says whether this step's action was cut. This bounds the time a step takes.

Rewards: every reward function is called once on every finished episode (terminated,
or truncated at ``max_steps``), parsable or not; steps before the end score 0.0 and call
none. The parsed answer is graded once per step (``info["correct"]``) and the verdict is
passed to the reward functions in their ``info`` (``correctness_reward`` uses it instead of
grading again). Each reward function sees the solution (stepwise: the steps with their
injected text) and decides what it is worth; an episode with no parsable answer
(unparseable, or truncated at ``max_steps``) has ``info["parsed_answer"] = None`` and
``info["unparseable"] = True``, and the built-in correctness reward gives it 0.0. Reward
functions may be per-sample ``fn(completion, gold, info)`` or TRL-style
``fn(prompts, completions, **kwargs)`` (see ``envs/reward_forms.py``). A function may
return None ("not applicable"): that component is left out of the weighted sum (weights
default to 1.0), as TRL's nansum does; if every component is None the episode scores 0.0
and ``info["no_applicable_reward"]`` is True. The last-number fallback of the answer
extraction can be switched off with ``last_number_fallback=False``.

A reward function that raises, returns a non-number or non-finite value, or uses
more than ``reward_timeout`` CPU seconds (default 10; None: no bound) on one sample
scores 0.0 for that component and ``info["reward_errors"]`` maps its name to
``"ExceptionType: message"`` (an empty dict when every component succeeded). The
CPU-time bound uses SIGPROF and only applies when ``step`` runs in the main
thread; in other threads reward functions run unbounded.
"""

from __future__ import annotations

import abc
import copy
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium

from envs.answers import answers_equal
from envs.calculator import apply_calculator
from envs.extraction import extract_answer
from envs.reward_forms import as_per_sample, reward_fields
from envs.reward_guard import call_reward
from envs.rewards import RewardFn, correctness_reward
from envs.spaces import AnyText

MODES = ("single", "stepwise")
FINAL_ANSWER_MARKERS = ("####", "\\boxed{", "the answer is", "final answer is")
DEFAULT_MAX_ACTION_CHARS = 20_000
DEFAULT_REWARD_TIMEOUT = 10.0  # CPU seconds per reward function and sample
_STATE_KEYS = ("mode", "problem_index", "problem", "context", "steps", "injected", "started", "done")


class EpisodeOverError(RuntimeError):
    """``step()`` was called with no episode in progress (before reset or after the end)."""


@dataclass(frozen=True)
class Problem:
    """One task: the question shown to the model, its gold answer, a stable id and its data row.

    ``fields`` holds the dataset row's columns where the env loads rows (GSM8K, MATH); reward
    functions receive them (TRL-style ones as keyword arguments).
    """

    question: str
    gold: str
    problem_id: str
    fields: dict[str, Any] = field(default_factory=dict, hash=False)


def has_final_answer_marker(text: str) -> bool:
    """True if ``text`` contains ``####``, ``\\boxed{``, "the answer is" or "final answer is" (any case)."""
    lowered = text.lower()
    return any(marker in lowered for marker in FINAL_ANSWER_MARKERS)


def check_choice(name: str, value: Any, choices: tuple) -> None:
    """Raise a one-line ValueError naming ``name`` unless ``value`` is one of ``choices``."""
    if not any(value == choice and type(value) is type(choice) for choice in choices):
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")


def check_positive_int(name: str, value: Any) -> None:
    """Raise a one-line ValueError naming ``name`` unless ``value`` is an int >= 1."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1; got {value!r}")


def check_bool(name: str, value: Any) -> None:
    """Raise a one-line ValueError naming ``name`` unless ``value`` is True or False (not 'no', not 0)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False; got {value!r}")


def check_timeout(name: str, value: Any) -> None:
    """Raise a one-line ValueError naming ``name`` unless ``value`` is None or a finite number > 0."""
    if value is None:
        return
    valid = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not valid:
        raise ValueError(f"{name} must be a number of seconds > 0 or None; got {value!r}")


class LanguageEnv(gymnasium.Env[str, str], abc.ABC):
    """A text-in, text-out environment over a finite list of problems."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        *,
        mode: str = "single",
        max_steps: int = 8,
        sym_calc: bool = False,
        reward_fns: Mapping[str, RewardFn] | None = None,
        reward_weights: Mapping[str, float] | None = None,
        instruction: str = "",
        render_mode: str | None = None,
        last_number_fallback: bool = True,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        reward_timeout: float | None = DEFAULT_REWARD_TIMEOUT,
    ):
        check_choice("mode", mode, MODES)
        check_positive_int("max_steps", max_steps)
        check_bool("sym_calc", sym_calc)
        check_bool("last_number_fallback", last_number_fallback)
        check_positive_int("max_action_chars", max_action_chars)
        check_timeout("reward_timeout", reward_timeout)
        check_choice("render_mode", render_mode, (None, "ansi"))
        if not isinstance(instruction, str):
            raise ValueError(f"instruction must be a str; got {type(instruction).__name__}")
        if sym_calc and mode != "stepwise":
            raise ValueError(
                "sym_calc=True needs mode='stepwise': the calculator writes results between steps, "
                "and single mode receives the whole solution at once"
            )
        self.mode = mode
        self.max_steps = max_steps
        self.sym_calc = sym_calc
        self.last_number_fallback = last_number_fallback
        self.max_action_chars = max_action_chars
        self.reward_timeout = reward_timeout
        self.instruction = instruction
        self.render_mode = render_mode
        self.reward_fns = _checked_reward_fns(reward_fns)
        self.reward_weights = _checked_reward_weights(reward_weights, self.reward_fns)
        self.observation_space = AnyText()
        self.action_space = AnyText()
        self._problem_index: int | None = None
        self._problem: Problem | None = None
        self._context = ""
        self._steps: list[str] = []
        self._injected: list[str] = []
        self._started = False
        self._done = True

    # ---- what a subclass provides -------------------------------------------------

    @property
    @abc.abstractmethod
    def num_problems(self) -> int:
        """How many problems this env (this split) holds."""

    @abc.abstractmethod
    def get_problem(self, index: int) -> Problem:
        """Problem number ``index`` (0 <= index < num_problems), deterministically."""

    def build_prompt(self, problem: Problem) -> str:
        """The text shown to the model: by default the question followed by the instruction."""
        return problem.question + self.instruction

    def parse_answer(self, solution: str) -> str | None:
        """The final answer in ``solution``, or None if there is none."""
        return extract_answer(solution, last_number_fallback=self.last_number_fallback)

    # ---- gymnasium API ------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Start an episode on a random problem (seeded), or on ``options={"index": i}``."""
        super().reset(seed=seed)
        index = self._choose_index(options or {})
        self._problem_index = index
        self._problem = self.get_problem(index)
        prompt = self.build_prompt(self._problem)
        needs_newline = self.mode == "stepwise" and not prompt.endswith("\n")
        self._context = prompt + "\n" if needs_newline else prompt
        self._steps, self._injected = [], []
        self._started, self._done = True, False
        info = {
            "question": self._problem.question,
            "gold": self._problem.gold,
            "problem_id": self._problem.problem_id,
            "mode": self.mode,
        }
        return self._observation(), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Take one action: the whole solution (single mode) or one reasoning step (stepwise)."""
        if not isinstance(action, str):
            raise TypeError(f"action must be a str (the model's text); got {type(action).__name__}")
        if not self._started:
            raise EpisodeOverError("no episode in progress; call reset() before step()")
        if self._done:
            raise EpisodeOverError("episode is over; call reset()")
        action_truncated = len(action) > self.max_action_chars
        if action_truncated:
            action = action[: self.max_action_chars]  # like a generation cut at its length limit
        injected = self._text_after(action)
        self._steps.append(action)
        self._injected.append(injected)
        if self.mode == "single":
            terminated, truncated = True, False
        else:
            terminated = has_final_answer_marker(action)
            truncated = not terminated and len(self._steps) >= self.max_steps
        self._done = terminated or truncated
        reward, info = self._outcome(terminated)
        info["injected_text"] = injected
        info["action_truncated"] = action_truncated
        return self._observation(), reward, terminated, truncated, info

    @property
    def stop_strings(self) -> list[str] | None:
        """Where a policy should stop generating one action.

        Single mode: None (the model stops at its end-of-sequence token or the length limit).
        Stepwise: at a line break, and, with the calculator on, also at "=" so the env can write the
        result of the arithmetic just before it (the line then continues in the next action).
        """
        if self.mode == "single":
            return None
        return ["\n", "="] if self.sym_calc else ["\n"]

    def render(self) -> str:
        """The transcript so far (prompt, actions and injected text); "" before the first reset."""
        return self._observation() if self._started else ""

    # ---- branching ----------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """A deep copy of everything that defines the current episode.

        The random generator that picks future problems is not part of it, so
        restoring a state never changes which problems later resets draw.
        """
        state = {
            "mode": self.mode,
            "problem_index": self._problem_index,
            "problem": asdict(self._problem) if self._problem is not None else None,
            "context": self._context,
            "steps": self._steps,
            "injected": self._injected,
            "started": self._started,
            "done": self._done,
        }
        return copy.deepcopy(state)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore an episode saved by ``get_state`` (the state itself is not shared)."""
        if not isinstance(state, Mapping):
            raise TypeError(f"state must be a dict from get_state(); got {type(state).__name__}")
        missing = [key for key in _STATE_KEYS if key not in state]
        if missing:
            raise ValueError(f"state is missing key {missing[0]!r}; pass a dict returned by get_state()")
        if state["mode"] != self.mode:
            raise ValueError(f"state is from a mode={state['mode']!r} env; this env has mode={self.mode!r}")
        state = copy.deepcopy(dict(state))
        self._problem_index = state["problem_index"]
        self._problem = Problem(**state["problem"]) if state["problem"] is not None else None
        self._context = state["context"]
        self._steps = list(state["steps"])
        self._injected = list(state["injected"])
        self._started = bool(state["started"])
        self._done = bool(state["done"])

    # ---- internals ----------------------------------------------------------------

    def _choose_index(self, options: Mapping[str, Any]) -> int:
        unknown = sorted(set(options) - {"index"})
        if unknown:
            raise ValueError(f"unknown reset option {unknown[0]!r}; supported options: 'index'")
        count = self.num_problems
        if count < 1:
            raise ValueError(f"{type(self).__name__} has no problems to reset to")
        if "index" not in options:
            return int(self.np_random.integers(count))
        index = options["index"]
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise ValueError(f"reset option 'index' must be an int in [0, {count}); got {index!r}")
        return index

    def _text_after(self, action: str) -> str:
        """What the env writes right after an action: calculator result and line break (stepwise)."""
        if self.mode == "single":
            return ""
        if self.sym_calc and action.rstrip(" ").endswith("="):
            # a calculator request ("48 / 2 =" or "<<48/2="): write the result, keep the line open
            return apply_calculator(action)[1]
        return "" if action.endswith("\n") else "\n"

    def _observation(self) -> str:
        return self._context + "".join(step + text for step, text in zip(self._steps, self._injected))

    def _solution(self) -> str:
        """The model's solution as scored: every step with the env's injected text."""
        return "".join(step + text for step, text in zip(self._steps, self._injected))

    def _injected_spans(self) -> list[tuple[int, int]]:
        spans, position = [], len(self._context)
        for step, text in zip(self._steps, self._injected):
            position += len(step)
            if text:
                spans.append((position, position + len(text)))
            position += len(text)
        return spans

    def _outcome(self, terminated: bool) -> tuple[float, dict]:
        """Reward and info for the step just taken; every reward function scores a finished episode."""
        assert self._problem is not None
        problem, gold = self._problem, self._problem.gold
        solution = self._solution()
        parsed = self.parse_answer(solution) if terminated else None
        correct = parsed is not None and answers_equal(parsed, gold)  # the one grading of this step
        components: dict[str, float | None] = dict.fromkeys(self.reward_fns, 0.0)
        errors: dict[str, str] = {}
        if self._done:
            env_keys = {
                "question": problem.question,
                "gold": gold,
                "problem_id": problem.problem_id,
                "mode": self.mode,
                "steps": list(self._steps),
                "parsed_answer": parsed,
                "correct": correct,
            }
            context = {**env_keys, "prompt": self.build_prompt(problem),
                       "fields": reward_fields(problem.fields, gold, env_keys)}
            for name, fn in self.reward_fns.items():
                components[name], error = call_reward(fn, solution, gold, copy.deepcopy(context), self.reward_timeout)
                if error is not None:
                    errors[name] = error
        scored = [self.reward_weights[name] * value for name, value in components.items() if value is not None]
        info = {
            "gold": gold,
            "problem_id": problem.problem_id,
            "correct": correct,
            "parsed_answer": parsed,
            "unparseable": self._done and parsed is None,
            "reward_components": components,
            "reward_errors": errors,
            "no_applicable_reward": not scored,
            "injected_spans": self._injected_spans(),
            "steps": list(self._steps),
        }
        return float(sum(scored)), info


def _checked_reward_fns(reward_fns: Mapping[str, RewardFn] | None) -> dict[str, RewardFn]:
    if reward_fns is None:
        return {"correctness": correctness_reward}
    if not isinstance(reward_fns, Mapping) or not reward_fns:
        raise ValueError("reward_fns must be a non-empty dict of name -> reward function")
    for name, fn in reward_fns.items():
        if not callable(fn):
            raise ValueError(f"reward_fns[{name!r}] must be callable; got {type(fn).__name__}")
    return {name: as_per_sample(fn, str(name)) for name, fn in reward_fns.items()}


def _checked_reward_weights(
    reward_weights: Mapping[str, float] | None, reward_fns: Mapping[str, RewardFn]
) -> dict[str, float]:
    weights = dict.fromkeys(reward_fns, 1.0)
    for name, weight in (reward_weights or {}).items():
        if name not in reward_fns:
            raise ValueError(f"reward_weights has {name!r}, which is not in reward_fns ({', '.join(reward_fns)})")
        valid = isinstance(weight, (int, float)) and not isinstance(weight, bool) and math.isfinite(weight)
        if not valid:
            raise ValueError(f"reward_weights[{name!r}] must be a finite number; got {weight!r}")
        weights[name] = float(weight)
    return weights
