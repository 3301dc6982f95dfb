"""Arithmetic problems solved with a calculator tool: the first tool env (``ToolArithmetic-v0``)."""

from __future__ import annotations

from typing import Any, ClassVar

from lmgym.envs.answers import answers_equal
from lmgym.envs.arithmetic import ArithmeticProblems, check_level_and_split
from lmgym.envs.base import Problem
from lmgym.envs.rewards import RewardFn, correctness_reward
from lmgym.envs.tool_env import ToolEnv
from lmgym.envs.tools import CalculatorTool


class ToolArithmeticEnv(ArithmeticProblems, ToolEnv):
    """Arithmetic problems of one level and split, with ``<calc>EXPRESSION</calc>`` as the one tool; the
    final answer goes in ``<answer>...</answer>`` and is graded by the math grader (``answers_equal``).

    Args:
        level: the problems' level, as ArithmeticEnv's (level 2 has two-digit products, where the
            calculator helps).
        split: "train" or "test", as ArithmeticEnv's.
        max_steps: actions per episode (calls and the answer).
        max_tool_calls: calculator calls per episode.
        **tool_kwargs: ToolEnv's and LanguageEnv's other keyword arguments (result_role, nudge,
            instruction, reward_fns, reward_weights, render_mode, max_action_chars, reward_timeout); reward_fns
            defaults to the correctness reward.
    """

    default_reward_fns: ClassVar[dict[str, RewardFn]] = {"correctness": correctness_reward}

    def __init__(self, level: int = 2, split: str = "train", *, max_steps: int = 4, max_tool_calls: int = 3,
                 **tool_kwargs: Any):
        check_level_and_split(level, split)
        super().__init__([CalculatorTool()], max_steps=max_steps, max_tool_calls=max_tool_calls, **tool_kwargs)
        self._use_problems(level, split)

    def is_correct(self, parsed_answer: str, problem: Problem) -> bool:
        """The math grader's verdict against the gold."""
        return answers_equal(parsed_answer, problem.gold)
