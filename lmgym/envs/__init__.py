"""Gym-style environments for RL training of language models.

Text in, text out: ``obs, info = env.reset(seed=0)``; ``env.step(text)``.
Build envs with ``make("Arithmetic-v0")`` (or ``"rlgym/Arithmetic-v0"``) and list them with
``registered_ids()``. Reward functions may be per-sample ``fn(completion, gold, info)`` or
TRL-style ``fn(prompts, completions, **kwargs)``; see ``envs/rewards/forms.py``.
"""

from lmgym.envs.answers import GradingOptions, answers_equal, extract_answer
from lmgym.envs.arithmetic import ArithmeticEnv
from lmgym.envs.base import EpisodeOverError, LanguageEnv, Problem
from lmgym.envs.data import DataFileNotFoundError, MalformedRowError
from lmgym.envs.dataset_env import DatasetEnv
from lmgym.envs.hotpotqa.env import HotpotQAEnv
from lmgym.envs.hotpotqa.retrieved import QuestionSearchHotpotQAEnv
from lmgym.envs.math import GSM8KEnv, MATHEnv
from lmgym.envs.math_env import MathEnv
from lmgym.envs.questions import QuestionsEnv
from lmgym.envs.hotpotqa.rag import RAGHotpotQAEnv, SearchTool
from lmgym.envs.reflection import ReflectionEnv
from lmgym.envs.registry import NAMESPACE, UnknownEnvError, make, register, registered_ids
from lmgym.envs.rewards.forms import per_sample_reward, reward_form, trl_reward
from lmgym.envs.rewards.functions import correctness_reward, format_reward
from lmgym.envs.spaces import AnyPrompt, AnyText
from lmgym.envs.arithmetic import ToolArithmeticEnv
from lmgym.envs.tool_env import ToolEnv
from lmgym.envs.tools import CalculatorTool, TagTool, Tool, ToolCall

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
