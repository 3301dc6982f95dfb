"""Multi-agent reflection: an actor answers a problem, a critic reviews the answer, the actor refines.

Episode (mode ``"multi_turn"``, ``max_turns`` = T actor turns, so ``max_steps`` = 2T - 1 actions):

- action 0: the actor answers the task's prompt;
- then for each of the T - 1 rounds: the env writes the critic request, the critic writes feedback on the
  latest answer (``current_role == "critic"``), the env writes the refine request, the actor answers again.

The episode ends (terminated) with the actor's T-th answer. Every actor answer is parsed and graded by the
task env (a ``MathEnv``: ``extract_answer`` and the math grader); the critic's feedback is never graded.
``info["turn_answers"]`` and ``info["turn_correct"]`` hold the actor turns' parsed answers and verdicts so
far, ``info["prompt"]`` the task's prompt. ``info["parsed_answer"]``/``info["correct"]`` (and so the
default correctness reward) are the final answer's; ``reward_fns`` may use the per-turn lists instead (e.g.
``improvement_reward``).

Injected requests: raw text (``turn_role=None``: each request between blank lines) or chat turns of role
``"user"`` (``turn_role="user"``), which the episode engine writes with the policy's chat template. Both
roles see the whole transcript so far. ``reflection_transcript`` (and the env's ``transcript``) rebuilds
the raw-text transcript, e.g. the prompt a role saw, for preference pairs.

Problems come from a task env built with ``make(task, mode="single", **task_kwargs)`` (keyword arguments
this class does not take go to the task: ``data_path``, ``split``, ``subset``, ``level``, ``instruction``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lmgym.envs.base import (
    DEFAULT_MAX_ACTION_CHARS,
    DEFAULT_REWARD_TIMEOUT,
    LanguageEnv,
    Problem,
)
from lmgym.envs.checks import check_choice, check_positive_int, check_str
from lmgym.envs.registry import make
from lmgym.envs.rewards import RewardFn, correctness_reward

ACTOR, CRITIC = "actor", "critic"
TURN_ROLES = (None, "user")
DEFAULT_MAX_TURNS = 5
DEFAULT_CRITIC_REQUEST = ("Review the answer above. Say whether it is right and point out any mistake in its "
                          "reasoning or final answer, without writing a new solution.")
REFINE_LEAD = "Use the feedback to write a corrected solution."


def default_refine_request(task_instruction: str) -> str:
    """The refine request: ``REFINE_LEAD`` followed by the task's own answer-format instruction."""
    return f"{REFINE_LEAD} {task_instruction.strip()}".strip()


