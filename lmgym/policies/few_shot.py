"""`FewShotStepwisePolicy`: seed 002's few-shot stepwise math policy on top of `HFPolicy`.

The prompt is a system message (read from a file), then `n_few_shot` worked GSM8K examples as
user/assistant turns, then the real question::

    system:    <stepwise_solver_sys.txt>
    user:      <example question><suffix>        \\
    assistant: <one step per line ... #### n>     / x n_few_shot
    user:      <observation>                      (the env's reset observation)
    assistant: ...                                (the model writes its steps here, one per env step)

Each example is written exactly as a solved episode of the stepwise env looks: the question, the
env's instruction and a newline (`suffix`), then one step per line ending with "#### n". GSM8K's
`<<48/2=24>>` calculator annotations are dropped, or kept when the env runs with `sym_calc=True`
(`keep_annotations`), so the examples show the notation the env understands.

Examples are chosen deterministically: a fixed seeded order over the pool, taking the first
`n_few_shot` whose question is not the one being asked (so evaluation on the pool's own file never
shows the model its answer). Tokenizers without a chat template get the same layout as plain text.
"""
from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from lmgym.envs.data import read_jsonl, resolve_data_file
from lmgym.envs.math import GSM8K_INSTRUCTION
from lmgym.policies.hf import HFPolicy
from lmgym.policies.loading.models import EMBEDDED_MODEL

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"
DEFAULT_SYSTEM_PROMPT_PATH = PROMPTS_DIR / "stepwise_solver_sys.txt"

_ANNOTATION_RE = re.compile(r"<<[^<>]*>>")


class PromptFileNotFoundError(FileNotFoundError):
    """A system prompt file does not exist (the message names the path)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else super().__str__()


def read_system_prompt(path: str | Path) -> str:
    """The text of a system prompt file, stripped; a one-line error if it is missing or empty."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise PromptFileNotFoundError(f"system prompt file not found: {file}")
    text = file.read_text(encoding="utf-8").strip()
    if not text:
        raise ValueError(f"system prompt file is empty: {file}")
    return text


def gsm8k_solution_steps(answer: str, keep_annotations: bool = False) -> str:
    """A GSM8K answer as one step per line ending with "#### n".

    `<<48/2=24>>` calculator annotations are removed unless `keep_annotations` (use it with
    `sym_calc=True` envs). Blank lines and surrounding spaces are dropped.
    """
    if "####" not in answer:
        raise ValueError("answer has no '#### <number>' line")
    body, final = answer.rsplit("####", 1)
    final = final.strip()
    if not final:
        raise ValueError("answer has nothing after '####'")
    steps = []
    for line in body.splitlines():
        if not keep_annotations:
            line = _ANNOTATION_RE.sub("", line)
        line = " ".join(line.split())
        if line:
            steps.append(line)
    return "\n".join(steps + [f"#### {final}"])


def _normalize(text: str) -> str:
    return " ".join(text.split()).casefold()


def default_question_suffix() -> str:
    """What the stepwise GSM8K env writes after a question: its default instruction and a newline."""
    return GSM8K_INSTRUCTION if GSM8K_INSTRUCTION.endswith("\n") else GSM8K_INSTRUCTION + "\n"


def load_examples(source: str | Path | Sequence[Mapping]) -> tuple[list[dict], str]:
    """(rows with "question" and "answer", a description of the source for error messages)."""
    if isinstance(source, (str, Path)):
        path = resolve_data_file(source, "train")
        return read_jsonl(path, ("question", "answer"), what="examples"), str(path)
    if not isinstance(source, Sequence):
        raise ValueError(f"examples must be a JSONL path or a list of {{'question', 'answer'}} dicts; "
                         f"got {type(source).__name__}")
    rows = []
    for index, row in enumerate(source):
        if not isinstance(row, Mapping) or row.get("question") is None or row.get("answer") is None:
            raise ValueError(f"examples[{index}] must be a dict with 'question' and 'answer'")
        rows.append(dict(row))
    return rows, "the examples list"


