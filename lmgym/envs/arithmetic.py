"""Procedural arithmetic problems in five levels: the offline default environment, and the same problems
solved with a calculator tool (``ToolArithmeticEnv``, ``ToolArithmetic-v0``: the first tool env).

Every level is a finite, deterministic list of problems. A problem goes to the
test split when a stable hash of its canonical operands falls in the lowest 10%,
so train and test never share a problem. Keys are canonical expressions shared
across levels: ``3 + 5`` and ``5 + 3`` share a split, and so does ``23 + 74`` in
levels 1 and 2. Within a split, problems come in a fixed shuffled order (a stable
hash of level and index), so the first n problems of a split are a uniform sample of it:
the level's own enumeration runs through one operation after another (level 2's
first 800 test problems were all sums, the next 760 all differences), and before
2026-11-30 (twenty-seventh session) "problems 0..n" meant that narrow slice.

Levels:
  0. one-digit sums ("What is 3 + 5?")
  1. two-digit sums ("What is 47 + 38?")
  2. two-digit sums, differences and products ("What is 47 * 38?")
  3. three operands, two operations, usual precedence ("What is 12 + 7 * 3?")
  4. short multi-step word problems with integer answers
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

import numpy as np

from lmgym.envs.answers import answers_equal
from lmgym.envs.base import Problem
from lmgym.envs.checks import check_choice
from lmgym.envs.math_env import MathEnv
from lmgym.envs.rewards import RewardFn, correctness_reward
from lmgym.envs.tool_env import ToolEnv
from lmgym.envs.tools import CalculatorTool

LEVELS = (0, 1, 2, 3, 4)
SPLITS = ("train", "test")
TEST_FRACTION_PERCENT = 10
ARITHMETIC_INSTRUCTION = " Give the final answer after ####."


@dataclass(frozen=True)
class GeneratedProblem:
    """A problem of a level: its question, integer answer and the canonical key that picks its split."""

    question: str
    answer: int
    key: str


def _apply(left: int, op: str, right: int) -> int:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    return left * right


def _sum_problem(a: int, b: int) -> GeneratedProblem:
    return GeneratedProblem(f"What is {a} + {b}?", a + b, f"{min(a, b)}+{max(a, b)}")


def _level0(index: int) -> GeneratedProblem:
    a, b = divmod(index, 10)
    return _sum_problem(a, b)


def _level1(index: int) -> GeneratedProblem:
    a, b = divmod(index, 90)
    return _sum_problem(10 + a, 10 + b)


_LEVEL2_OPS = ("+", "-", "*")


def _level2(index: int) -> GeneratedProblem:
    op_index, rest = divmod(index, 90 * 90)
    a, b = (10 + part for part in divmod(rest, 90))
    op = _LEVEL2_OPS[op_index]
    key_operands = (min(a, b), max(a, b)) if op in "+*" else (a, b)
    return GeneratedProblem(f"What is {a} {op} {b}?", _apply(a, op, b), f"{key_operands[0]}{op}{key_operands[1]}")


_LEVEL3_OPS = tuple(itertools.product("+-*", repeat=2))
_LEVEL3_OPERANDS = range(1, 21)


def _level3(index: int) -> GeneratedProblem:
    size = len(_LEVEL3_OPERANDS)
    ops_index, rest = divmod(index, size**3)
    a, rest = divmod(rest, size * size)
    b, c = divmod(rest, size)
    a, b, c = (_LEVEL3_OPERANDS[i] for i in (a, b, c))
    op1, op2 = _LEVEL3_OPS[ops_index]
    if op2 == "*" and op1 != "*":  # multiplication binds tighter
        answer = _apply(a, op1, b * c)
    else:
        answer = _apply(_apply(a, op1, b), op2, c)
    text = f"{a} {op1} {b} {op2} {c}"
    return GeneratedProblem(f"What is {text}?", answer, text.replace(" ", ""))


_NAMES = ("Tom", "Maria", "Ken", "Aisha", "Leo", "Sara", "Ravi", "Emma", "Omar", "Lena")
_ITEMS = ("apples", "marbles", "stickers", "pencils", "cards", "shells", "stamps")


@dataclass(frozen=True)
class WordTemplate:
    """A word-problem template: text with {name}, {items} and parameter fields, and its answer."""

    text: str
    ranges: Mapping[str, range]
    answer: Callable[[dict[str, int]], int]
    derived: Callable[[dict[str, int]], dict[str, int]] = lambda p: {}

    @property
    def size(self) -> int:
        return int(np.prod([len(r) for r in self.ranges.values()]))

    def params(self, index: int) -> dict[str, int]:
        values: dict[str, int] = {}
        for name, options in reversed(list(self.ranges.items())):
            index, position = divmod(index, len(options))
            values[name] = options[position]
        return {name: values[name] for name in self.ranges}


_WORD_TEMPLATES = (
    WordTemplate(
        "{name} has {a} {items}, buys {b} bags of {c} {items}, and gives away {d}. "
        "How many {items} does {name} have?",
        {"a": range(5, 31), "b": range(2, 7), "c": range(2, 10), "d": range(1, 10)},
        lambda p: p["a"] + p["b"] * p["c"] - p["d"],
    ),
    WordTemplate(
        "{name} bakes {a} trays of {b} cookies each and sells {c} of them. How many cookies does {name} have left?",
        {"a": range(2, 10), "b": range(6, 13), "c": range(1, 12)},
        lambda p: p["a"] * p["b"] - p["c"],
    ),
    WordTemplate(
        "{name} reads {a} pages every day for {b} days, then reads {c} more pages. "
        "How many pages does {name} read in total?",
        {"a": range(5, 26), "b": range(2, 10), "c": range(1, 21)},
        lambda p: p["a"] * p["b"] + p["c"],
    ),
    WordTemplate(
        "A box holds {a} {items}. {name} fills {b} boxes and has {c} {items} left over. "
        "How many {items} did {name} have at the start?",
        {"a": range(4, 13), "b": range(2, 10), "c": range(1, 4)},
        lambda p: p["a"] * p["b"] + p["c"],
    ),
    WordTemplate(
        "{name} has ${a}. {name} buys {b} books that cost ${c} each. How many dollars does {name} have left?",
        {"a": range(60, 101, 5), "b": range(2, 7), "c": range(2, 10)},
        lambda p: p["a"] - p["b"] * p["c"],
    ),
    WordTemplate(
        "A class of {n} students works in groups of {b}, and each group gets {c} markers. "
        "How many markers does the class need?",
        {"b": range(2, 7), "g": range(2, 11), "c": range(2, 9)},
        lambda p: p["g"] * p["c"],
        derived=lambda p: {"n": p["b"] * p["g"]},
    ),
    WordTemplate(
        "{name} earns ${a} per hour and works {b} hours a day for {c} days. How many dollars does {name} earn?",
        {"a": range(8, 21), "b": range(2, 9), "c": range(2, 7)},
        lambda p: p["a"] * p["b"] * p["c"],
    ),
)
_TEMPLATE_STARTS = list(itertools.accumulate((t.size for t in _WORD_TEMPLATES), initial=0))


def _level4(index: int) -> GeneratedProblem:
    template_index = bisect.bisect_right(_TEMPLATE_STARTS, index) - 1
    template = _WORD_TEMPLATES[template_index]
    local = index - _TEMPLATE_STARTS[template_index]
    params = template.params(local)
    fields = {
        **params,
        **template.derived(params),
        "name": _NAMES[local % len(_NAMES)],
        "items": _ITEMS[(local // len(_NAMES)) % len(_ITEMS)],
    }
    key = f"words{template_index}:" + ",".join(f"{k}={v}" for k, v in params.items())
    return GeneratedProblem(template.text.format(**fields), template.answer(params), key)


_GENERATORS: dict[int, Callable[[int], GeneratedProblem]] = {0: _level0, 1: _level1, 2: _level2, 3: _level3, 4: _level4}
_LEVEL_SIZES = {
    0: 10 * 10,
    1: 90 * 90,
    2: len(_LEVEL2_OPS) * 90 * 90,
    3: len(_LEVEL3_OPS) * len(_LEVEL3_OPERANDS) ** 3,
    4: _TEMPLATE_STARTS[-1],
}


def check_level_and_split(level: Any, split: Any) -> None:
    """One-line ValueError unless ``level`` is in LEVELS and ``split`` in SPLITS."""
    check_choice("level", level, LEVELS)
    check_choice("split", split, SPLITS)


def generate(level: int, index: int) -> GeneratedProblem:
    """Problem ``index`` of ``level`` over the whole level (both splits)."""
    check_choice("level", level, LEVELS)
    if not 0 <= index < _LEVEL_SIZES[level]:
        raise ValueError(f"index must be in [0, {_LEVEL_SIZES[level]}) for level {level}; got {index!r}")
    return _GENERATORS[level](index)


def split_of(key: str) -> str:
    """The split of a problem key: "test" for about 10% of keys (stable hash), else "train"."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return "test" if int.from_bytes(digest, "big") % 100 < TEST_FRACTION_PERCENT else "train"


