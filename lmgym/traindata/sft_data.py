"""Supervised fine-tuning data: prompt/completion pairs and chat conversations, from JSONL, `datasets`, or
the toolkit's own environments (GSM8K train solutions, Arithmetic-v0 gold solutions).

An `SFTExample(prompt, completion)` holds an env-style observation and the text the model should answer
with; a `ChatExample(messages)` a conversation whose assistant turns are trained on (from
`trained_from` on: a conversational prompt/completion row trains on its completion's turns only).
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmgym.core.chat import check_messages as check_chat_messages
from lmgym.core.jsonl import parse_jsonl
from lmgym.envs.arithmetic import ArithmeticEnv
from lmgym.envs.math import GSM8KEnv, MATHEnv
from lmgym.policies.few_shot import gsm8k_solution_steps
from lmgym.traindata.step_data.arithmetic_gold import problem_gold_steps

MODES = ("single", "stepwise")


@dataclass(frozen=True)
class SFTExample:
    """An observation (`HFPolicy.format_prompt` turns it into the model input) and its target completion."""

    prompt: str
    completion: str


@dataclass(frozen=True)
class ChatExample:
    """A conversation: ({"role", "content"}, ...); the assistant turns at index >= `trained_from` are trained on."""

    messages: tuple[Mapping[str, str], ...]
    trained_from: int = 0


Example = SFTExample | ChatExample


def check_messages(messages: Any, trained_from: int = 0) -> tuple[dict[str, str], ...]:
    """`messages` as a tuple of {"role", "content"} dicts; ValueError (one line) unless each is one, with a
    known role and str content (`lmgym.core.chat.check_messages`), and an assistant turn is trained on."""
    checked = check_chat_messages(messages)
    if not any(m["role"] == "assistant" for m in checked[trained_from:]):
        raise ValueError("the conversation has no assistant turn to train on")
    return checked


def example_from_row(row: Any) -> Example:
    """An example from a mapping: {"prompt": str, "completion": str}, {"messages": [...]}, or TRL's
    conversational {"prompt": [...], "completion": [...]} (trained on the completion's assistant turns)."""
    if not isinstance(row, Mapping):
        raise ValueError(f"expected an object, got {type(row).__name__}")
    if "messages" in row:
        return ChatExample(check_messages(row["messages"]))
    if "prompt" not in row or "completion" not in row:
        raise ValueError(f"expected 'prompt' and 'completion' fields or 'messages', got fields {sorted(row)}")
    prompt, completion = row["prompt"], row["completion"]
    if isinstance(prompt, list) and isinstance(completion, list):
        prompt_turns = check_messages(prompt + [{"role": "assistant", "content": ""}])[:-1]
        return ChatExample(prompt_turns + check_messages(completion), trained_from=len(prompt_turns))
    if not isinstance(prompt, str) or not isinstance(completion, str):
        raise ValueError(f"'prompt' and 'completion' must both be str (or both message lists), got "
                         f"{type(prompt).__name__} and {type(completion).__name__}")
    if not completion.strip():
        raise ValueError("'completion' is empty")
    return SFTExample(prompt, completion)


def read_jsonl_examples(path: Path) -> list[Example]:
    """Examples of a JSONL file, one object a line (blank lines skipped); errors name the file and line."""
    return parse_jsonl(path, example_from_row, what="SFT examples")


def load_sft_examples(source: str | Path | Iterable[Mapping], split: str = "train", limit: int | None = None
                      ) -> list[Example]:
    """SFT examples from a JSONL file (`{"prompt", "completion"}` or `{"messages"}` rows), a folder written
    by `datasets.Dataset.save_to_disk`, a hub data set name (`split`), or any iterable of such rows (a
    `datasets.Dataset`). `limit`: the first rows only. Bad rows are one ValueError naming the row."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        if path.is_file():
            examples = read_jsonl_examples(path)
        elif path.suffix in (".jsonl", ".json"):
            raise ValueError(f"SFT data file not found: {path}")
        else:
            rows, name = _dataset_rows(path, str(source), split), f"{source} ({split})"
            examples = _rows_to_examples(rows, name, limit)
    else:
        examples = _rows_to_examples(source, type(source).__name__, limit)
    examples = examples[:limit] if limit is not None else examples
    if not examples:
        raise ValueError(f"no SFT examples in {source if isinstance(source, (str, Path)) else type(source).__name__}")
    return examples


def _rows_to_examples(rows: Iterable[Mapping], name: str, limit: int | None) -> list[Example]:
    examples = []
    for index, row in enumerate(rows):
        if limit is not None and index >= limit:
            break
        try:
            examples.append(example_from_row(row))
        except ValueError as err:
            raise ValueError(f"{name} row {index}: {err}") from None
    return examples


def _dataset_rows(path: Path, source: str, split: str):
    """A `datasets` data set: one saved on disk at `path`, else `source` from the hub; one-line errors."""
    try:
        import datasets
    except ImportError:
        raise ValueError(f"{source} is not a file, and the datasets package (to read it as a data set) is "
                         f"not installed") from None
    try:
        if path.is_dir() and ((path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()):
            loaded = datasets.load_from_disk(str(path))
            return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
        return datasets.load_dataset(source, split=split)
    except Exception as error:  # a missing file or split, no network, ...
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise ValueError(f"could not load SFT data {source!r} (split {split!r}): {reason}") from None


def _completion(steps: Iterable[str], mode: str) -> str:
    """Solution steps (without line breaks) as the completion of `mode`: single mode joins them with line
    breaks; stepwise mode ends each with the line break the stepwise env writes after it."""
    steps = [s.rstrip("\n") for s in steps]
    return "\n".join(steps) if mode == "single" else "".join(s + "\n" for s in steps)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")


def gsm8k_sft_examples(data_path: str | Path | None = None, subset: tuple[int, int] | None = None,
                       mode: str = "single", split: str = "train") -> list[SFTExample]:
    """GSM8K solutions as completions of the GSM8K env's prompts (its reset observation in `mode`): the
    answer's steps without calculator annotations, one a line, then "#### N" (`gsm8k_solution_steps`).
    `subset`: [start, stop) rows (None: all); `data_path` None reads the hub."""
    _check_mode(mode)
    env = GSM8KEnv(data_path, split, subset=subset, mode=mode)
    examples = []
    for index in range(env.num_problems):
        observation, _ = env.reset(options={"index": index})
        steps = gsm8k_solution_steps(str(env.get_problem(index).fields["answer"])).split("\n")
        examples.append(SFTExample(observation, _completion(steps, mode)))
    return examples


def arithmetic_sft_examples(level: int, split: str = "train", n: int | None = None, seed: int = 0,
                            mode: str = "single") -> list[SFTExample]:
    """Gold step-by-step solutions ("a op b = c" lines, then "#### N") of Arithmetic-v0 problems of `level`
    as completions of the env's prompts in `mode`: `n` problems drawn with `seed` (None: all, in order)."""
    _check_mode(mode)
    env = ArithmeticEnv(level, split, mode=mode)
    if n is None:
        indices = range(env.num_problems)
    elif isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer or None, got {n!r}")
    else:
        indices = sorted(random.Random(f"{seed}:L{level}:{split}").sample(range(env.num_problems),
                                                                         min(n, env.num_problems)))
    examples = []
    for index in indices:
        observation, _ = env.reset(options={"index": index})
        problem = env.get_problem(index)
        steps = problem_gold_steps(problem)
        examples.append(SFTExample(observation, _completion(steps, mode)))
    return examples


def split_examples(examples: list[Example], held_out_fraction: float, seed: int = 0
                   ) -> tuple[list[Example], list[Example]]:
    """(train, held out): a seeded `held_out_fraction` of the examples held out (at least one, when any is)."""
    if not 0 <= held_out_fraction < 1:
        raise ValueError(f"held_out_fraction must be in [0, 1), got {held_out_fraction!r}")
    order = random.Random(seed).sample(range(len(examples)), len(examples))
    count = min(len(examples) - 1, max(1, round(held_out_fraction * len(examples)))) if held_out_fraction else 0
    held = set(order[:count])
    return ([e for k, e in enumerate(examples) if k not in held], [e for k, e in enumerate(examples) if k in held])


def math_sft_examples(data_path: str | Path | None = None, subset: tuple[int, int] | None = None,
                      split: str = "test") -> list[SFTExample]:
    """MATH solutions (the rows' "solution" text, ending in \\boxed{answer}) as completions of the MATH env's
    prompts in single mode. `subset`: [start, stop) rows (None: all); `data_path` None reads the hub."""
    env = MATHEnv(data_path, split, subset=subset, mode="single")
    examples = []
    for index in range(env.num_problems):
        observation, _ = env.reset(options={"index": index})
        solution = env.get_problem(index).fields.get("solution")
        if not isinstance(solution, str) or not solution.strip():
            raise ValueError(f"MATH row {index} has no 'solution' text to train on")
        examples.append(SFTExample(observation, solution.strip()))
    return examples
