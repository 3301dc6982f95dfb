"""Gym-style environments for RL training of language models.

Text in, text out: ``obs, info = env.reset(seed=0)``; ``env.step(text)``.
Build envs with ``make("Arithmetic-v0")`` (or ``"rlgym/Arithmetic-v0"``) and list them with
``registered_ids()``. Reward functions may be per-sample ``fn(completion, gold, info)`` or
TRL-style ``fn(prompts, completions, **kwargs)``; see ``envs/reward_forms.py``.
"""

from envs.answers import GradingOptions, answers_equal, extract_answer
from envs.arithmetic import ArithmeticEnv
from envs.base import EpisodeOverError, LanguageEnv, Problem
from envs.data import DataFileNotFoundError, MalformedRowError
from envs.dataset_env import DatasetEnv
from envs.hotpotqa import HotpotQAEnv
from envs.hotpotqa_retrieved import QuestionSearchHotpotQAEnv
from envs.math import GSM8KEnv, MATHEnv
from envs.math_env import MathEnv
from envs.questions import QuestionsEnv
from envs.rag import RAGHotpotQAEnv, SearchTool
from envs.reflection import ReflectionEnv
from envs.registry import NAMESPACE, UnknownEnvError, make, register, registered_ids
from envs.reward_forms import per_sample_reward, reward_form, trl_reward
from envs.rewards import correctness_reward, format_reward
from envs.spaces import AnyPrompt, AnyText
from envs.tool_arithmetic import ToolArithmeticEnv
from envs.tool_env import ToolEnv
from envs.tools import CalculatorTool, TagTool, Tool, ToolCall

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
    "MathEnv",
    "NAMESPACE",
    "MalformedRowError",
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
    "register",
    "registered_ids",
    "reward_form",
    "trl_reward",
]