class ReflectionEnv(LanguageEnv):
    """An actor/critic reflection episode over a task env's problems (see the module docstring).

    Args:
        task: an env id (built in single mode with ``task_kwargs``) or a LanguageEnv giving problems, prompts,
            answer parsing and grading.
        max_turns: actor turns per episode (T >= 1); T - 1 critic turns between them.
        critic_request: the env's text before each critic turn.
        refine_request: the env's text before each refinement; None: ``default_refine_request`` of the
            task's instruction.
        turn_role: None (requests are raw text) or "user" (chat turns).
        stop: stop strings of every turn; None: each turn ends at end-of-sequence or the length limit.
        mode: "multi_turn" (the only mode).
        reward_fns: as LanguageEnv's; None: the correctness reward (the final answer's verdict).
        reward_weights: as LanguageEnv's.
        render_mode: as LanguageEnv's.
        max_action_chars: as LanguageEnv's.
        reward_timeout: as LanguageEnv's.
        **task_kwargs: keyword arguments of the task env (only with ``task`` an env id).
    """

    modes = ("multi_turn",)
    default_reward_fns: ClassVar[dict[str, RewardFn]] = {"correctness": correctness_reward}
    episode_state: ClassVar[dict[str, Any]] = {"turn_answers": [], "turn_correct": []}

    def __init__(
        self,
        task: str | LanguageEnv = "Arithmetic-v0",
        *,
        max_turns: int = DEFAULT_MAX_TURNS,
        critic_request: str = DEFAULT_CRITIC_REQUEST,
        refine_request: str | None = None,
        turn_role: str | None = None,
        stop: Sequence[str] | None = None,
        mode: str = "multi_turn",
        reward_fns: Mapping[str, Any] | None = None,
        reward_weights: Mapping[str, float] | None = None,
        render_mode: str | None = None,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        reward_timeout: float | None = DEFAULT_REWARD_TIMEOUT,
        **task_kwargs: Any,
    ):
        check_positive_int("max_turns", max_turns)
        check_str("critic_request", critic_request)
        check_choice("turn_role", turn_role, TURN_ROLES)
        self.task = _task_env(task, task_kwargs)
        super().__init__(mode=mode, max_steps=2 * max_turns - 1, reward_fns=reward_fns, reward_weights=reward_weights,
                         render_mode=render_mode, max_action_chars=max_action_chars, reward_timeout=reward_timeout)
        if refine_request is None:
            refine_request = default_refine_request(self.task.instruction)
        check_str("refine_request", refine_request)
        self.max_turns = max_turns
        self.critic_request, self.refine_request = critic_request, refine_request
        self.turn_role = turn_role
        self.stop = _checked_stop(stop)

    # ---- problems: the task's ----------------------------------------------------------

    @property
    def num_problems(self) -> int:
        return self.task.num_problems

    def get_problem(self, index: int) -> Problem:
        return self.task.get_problem(index)

    def build_prompt(self, problem: Problem) -> str:
        """The task's prompt (its question and instruction)."""
        return self.task.build_prompt(problem)

    # ---- turns -------------------------------------------------------------------------

    @property
    def current_role(self) -> str:
        """"actor" on even actions (0, 2, ...), "critic" on odd ones."""
        return role_of_action(self.steps_taken)

    @property
    def stop_strings(self) -> list[str] | None:
        """``stop`` for every turn (None: end-of-sequence or the length limit)."""
        return list(self.stop) if self.stop is not None else None

    def is_final_action(self, action: str) -> bool:
        """The actor's ``max_turns``-th answer ends the episode."""
        return self.steps_taken == 2 * (self.max_turns - 1)

    def request_after(self, action_index: int) -> str:
        """The request the env writes after action ``action_index`` (before the final answer: never "")."""
        return self.critic_request if role_of_action(action_index) == ACTOR else self.refine_request

    def respond(self, action: str, final: bool) -> tuple[str, str | None]:
        """Grade an actor's answer (recorded per turn); then the next request, raw or as a chat turn."""
        index = self.steps_taken
        if role_of_action(index) == ACTOR:
            assert self._problem is not None
            parsed = self.task.parse_answer(action)
            self.turn_answers.append(parsed)
            self.turn_correct.append(parsed is not None and bool(self.task.is_correct(parsed, self._problem)))
        if final:
            return "", None
        request = self.request_after(index)
        return (raw_request(request), None) if self.turn_role is None else (request, self.turn_role)

    def transcript(self, prompt: str, actions: Sequence[str]) -> str:
        """The raw-text transcript after ``actions`` (actor and critic alternating): with ``turn_role=None``
        the env's observation. No request follows an episode's final answer."""
        if len(actions) > 2 * (self.max_turns - 1):  # the final answer: nothing after it
            return reflection_transcript(prompt, actions[:-1], self.critic_request, self.refine_request) + actions[-1]
        return reflection_transcript(prompt, actions, self.critic_request, self.refine_request)

    # ---- grading: the final answer is the latest actor turn's ---------------------------

    def parse_answer(self, solution: str) -> str | None:
        """The latest actor turn's parsed answer in this episode (critic feedback is never graded); before
        any actor turn, the task's parse of ``solution``."""
        return self.turn_answers[-1] if self.turn_answers else self.task.parse_answer(solution)

    def is_correct(self, parsed_answer: str, problem: Problem) -> bool:
        """The verdict recorded for the latest actor turn when ``parsed_answer`` is its answer, else the
        task's grader."""
        if self.turn_answers and parsed_answer == self.turn_answers[-1] and problem is self._problem:
            return self.turn_correct[-1]
        return bool(self.task.is_correct(parsed_answer, problem))

    def episode_info(self) -> dict[str, Any]:
        """``turn_answers`` and ``turn_correct`` (per actor turn so far) and the task's ``prompt``."""
        prompt = self.build_prompt(self._problem) if self._problem is not None else ""
        return {"turn_answers": list(self.turn_answers), "turn_correct": list(self.turn_correct), "prompt": prompt}


def role_of_action(action_index: int) -> str:
    """Who takes action number ``action_index`` of a reflection episode: the actor on even ones."""
    return ACTOR if action_index % 2 == 0 else CRITIC


def reflection_transcript(prompt: str, actions: Sequence[str], critic_request: str, refine_request: str) -> str:
    """``prompt`` followed by each action (actor and critic alternating) and the request the env writes after
    it, as raw text: what the next role sees (the critic after an actor's answer, the actor after feedback)."""
    parts = [prompt]
    for index, action in enumerate(actions):
        parts += [action, raw_request(critic_request if role_of_action(index) == ACTOR else refine_request)]
    return "".join(parts)


def raw_request(request: str) -> str:
    """A request as raw text in the transcript: between blank lines."""
    return f"\n\n{request}\n"


def improvement_reward(completion: str, gold: str, info: dict) -> float:
    """1.0 when the final answer is correct and the first was not, -1.0 for the reverse, else 0.0 (a reward
    for refinement itself; use it in ``reward_fns``)."""
    turns = info.get("turn_correct") or [False]
    return float(bool(turns[-1])) - float(bool(turns[0]))


def _task_env(task: str | LanguageEnv, task_kwargs: dict[str, Any]) -> LanguageEnv:
    if "max_steps" in task_kwargs:
        raise ValueError("ReflectionEnv: 'max_steps' is not a task keyword argument (set max_turns instead)")
    if isinstance(task, LanguageEnv):
        if task_kwargs:
            raise ValueError(f"ReflectionEnv: keyword argument {min(task_kwargs)!r} is for a task given "
                             f"as an env id; this task is already built")
        return task
    if not isinstance(task, str) or not task:
        raise ValueError(f"ReflectionEnv: task must be an env id or a LanguageEnv; got {task!r}")
    return make(task, mode="single", **task_kwargs)


def _checked_stop(stop: Sequence[str] | None) -> tuple[str, ...] | None:
    if stop is None:
        return None
    if isinstance(stop, str) or not all(isinstance(s, str) and s for s in stop):
        raise ValueError(f"ReflectionEnv: stop must be None or a list of non-empty strings; got {stop!r}")
    return tuple(stop)
