"""GSM8K and MATH environments over rows from a local JSONL file or the Hugging Face hub."""

from __future__ import annotations

import abc
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from lmgym.envs.base import Problem
from lmgym.envs.data import MalformedRowError, load_rows
from lmgym.envs.extraction import gsm8k_gold
from lmgym.envs.math_env import MathEnv
from lmgym.moved import MovedModuleWarning

GSM8K_INSTRUCTION = " Solve it step by step, then give the final answer after ####."
MATH_INSTRUCTION = "\nSolve it step by step, then put the final answer in \\boxed{}."
DATASET_MAX_STEPS = 10


def check_subset(subset: tuple[int, int] | None, num_rows: int) -> tuple[int, int]:
    """``subset`` as a validated [start, stop) slice of ``num_rows`` rows (None means all)."""
    if subset is None:
        return 0, num_rows
    valid = (
        isinstance(subset, (tuple, list))
        and len(subset) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in subset)
        and 0 <= subset[0] < subset[1] <= num_rows
    )
    if not valid:
        raise ValueError(f"subset must be (start, stop) with 0 <= start < stop <= {num_rows}; got {subset!r}")
    return subset[0], subset[1]


def check_source(data_path: object, split: object) -> None:
    """Raise a one-line ValueError unless ``data_path`` is None/str/PathLike and ``split`` a non-empty str."""
    if data_path is not None and not isinstance(data_path, (str, os.PathLike)):
        raise ValueError(f"data_path must be a path (str) or None; got {data_path!r}")
    if not isinstance(split, str) or not split:
        raise ValueError(f"split must be a non-empty str; got {split!r}")


class MathDatasetEnv(MathEnv):
    """A MathEnv over the rows of a data set: a subclass names it (``NAME``, ``HUB_ID``, ``HUB_CONFIG``,
    ``COLUMNS``) and maps a row to a Problem (``problem_from_row``).

    Args:
        data_path: a JSONL file, or a folder holding ``{split}.jsonl``; None loads from the hub.
        split: the data set split.
        subset: (start, stop) rows to keep; None keeps all.
        **math_kwargs: MathEnv's and LanguageEnv's keyword arguments.
    """

    NAME: ClassVar[str]
    HUB_ID: ClassVar[str]
    HUB_CONFIG: ClassVar[str | None] = None
    COLUMNS: ClassVar[tuple[str, ...]]

    def __init__(self, data_path: str | Path | None, split: str, *, subset: tuple[int, int] | None = None,
                 **math_kwargs: Any):
        super().__init__(**math_kwargs)
        check_source(data_path, split)
        self.split = split
        rows = load_rows(self.NAME, data_path, split, self.HUB_ID, self.HUB_CONFIG, self.COLUMNS)
        start, stop = check_subset(subset, len(rows))
        self._problems = [self.problem_from_row(rows[index], index) for index in range(start, stop)]

    @abc.abstractmethod
    def problem_from_row(self, row: Mapping[str, Any], index: int) -> Problem:
        """The Problem of row number ``index``; a malformed row raises MalformedRowError naming it."""

    @property
    def num_problems(self) -> int:
        return len(self._problems)

    def get_problem(self, index: int) -> Problem:
        return self._problems[index]


class GSM8KEnv(MathDatasetEnv):
    """Grade-school math word problems (openai/gsm8k, config "main"); gold is the number after ####.

    Keyword arguments as MathDatasetEnv, MathEnv and LanguageEnv; defaults split="train", max_steps=10,
    instruction=GSM8K_INSTRUCTION.
    """

    NAME, HUB_ID, HUB_CONFIG, COLUMNS = "GSM8K", "openai/gsm8k", "main", ("question", "answer")

    def __init__(self, data_path: str | Path | None = None, split: str = "train", *,
                 instruction: str = GSM8K_INSTRUCTION, max_steps: int = DATASET_MAX_STEPS, **kwargs: Any):
        super().__init__(data_path, split, instruction=instruction, max_steps=max_steps, **kwargs)

    def problem_from_row(self, row: Mapping[str, Any], index: int) -> Problem:
        try:
            gold = gsm8k_gold(str(row["answer"]))
        except ValueError as error:
            raise MalformedRowError(f"GSM8K {self.split} row {index}: {error}") from None
        return Problem(str(row["question"]), gold, f"gsm8k/{self.split}/{index}", fields=dict(row))


class MATHEnv(MathDatasetEnv):
    """Competition math (HuggingFaceH4/MATH-500, split "test"); gold is the row's "answer" field.

    Keyword arguments as MathDatasetEnv, MathEnv and LanguageEnv; defaults split="test", max_steps=10,
    instruction=MATH_INSTRUCTION.
    """

    NAME, HUB_ID, HUB_CONFIG, COLUMNS = "MATH", "HuggingFaceH4/MATH-500", None, ("problem", "answer")

    def __init__(self, data_path: str | Path | None = None, split: str = "test", *,
                 instruction: str = MATH_INSTRUCTION, max_steps: int = DATASET_MAX_STEPS, **kwargs: Any):
        super().__init__(data_path, split, instruction=instruction, max_steps=max_steps, **kwargs)

    def problem_from_row(self, row: Mapping[str, Any], index: int) -> Problem:
        problem_id = str(row.get("unique_id") or f"math/{self.split}/{index}")
        return Problem(str(row["problem"]), str(row["answer"]).strip(), problem_id, fields=dict(row))


def __getattr__(name: str):
    """``DatasetEnv``: ``MathDatasetEnv``'s old name, for one release, with one MovedModuleWarning line."""
    if name == "DatasetEnv":
        warnings.warn("lmgym.envs.math.DatasetEnv is now MathDatasetEnv (lmgym.envs.DatasetEnv is the TRL-style "
                      "Dataset-v0 env); the old name goes in the next release", MovedModuleWarning, stacklevel=2)
        return MathDatasetEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
