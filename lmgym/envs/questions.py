"""A math env over questions users ask: no gold, so search methods can answer them as they answer any
stepwise math problem (the server's /solve plays one).

Each question gets the arithmetic instruction by default (the prompt the toolkit's policies are trained
on); the answer is parsed as in every math env, and no answer is ever graded correct (there is no gold).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lmgym.envs.arithmetic import ARITHMETIC_INSTRUCTION
from lmgym.envs.base import Problem
from lmgym.envs.math_env import MathEnv


class QuestionsEnv(MathEnv):
    """Math problems from a list of question strings, played stepwise by default.

    Args:
        questions: the questions (non-empty strings), problem i being questions[i].
        instruction: appended to each question.
        **math_kwargs: MathEnv's and LanguageEnv's keyword arguments (mode="stepwise", max_steps=8, sym_calc,
            last_number_fallback, reward_fns, max_action_chars, ...).
    """

    def __init__(self, questions: Sequence[str], *, instruction: str = ARITHMETIC_INSTRUCTION,
                 mode: str = "stepwise", **math_kwargs: Any):
        if isinstance(questions, str) or not isinstance(questions, Sequence) or not questions:
            raise ValueError(f"questions must be a non-empty list of strings; got {type(questions).__name__}")
        for index, question in enumerate(questions):
            if not isinstance(question, str) or not question.strip():
                raise ValueError(f"questions[{index}] must be a non-blank string; got {question!r}")
        super().__init__(instruction=instruction, mode=mode, **math_kwargs)
        self.questions = tuple(questions)

    @property
    def num_problems(self) -> int:
        return len(self.questions)

    def get_problem(self, index: int) -> Problem:
        return Problem(self.questions[index], "", f"question/{index}")

    def is_correct(self, parsed_answer: str, problem: Problem) -> bool:
        """Never: a user's question has no gold answer to grade against."""
        return False
