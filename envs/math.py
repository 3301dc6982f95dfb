"""GSM8K and MATH environments over rows from a local JSONL file or the Hugging Face hub."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from envs.answers import gsm8k_gold
from envs.base import DEFAULT_MAX_ACTION_CHARS, DEFAULT_REWARD_TIMEOUT, LanguageEnv, Problem
from envs.data import MalformedRowError, load_rows
from envs.rewards import RewardFn


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


class ProblemListEnv(LanguageEnv):
    """A LanguageEnv over a list of problems that the subclass fills in after ``__init__``."""

    def __init__(self, **base_kwargs):
        super().__init__(**base_kwargs)
        self._problems: list[Problem] = []

    @property
    def num_problems(self) -> int:
        return len(self._problems)

    def get_problem(self, index: int) -> Problem:
        return self._problems[index]


class GSM8KEnv(ProblemListEnv):
    """Grade-school math word problems (openai/gsm8k, config "main"); gold is the number after ####."""

    HUB_ID, HUB_CONFIG = "openai/gsm8k", "main"

    def __init__(
        self,
        data_path: str | Path | None = None,
        split: str = "train",
        mode: str = "single",
        sym_calc: bool = False,
        max_steps: int = 10,
        reward_fns: Mapping[str, RewardFn] | None = None,
        reward_weights: Mapping[str, float] | None = None,
        instruction: str = " Solve it step by step, then give the final answer after ####.",
        subset: tuple[int, int] | None = None,
        render_mode: str | None = None,
        last_number_fallback: bool = True,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        reward_timeout: float | None = DEFAULT_REWARD_TIMEOUT,
    ):
        super().__init__(
            mode=mode,
            max_steps=max_steps,
            sym_calc=sym_calc,
            reward_fns=reward_fns,
            reward_weights=reward_weights,
            instruction=instruction,
            render_mode=render_mode,
            last_number_fallback=last_number_fallback,
            max_action_chars=max_action_chars,
            reward_timeout=reward_timeout,
        )
        check_source(data_path, split)
        self.split = split
        rows = load_rows("GSM8K", data_path, split, self.HUB_ID, self.HUB_CONFIG, ("question", "answer"))
        start, stop = check_subset(subset, len(rows))
        for row_index in range(start, stop):
            row = rows[row_index]
            try:
                gold = gsm8k_gold(str(row["answer"]))
            except ValueError as error:
                raise MalformedRowError(f"GSM8K {split} row {row_index}: {error}") from None
            self._problems.append(Problem(str(row["question"]), gold, f"gsm8k/{split}/{row_index}", fields=dict(row)))


class MATHEnv(ProblemListEnv):
    """Competition math (HuggingFaceH4/MATH-500, split "test"); gold is the row's "answer" field."""

    HUB_ID, HUB_CONFIG = "HuggingFaceH4/MATH-500", None

    def __init__(
        self,
        data_path: str | Path | None = None,
        split: str = "test",
        mode: str = "single",
        sym_calc: bool = False,
        max_steps: int = 10,
        reward_fns: Mapping[str, RewardFn] | None = None,
        reward_weights: Mapping[str, float] | None = None,
        instruction: str = "\nSolve it step by step, then put the final answer in \\boxed{}.",
        subset: tuple[int, int] | None = None,
        render_mode: str | None = None,
        last_number_fallback: bool = True,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        reward_timeout: float | None = DEFAULT_REWARD_TIMEOUT,
    ):
        super().__init__(
            mode=mode,
            max_steps=max_steps,
            sym_calc=sym_calc,
            reward_fns=reward_fns,
            reward_weights=reward_weights,
            instruction=instruction,
            render_mode=render_mode,
            last_number_fallback=last_number_fallback,
            max_action_chars=max_action_chars,
            reward_timeout=reward_timeout,
        )
        check_source(data_path, split)
        self.split = split
        rows = load_rows("MATH", data_path, split, self.HUB_ID, self.HUB_CONFIG, ("problem", "answer"))
        start, stop = check_subset(subset, len(rows))
        self._problems = [
            Problem(
                str(rows[i]["problem"]),
                str(rows[i]["answer"]).strip(),
                str(rows[i].get("unique_id") or f"math/{split}/{i}"),
                fields=dict(rows[i]),
            )
            for i in range(start, stop)
        ]
