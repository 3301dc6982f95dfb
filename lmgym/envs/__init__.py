"""Gym-style environments for RL training of language models.

Text in, text out: ``obs, info = env.reset(seed=0)``; ``env.step(text)``.
Build envs with ``make("Arithmetic-v0")`` (or ``"lmgym/Arithmetic-v0"``) and list them with
``registered_ids()``. Reward functions may be per-sample ``fn(completion, gold, info)`` or
TRL-style ``fn(prompts, completions, **kwargs)``; see ``envs/rewards/forms.py``.

Importing this package registers every id and loads only the generic base; the task envs, the math grader
(sympy) and the tools load on first use of their names.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from lmgym.core.extras import lazy_names
from lmgym.envs.base import EpisodeOverError, LanguageEnv, NoRewardError, Problem
from lmgym.envs.data import DataFileNotFoundError, MalformedRowError
from lmgym.envs.dataset_env import DatasetEnv
from lmgym.envs.registry import NAMESPACE, UnknownEnvError, make, register, registered_ids
from lmgym.envs.rewards.forms import per_sample_reward, reads_only, reward_form, trl_reward
from lmgym.envs.spaces import AnyPrompt, AnyText

if TYPE_CHECKING:  # loaded on first use (see _LAZY), so the generic base does not import the math grader
    from lmgym.envs.answers import GradingOptions, answers_equal, extract_answer
    from lmgym.envs.arithmetic import ArithmeticEnv, ToolArithmeticEnv
    from lmgym.envs.hotpotqa import HotpotQAEnv
    from lmgym.envs.hotpotqa.rag import RAGHotpotQAEnv, SearchTool
    from lmgym.envs.hotpotqa.retrieved import QuestionSearchHotpotQAEnv
    from lmgym.envs.math import GSM8KEnv, MathDatasetEnv, MATHEnv
    from lmgym.envs.math_env import MathEnv
    from lmgym.envs.questions import QuestionsEnv
    from lmgym.envs.reflection import ReflectionEnv
    from lmgym.envs.rewards import correctness_reward, format_reward
    from lmgym.envs.tool_env import ToolEnv
    from lmgym.envs.tools import CalculatorTool, TagTool, Tool, ToolCall

# name -> the module that defines it, imported on first access
_LAZY: dict[str, str] = {
    **dict.fromkeys(("GradingOptions", "answers_equal", "extract_answer"), "lmgym.envs.answers"),
    "ArithmeticEnv": "lmgym.envs.arithmetic",
    "HotpotQAEnv": "lmgym.envs.hotpotqa",
    "QuestionSearchHotpotQAEnv": "lmgym.envs.hotpotqa.retrieved",
    **dict.fromkeys(("GSM8KEnv", "MATHEnv", "MathDatasetEnv"), "lmgym.envs.math"),
    "MathEnv": "lmgym.envs.math_env",
    "QuestionsEnv": "lmgym.envs.questions",
    **dict.fromkeys(("RAGHotpotQAEnv", "SearchTool"), "lmgym.envs.hotpotqa.rag"),
    "ReflectionEnv": "lmgym.envs.reflection",
    **dict.fromkeys(("correctness_reward", "format_reward"), "lmgym.envs.rewards"),
    "ToolArithmeticEnv": "lmgym.envs.arithmetic",
    "ToolEnv": "lmgym.envs.tool_env",
    **dict.fromkeys(("CalculatorTool", "TagTool", "Tool", "ToolCall"), "lmgym.envs.tools"),
}

__all__ = [
    "AnyPrompt",
    "AnyText",
    "ArithmeticEnv",
    "CalculatorTool",
    "DataFileNotFoundError",
    "DatasetEnv",
    "EpisodeOverError",
    "GSM8KEnv",
    "GradingOptions",
    "HotpotQAEnv",
    "LanguageEnv",
    "MATHEnv",
    "MathDatasetEnv",
    "MathEnv",
    "NAMESPACE",
    "MalformedRowError",
    "NoRewardError",
    "Problem",
    "QuestionSearchHotpotQAEnv",
    "QuestionsEnv",
    "RAGHotpotQAEnv",
    "ReflectionEnv",
    "SearchTool",
    "TagTool",
    "Tool",
    "ToolArithmeticEnv",
    "ToolCall",
    "ToolEnv",
    "UnknownEnvError",
    "answers_equal",
    "correctness_reward",
    "extract_answer",
    "format_reward",
    "make",
    "per_sample_reward",
    "reads_only",
    "register",
    "registered_ids",
    "reward_form",
    "trl_reward",
]


# load the subpackage or module that defines a `_LAZY` name on first use
__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
