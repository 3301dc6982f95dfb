"""An env over a data set's rows, as TRL's GRPOTrainer takes them: ``make("Dataset-v0", dataset=ds, reward_fns=[...])``.

``dataset`` is a ``datasets.Dataset`` (or anything with ``len`` and integer indexing that gives mappings) or a
list of dicts; each row has a ``"prompt"``: text, or a chat-format prompt (a list of {"role", "content"}
messages, rendered with the policy's chat template). Every other column travels with the problem
(``Problem.fields``): TRL-style reward functions ``fn(completions, **kwargs)`` get each as a keyword
(``kwargs["answer"]``, ``kwargs["level"]``...), and per-sample ones ``fn(completion, gold, info)`` in
``info["fields"]``. The gold is the row's ``gold_column`` (default ``"answer"``) as text, or "" when the row
has none. Episodes are single-turn: the action is the whole completion.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lmgym.core.chat import check_chat_prompt
from lmgym.envs.base import LanguageEnv, Problem
from lmgym.envs.spaces import AnyPrompt

PROMPT = "prompt"


class DatasetEnv(LanguageEnv):
    """Single-turn episodes over the rows of ``dataset`` (see the module doc), scored by ``reward_fns``.

    Args:
        dataset: a ``datasets.Dataset`` (one split) or a list of dicts, each with a "prompt" column.
        reward_fns: a list of reward functions (TRL's ``reward_funcs``) or a dict name -> function.
        gold_column: the column holding the gold answer (None: no gold; ``is_correct`` is then never true).
        **env_kwargs: LanguageEnv's (reward_weights, instruction, max_action_chars, reward_timeout...).
    """

    modes = ("single",)

    def __init__(self, dataset: Any, reward_fns: Sequence[Callable] | Mapping[str, Callable] | None = None, *,
                 gold_column: str | None = "answer", **env_kwargs: Any):
        if reward_fns is None:
            raise ValueError("Dataset-v0 needs reward_fns: a list of reward functions, e.g. "
                             "reward_fns=[my_reward] with def my_reward(completions, **kwargs) -> list[float]")
        self.rows = checked_rows(dataset)
        super().__init__(reward_fns=reward_fns, **env_kwargs)
        self.gold_column = gold_column
        self.observation_space = AnyPrompt()

    @property
    def num_problems(self) -> int:
        return len(self.rows)

    def get_problem(self, index: int) -> Problem:
        row = self.rows[index]
        if not isinstance(row, Mapping) or PROMPT not in row:
            raise ValueError(f"dataset row {index} has no 'prompt' column; got {_describe(row)}")
        prompt = row[PROMPT] if isinstance(row[PROMPT], str) else _chat_prompt(row[PROMPT], index)
        gold = row.get(self.gold_column) if self.gold_column is not None else None
        fields = {str(key): value for key, value in row.items() if key != PROMPT}
        return Problem(prompt, "" if gold is None else str(gold), f"row/{index}", fields)


def checked_rows(dataset: Any) -> Sequence[Mapping[str, Any]]:
    """The rows of ``dataset``, checked (one-line ValueError): a list is checked row by row; a data set with
    ``column_names`` (``datasets.Dataset``) by its columns, each row again when it is drawn."""
    if isinstance(dataset, Mapping):
        splits = ", ".join(map(repr, list(dataset)[:4]))
        raise ValueError(f"dataset is a mapping (a DatasetDict?) with keys {splits}; pass one split, "
                         f"e.g. dataset['train']")
    if isinstance(dataset, (str, bytes)) or not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
        raise ValueError(f"dataset must be a datasets.Dataset or a list of dicts with a 'prompt' column; got "
                         f"{type(dataset).__name__}")
    if len(dataset) == 0:
        raise ValueError("dataset is empty: it needs at least one row with a 'prompt' column")
    columns = getattr(dataset, "column_names", None)
    if columns is not None:
        if PROMPT not in columns:
            raise ValueError(f"dataset has no 'prompt' column; its columns: {', '.join(map(str, columns))}")
        return dataset
    rows = list(dataset)
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping) or PROMPT not in row:
            raise ValueError(f"dataset row {index} has no 'prompt' column; got {_describe(row)}")
        prompt = row[PROMPT]
        if isinstance(prompt, str):
            if not prompt.strip():
                raise ValueError(f"dataset row {index}: 'prompt' is blank")
        else:
            _chat_prompt(prompt, index)
    return rows


def _chat_prompt(prompt: Any, index: int) -> list[dict[str, str]]:
    if not isinstance(prompt, (list, tuple)):
        raise ValueError(f"dataset row {index}: 'prompt' must be a str or a list of messages; got "
                         f"{type(prompt).__name__}")
    try:
        return check_chat_prompt(prompt)
    except ValueError as err:
        raise ValueError(f"dataset row {index}: 'prompt': {err}") from None


def _describe(row: Any) -> str:
    if isinstance(row, Mapping):
        return f"columns {', '.join(map(str, row))}" if row else "an empty row"
    return f"a {type(row).__name__}"