@cache
def split_indices(level: int, split: str) -> np.ndarray:
    """Level-wide indices of the problems in ``split``, in the split's fixed shuffled order (by a stable hash of
    the level and each problem's index: the same on every machine and library version; computed once per
    process)."""
    check_level_and_split(level, split)
    chosen = [i for i in range(_LEVEL_SIZES[level]) if split_of(_GENERATORS[level](i).key) == split]
    chosen.sort(key=lambda i: hashlib.sha256(f"order {level} {i}".encode()).digest())  # a fixed shuffle
    indices = np.asarray(chosen, dtype=np.int64)
    indices.setflags(write=False)
    return indices


class ArithmeticProblems:
    """The problems of one level and split, for an env class to mix in before its LanguageEnv base.

    Provides ``num_problems`` and ``get_problem`` (gold answers are integer strings); the env calls
    ``_use_problems(level, split)`` in its ``__init__``.
    """

    level: int
    split: str
    _indices: np.ndarray

    def _use_problems(self, level: int, split: str) -> None:
        check_level_and_split(level, split)
        self.level, self.split = level, split
        self._indices = split_indices(level, split)

    @property
    def num_problems(self) -> int:
        return len(self._indices)

    def get_problem(self, index: int) -> Problem:
        level_index = int(self._indices[index])
        generated = _GENERATORS[self.level](level_index)
        return Problem(generated.question, str(generated.answer), f"arithmetic/L{self.level}/{level_index}")


class ArithmeticEnv(ArithmeticProblems, MathEnv):
    """Arithmetic problems of one level and split, graded as math.

    Args:
        level: the problems' level, 0 to 4 (see the module docstring).
        split: "train" or "test" (see the module docstring).
        instruction: appended to each question.
        **math_kwargs: MathEnv's and LanguageEnv's keyword arguments (mode, max_steps=8, sym_calc,
            reward_fns, reward_weights, render_mode, last_number_fallback, max_action_chars, reward_timeout).
    """

    def __init__(self, level: int = 1, split: str = "train", *, instruction: str = ARITHMETIC_INSTRUCTION,
                 **math_kwargs: Any):
        check_level_and_split(level, split)
        super().__init__(instruction=instruction, **math_kwargs)
        self._use_problems(level, split)


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
