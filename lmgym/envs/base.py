"""The base class of every language environment: episodes, modes, reward plumbing and state; nothing
task-specific (no grader, no default reward). The episode contract (modes, observations, rewards, limits)
is described in docs/environments.md ("How an episode runs")."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium

from lmgym.core.chat import check_chat_prompt, messages_text
from lmgym.core.state_copy import deep_copy
from lmgym.envs import episode_state
from lmgym.envs.checks import (
    check_choice,
    check_positive_int,
    check_str,
    check_timeout,
    checked_reward_fns,
    checked_reward_weights,
)
from lmgym.envs.rewards.batch import PENDING, PendingRewards, weighted_total
from lmgym.envs.rewards.forms import RewardFn, TRLReward, reward_fields, shares_context
from lmgym.envs.rewards.guard import call_reward
from lmgym.envs.spaces import AnyText

DEFAULT_MAX_ACTION_CHARS = 20_000
DEFAULT_REWARD_TIMEOUT = 10.0  # CPU seconds per reward function and sample
DEFAULT_ROLE = "policy"


class EpisodeOverError(RuntimeError):
    """``step()`` was called with no episode in progress (before reset or after the end)."""


class NoRewardError(RuntimeError):
    """``step()`` was called on an env with no reward functions (none given, and its class has no default)."""


@dataclass(frozen=True)
class Problem:
    """One task: the question shown to the model, its gold answer, a stable id and its data row.

    ``question`` is text or a chat-format prompt: a list of {"role", "content"} messages (kept as messages;
    the policy renders them with its chat template).

    ``fields`` holds the dataset row's columns where the env loads rows (GSM8K, MATH); reward
    functions receive them (TRL-style ones as keyword arguments).
    """

    question: str | list[dict[str, str]]
    gold: str
    problem_id: str
    fields: dict[str, Any] = field(default_factory=dict, hash=False)


class LanguageEnv(gymnasium.Env[str, str], abc.ABC):
    """A text-in, text-out environment over a finite list of problems.

    Episode state: every attribute that one episode changes must be declared in the class attribute
    ``episode_state``, a dict of attribute name -> start value (merged over the MRO), e.g.
    ``episode_state = {"guesses": 0, "history": []}``. ``reset`` sets each to a deep copy of its start
    value, and ``get_state``/``set_state`` deep-copy exactly these attributes, so branches restored from
    one state never share them. An undeclared attribute that ``step`` creates or rebinds (or a
    list/dict/set whose length it changes) gets a RuntimeWarning once; attributes every branch shares on
    purpose go in ``shared_attributes``.

    Rewards: ``reward_fns`` given to the constructor, else the class's ``default_reward_fns`` (``MathEnv``'s is
    the math grader's correctness reward; the base's is empty). An env left with none raises
    ``NoRewardError`` on ``step``: there is nothing to score its episodes with.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}
    modes: ClassVar[tuple[str, ...]] = ("single", "stepwise")
    episode_state: ClassVar[Mapping[str, Any]] = {
        "_problem_index": None,
        "_problem": None,
        "_context": "",
        "_steps": [],
        "_injected": [],
        "_started": False,
        "_done": True,
    }
    shared_attributes: ClassVar[tuple[str, ...]] = ()
    default_reward_fns: ClassVar[Mapping[str, RewardFn]] = {}  # name -> reward function, used when reward_fns is None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        episode_state.check_declaration(cls)

    def __init__(
        self,
        *,
        mode: str = "single",
        max_steps: int = 8,
        reward_fns: Mapping[str, RewardFn] | Sequence[RewardFn] | None = None,
        reward_weights: Mapping[str, float] | None = None,
        instruction: str = "",
        render_mode: str | None = None,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        reward_timeout: float | None = DEFAULT_REWARD_TIMEOUT,
    ):
        check_choice("mode", mode, self.modes)
        check_positive_int("max_steps", max_steps)
        check_positive_int("max_action_chars", max_action_chars)
        check_timeout("reward_timeout", reward_timeout)
        check_choice("render_mode", render_mode, (None, "ansi"))
        check_str("instruction", instruction)
        self.mode = mode
        self.max_steps = max_steps
        self.max_action_chars = max_action_chars
        self.reward_timeout = reward_timeout
        self.instruction = instruction
        self.render_mode = render_mode
        self.reward_fns = checked_reward_fns(reward_fns, self.default_reward_fns)
        self.reward_weights = checked_reward_weights(reward_weights, self.reward_fns)
        self.defer_batched_rewards = False  # set by lmgym.envs.rewards.batch.batched_trl_rewards (the episode engine)
        self.observation_space = AnyText()
        self.action_space = AnyText()
        vars(self).update(episode_state.start_values(type(self)))

    # ---- what a subclass provides -------------------------------------------------

    @property
    @abc.abstractmethod
    def num_problems(self) -> int:
        """How many problems this env (this split) holds."""

    @abc.abstractmethod
    def get_problem(self, index: int) -> Problem:
        """Problem number ``index`` (0 <= index < num_problems), deterministically."""

    def build_prompt(self, problem: Problem) -> str | list[dict[str, str]]:
        """What the model is shown: by default the question followed by the instruction. A question given
        as messages stays messages (checked; one-line ValueError), the instruction after the last user turn's text."""
        if isinstance(problem.question, str):
            return problem.question + self.instruction
        messages = check_chat_prompt(problem.question)
        if self.instruction:
            last_user = max((k for k, m in enumerate(messages) if m["role"] == "user"), default=None)
            if last_user is None:
                raise ValueError("a chat-format question with an instruction needs a user message to hold it")
            messages[last_user]["content"] += self.instruction
        return messages

    def parse_answer(self, solution: str) -> str | None:
        """The final answer in ``solution``, or None if there is none. Base: the stripped solution, None if
        it is blank (every non-blank solution is its own answer)."""
        return solution.strip() or None

    def is_correct(self, parsed_answer: str, problem: Problem) -> bool:
        """Whether a parsed answer solves ``problem``. Base: equal to the gold after stripping both."""
        return parsed_answer.strip() == problem.gold.strip()

    def is_final_action(self, action: str) -> bool:
        """Whether ``action`` ends a multi-step episode (terminated). Base: never; the episode runs until
        ``max_steps`` truncates it, unscored for correctness. Not called in single mode."""
        return False

    @property
    def is_multi_step(self) -> bool:
        """Whether an episode may take several actions (any mode but "single"); False: one action, the whole
        solution, ends it."""
        return self.mode != "single"

    @property
    def is_stepwise(self) -> bool:
        """Whether each action is one reasoning step ending at a line break (mode "stepwise"): the steps a
        PRM scores and tree search expands."""
        return self.mode == "stepwise"

    def respond(self, action: str, final: bool) -> tuple[str, str | None]:
        """(text the env writes after ``action``, its role: None for raw text, or "tool"/"user" for a chat
        turn). ``final``: the action ends the episode. Base: nothing in single mode; in multi-step modes a
        line break unless the action ends with one."""
        if not self.is_multi_step:
            return "", None
        return ("" if action.endswith("\n") else "\n"), None

    @property
    def stop_strings(self) -> list[str] | None:
        """Where a policy should stop generating the next action (read in the current state).

        Single mode: None (the model stops at its end-of-sequence token or the length limit); other
        modes: at a line break.
        """
        return ["\n"] if self.is_multi_step else None

    @property
    def current_role(self) -> str:
        """Which role takes the next action (a key of the policies a trainer holds). Base: "policy"."""
        return DEFAULT_ROLE

    @property
    def steps_taken(self) -> int:
        """Actions taken in the current episode (0 right after reset), e.g. for phases of an episode."""
        return len(self._steps)

    def episode_info(self) -> dict[str, Any]:
        """Extra keys for each step's ``info`` and for the reward functions' ``info``. Base: none."""
        return {}

    def prepare_steps(self, actions: Sequence[str]) -> None:
        """Every action of the batch about to be stepped, before each is stepped from its own branch's state:
        the episode engine calls it once per ``advance`` with the live branches' actions, and with ``[]``
        once they are stepped. An env may do their shared work here at once (``ToolEnv``: each tool's calls,
        e.g. one batched search of every query) and keep it for the ``step`` calls that follow; each step
        must return exactly what it would without it (a prediction the branch's state overrules is only
        unused), and a new call replaces what the last one kept. Base: nothing."""

    # ---- gymnasium API ------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Start an episode on a random problem (seeded), or on ``options={"index": i}``. The observation is
        text, or a list of messages where the problem's question is messages (see ``_observation``)."""
        super().reset(seed=seed)
        index = self._choose_index(options or {})
        vars(self).update(episode_state.start_values(type(self)))
        self._problem_index = index
        self._problem = self.get_problem(index)
        prompt = self.build_prompt(self._problem)
        if not isinstance(prompt, str):
            prompt = check_chat_prompt(prompt)
        needs_newline = isinstance(prompt, str) and self.is_stepwise and not prompt.endswith("\n")
        self._context = prompt + "\n" if needs_newline else prompt
        self._started, self._done = True, False
        info = {
            "question": self._problem.question,
            "gold": self._problem.gold,
            "problem_id": self._problem.problem_id,
            "mode": self.mode,
        }
        return self._observation(), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Take one action: the whole solution (single mode) or one step (other modes)."""
        if not isinstance(action, str):
            raise TypeError(f"action must be a str (the model's text); got {type(action).__name__}")
        if not self._started:
            raise EpisodeOverError("no episode in progress; call reset() before step()")
        if self._done:
            raise EpisodeOverError("episode is over; call reset()")
        if not self.reward_fns:
            raise NoRewardError(f"{type(self).__name__} has no reward functions: pass reward_fns={{name: "
                                f"fn(completion, gold, info) -> float}} or set the class's default_reward_fns")
        marks = episode_state.attribute_marks(self) if episode_state.watching(type(self)) else None
        result = self._take(action)
        if marks is not None:
            episode_state.warn_undeclared_changes(self, marks)
        return result

    def render(self) -> str:
        """The transcript so far (prompt, actions and injected text); "" before the first reset."""
        if not self._started:
            return ""
        observation = self._observation()
        return observation if isinstance(observation, str) else messages_text(observation)

    # ---- branching ----------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """A deep copy of everything that defines the current episode: every ``episode_state`` attribute,
        subclasses' included, with this env's class and mode.

        The random generator that picks future problems is not part of it, so restoring a state never
        changes which problems later resets draw.
        """
        return episode_state.save(self, self.mode)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore an episode saved by ``get_state`` of an env of this class and mode (the state itself is
        not shared); anything else is a one-line error."""
        episode_state.restore(self, self.mode, state)

    # ---- internals ----------------------------------------------------------------

    def _take(self, action: str) -> tuple[str, float, bool, bool, dict]:
        action_truncated = len(action) > self.max_action_chars
        if action_truncated:
            action = action[: self.max_action_chars]  # like a generation cut at its length limit
        terminated = not self.is_multi_step or bool(self.is_final_action(action))
        injected, role = self.respond(action, terminated)
        self._steps.append(action)
        self._injected.append(injected)
        truncated = not terminated and len(self._steps) >= self.max_steps
        self._done = terminated or truncated
        reward, info = self._outcome(terminated)
        info["injected_text"] = injected
        info["injected_role"] = role
        info["action_truncated"] = action_truncated
        return self._observation(), reward, terminated, truncated, info

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

    def _observation(self) -> str | list[dict[str, str]]:
        """The transcript: the prompt text plus the solution so far; for a chat prompt, a copy of its messages
        followed, once there is a solution, by one assistant message holding it."""
        if isinstance(self._context, str):
            return self._context + self._solution()
        solution = self._solution()
        turns = [{"role": "assistant", "content": solution}] if solution else []
        return [dict(m) for m in self._context] + turns

    def _solution(self) -> str:
        """The model's solution as scored: every step with the env's injected text."""
        return "".join(step + text for step, text in zip(self._steps, self._injected))

    def _injected_spans(self) -> list[tuple[int, int]]:
        spans, position = [], len(self._context) if isinstance(self._context, str) else 0  # chat: in the reply
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
        correct = parsed is not None and bool(self.is_correct(parsed, problem))  # the one grading of this step
        extra = self.episode_info()
        components: dict[str, float | None] = dict.fromkeys(self.reward_fns, 0.0)
        errors: dict[str, str] = {}
        deferred: list[str] = []
        if self._done:
            env_keys = {
                "question": problem.question,
                "gold": gold,
                "problem_id": problem.problem_id,
                "mode": self.mode,
                "steps": list(self._steps),
                "parsed_answer": parsed,
                "correct": correct,
                **extra,
            }
            context = {**env_keys, "prompt": self.build_prompt(problem),
                       "fields": reward_fields(problem.fields, gold, env_keys)}
            shared = None  # one copy for the functions marked reads_only; every other function gets its own
            for name, fn in self.reward_fns.items():
                if isinstance(fn, TRLReward) and getattr(self, "defer_batched_rewards", False):
                    deferred.append(name)  # scored with its batch (envs/rewards/batch.py)
                    components[name] = None
                    continue
                if shares_context(fn):
                    shared = deep_copy(context) if shared is None else shared
                    given = shared
                else:
                    given = deep_copy(context)
                components[name], error = call_reward(fn, solution, gold, given, self.reward_timeout)
                if error is not None:
                    errors[name] = error
        total, any_scored = weighted_total(components, self.reward_weights)
        info = {
            "gold": gold,
            "problem_id": problem.problem_id,
            "correct": correct,
            "parsed_answer": parsed,
            "unparseable": self._done and parsed is None,
            "reward_components": components,
            "reward_errors": errors,
            "no_applicable_reward": not any_scored,
            "injected_spans": self._injected_spans(),
            "steps": list(self._steps),
            **extra,
        }
        if deferred:
            info[PENDING] = PendingRewards(tuple(deferred), solution, deep_copy(context))
        return total, info