class FewShotStepwisePolicy(HFPolicy):
    """An `HFPolicy` whose prompt carries a system prompt file and `n_few_shot` solved examples.

    Args:
        model: as for `HFPolicy` (a name/path, or a model object).
        tokenizer: as for `HFPolicy` (the model object's tokenizer).
        system_prompt_path: file holding the system prompt (default lmgym/prompts/stepwise_solver_sys.txt);
            None: no system message.
        examples: the pool of worked examples: a GSM8K-format JSONL path (a folder means its train.jsonl)
            or a list of {"question", "answer"} dicts. Needed when `n_few_shot > 0`.
        n_few_shot: examples per prompt (0: system prompt and question only).
        seed: fixes which examples are used (a seeded order over the pool).
        keep_annotations: keep GSM8K's `<<a*b=c>>` calculator annotations (match the env's `sym_calc`).
        question_suffix: text after each example question; default: the GSM8K env's instruction and
            a newline, i.e. what the stepwise env's reset observation ends with.
        **hf_kwargs: passed to `HFPolicy` (device, dtype, lora, use_chat_template, ...).
    """

    def __init__(
        self,
        model=EMBEDDED_MODEL,
        tokenizer=None,
        *,
        system_prompt_path: str | Path | None = DEFAULT_SYSTEM_PROMPT_PATH,
        examples: str | Path | Sequence[Mapping] | None = None,
        n_few_shot: int = 4,
        seed: int = 0,
        keep_annotations: bool = False,
        question_suffix: str | None = None,
        **hf_kwargs,
    ):
        # everything cheap is checked before the model is loaded
        if isinstance(n_few_shot, bool) or not isinstance(n_few_shot, int) or n_few_shot < 0:
            raise ValueError(f"n_few_shot must be an int >= 0; got {n_few_shot!r}")
        system_prompt = read_system_prompt(system_prompt_path) if system_prompt_path is not None else None
        pool: list[dict] = []
        source = "no examples"
        if examples is not None:
            pool, source = load_examples(examples)
        if n_few_shot > len(pool):
            where = f"{len(pool)} in {source}" if examples is not None else "none were given (pass examples=...)"
            raise ValueError(f"n_few_shot={n_few_shot} examples asked for, but {where}")
        for index, row in enumerate(pool):
            if not str(row["question"]).strip():
                raise ValueError(f"{source}: example {index} has an empty question")
        super().__init__(model, tokenizer, system_prompt=system_prompt, **hf_kwargs)
        self.system_prompt_path = str(system_prompt_path) if system_prompt_path is not None else None
        self.n_few_shot = n_few_shot
        self.seed = seed
        self.keep_annotations = bool(keep_annotations)
        self.question_suffix = default_question_suffix() if question_suffix is None else question_suffix
        self.examples_source = source
        self._questions = [str(row["question"]).strip() for row in pool]
        self._answers = [str(row["answer"]) for row in pool]
        self._normalized = [_normalize(q) for q in self._questions]
        self._solutions: dict[int, str] = {}
        self._order = list(range(len(pool)))
        random.Random(seed).shuffle(self._order)

    # ------------------------------------------------------------------ examples
    def select_examples(self, observation: str) -> list[tuple[str, str]]:
        """The (question, solution) pairs shown before `observation`: the first `n_few_shot` of the
        seeded order whose question does not occur in the observation."""
        if self.n_few_shot == 0:
            return []
        asked = _normalize(observation)
        chosen: list[int] = []
        for index in self._order:
            if self._normalized[index] in asked:
                continue  # never show the model the problem it is asked
            chosen.append(index)
            if len(chosen) == self.n_few_shot:
                break
        if len(chosen) < self.n_few_shot:
            raise ValueError(f"n_few_shot={self.n_few_shot}: only {len(chosen)} examples in {self.examples_source} "
                             f"differ from the question asked")
        return [(self._questions[i], self._solution(i)) for i in chosen]

    def _solution(self, index: int) -> str:
        if index not in self._solutions:
            try:
                self._solutions[index] = gsm8k_solution_steps(self._answers[index], self.keep_annotations)
            except ValueError as err:
                raise ValueError(f"{self.examples_source}: example {index}: {err}") from None
        return self._solutions[index]

    # ------------------------------------------------------------------ prompting
    def build_messages(self, observation: str) -> list[dict[str, str]]:
        """Chat messages: system prompt, the examples as user/assistant turns, the observation."""
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        for question, solution in self.select_examples(observation):
            messages.append({"role": "user", "content": question + self.question_suffix})
            messages.append({"role": "assistant", "content": solution})
        messages.append({"role": "user", "content": observation})
        return messages

    def prompt_text(self, observation: str) -> str:
        """The full prompt as text (chat template applied, or plain text when the tokenizer has none)."""
        messages = self.build_messages(observation)
        if self.use_chat_template:
            return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        # plain text: each example reads like a finished episode of the stepwise env
        parts = []
        for message in messages:
            if message["role"] == "user":
                parts.append(message["content"])
            else:  # system prompt, or an example's solution (closing that example)
                parts.append(message["content"] + "\n\n")
        return "".join(parts)

    def format_prompt(self, observation: str) -> list[int]:
        text = self.prompt_text(observation)
        if self.use_chat_template:
            return self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return self.tokenizer(text)["input_ids"]
