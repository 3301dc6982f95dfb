"""Math envs: answers are extracted from the solution, graded by the math grader, and a multi-step
episode ends at a final-answer marker; an optional calculator writes results between steps.

- ``parse_answer``: :func:`lmgym.envs.extraction.extract_answer` (``####``, ``\\boxed{}``, "the answer is",
  then the last number unless ``last_number_fallback=False``).
- ``is_correct``: :func:`lmgym.envs.answers.answers_equal` against the gold, with the env's ``grading``
  conventions (:class:`lmgym.envs.answers.GradingOptions`: list order, units).
- ``default_reward_fns``: ``{"correctness": correctness_reward}`` (1.0 when ``is_correct`` says so), used
  when no ``reward_fns`` are given.
- ``is_final_action``: the step contains a final-answer marker (``FINAL_ANSWER_MARKERS``, any case), or
  the step is empty: the policy wrote nothing (it stopped at once, at its end-of-sequence token), so the
  solution is over and is graded as it stands. Without this, a chat model that ends its answer with its
  end-of-turn token (SmolLM2 writes "1 + 2 * 3 = 7<|im_end|>") would be asked for empty steps until
  ``max_steps`` and its answer would never be graded. A blank line ("\n") is a step, not the end.
- ``sym_calc=True`` (stepwise mode only): a step ending in "=" gets the arithmetic's result written
  after it instead of a line break, and the line stays open for the next step; ``stop_strings`` adds
  "=" so a policy stops there.
"""

from __future__ import annotations

from typing import Any, ClassVar

from lmgym.envs.answers import GradingOptions, answers_equal
from lmgym.envs.base import LanguageEnv, Problem
from lmgym.envs.calculator import apply_calculator
from lmgym.envs.checks import check_bool
from lmgym.envs.extraction import extract_answer
from lmgym.envs.rewards import RewardFn, correctness_reward

FINAL_ANSWER_MARKERS = ("####", "\\boxed{", "the answer is", "final answer is")
CALCULATOR_STOP = "="


def has_final_answer_marker(text: str) -> bool:
    """True if ``text`` contains ``####``, ``\\boxed{``, "the answer is" or "final answer is" (any case)."""
    lowered = text.lower()
    return any(marker in lowered for marker in FINAL_ANSWER_MARKERS)


class MathEnv(LanguageEnv):
    """A LanguageEnv graded as math (see the module docstring).

    Args:
        sym_calc: write the result of a trailing calculation ("48 / 2 =" or "<<48/2=") after a step;
            needs mode="stepwise".
        last_number_fallback: when no marked answer is found, take the solution's last number.
        grading: the grader's conventions (``GradingOptions(unordered_lists=False, compare_units=True)`` when
            None): whether bare lists compare in order, whether two answers' units must agree.
        **base_kwargs: LanguageEnv's keyword arguments (mode, max_steps, reward_fns, reward_weights,
            instruction, render_mode, max_action_chars, reward_timeout); reward_fns defaults to
            ``default_reward_fns``, the correctness reward.
    """

    default_reward_fns: ClassVar[dict[str, RewardFn]] = {"correctness": correctness_reward}

    def __init__(self, *, sym_calc: bool = False, last_number_fallback: bool = True,
                 grading: GradingOptions | None = None, **base_kwargs: Any):
        check_bool("sym_calc", sym_calc)
        check_bool("last_number_fallback", last_number_fallback)
        if grading is not None and not isinstance(grading, GradingOptions):
            raise ValueError(f"grading must be a GradingOptions or None; got {type(grading).__name__}")
        super().__init__(**base_kwargs)
        if sym_calc and self.mode != "stepwise":
            raise ValueError(
                "sym_calc=True needs mode='stepwise': the calculator writes results between steps, "
                "and single mode receives the whole solution at once"
            )
        self.sym_calc = sym_calc
        self.last_number_fallback = last_number_fallback
        self.grading = grading

    def parse_answer(self, solution: str) -> str | None:
        """The marked final answer (or, with ``last_number_fallback``, the last number), or None."""
        return extract_answer(solution, last_number_fallback=self.last_number_fallback)

    def is_correct(self, parsed_answer: str, problem: Problem) -> bool:
        """The math grader's verdict (:func:`lmgym.envs.answers.answers_equal`) against the gold."""
        return answers_equal(parsed_answer, problem.gold, options=self.grading)

    def is_final_action(self, action: str) -> bool:
        """The step states a final answer (``has_final_answer_marker``), or is empty (the policy is done)."""
        return action == "" or has_final_answer_marker(action)

    def respond(self, action: str, final: bool) -> tuple[str, str | None]:
        """With the calculator on, a step ending in "=" gets the arithmetic's result (the line stays open);
        otherwise as LanguageEnv (a line break after a stepwise step)."""
        if self.sym_calc and action.rstrip(" ").endswith(CALCULATOR_STOP):
            # a calculator request ("48 / 2 =" or "<<48/2="): write the result, keep the line open
            return apply_calculator(action)[1], None
        return super().respond(action, final)

    @property
    def stop_strings(self) -> list[str] | None:
        """As LanguageEnv (None in single mode, a line break in stepwise), plus "=" with the calculator on,
        so the env can write the result right after it."""
        stops = super().stop_strings
        return stops + [CALCULATOR_STOP] if self.sym_calc and stops is not None else stops
