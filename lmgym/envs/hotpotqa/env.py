"""HotpotQA as a single-turn env (``HotpotQA-v0``): closed book, or with the ten distractor paragraphs.

The model answers in ``<answer>...</answer>`` (generation stops at ``</answer>``); the answer is the text
of the last such tag, and a completion without one is unparseable (scored 0). ``is_correct`` is SQuAD's
exact match after normalisation (``lmgym.envs.hotpotqa.metrics``).

Rewards (``reward_fns``): by default ``{"em": exact_match_reward, "f1": f1_reward}`` with weights 0.5 each,
so the reward is in [0, 1], an exact answer scores 1 and a partly right one gets half its F1; both show in
``info["reward_components"]``. Pass ``reward_fns`` / ``reward_weights`` to change that.

Data: ``load_hotpotqa`` (``envs/hotpotqa/data.py``): a local file in either layout (the hub's JSONL or the
official JSON array), a folder of them, or the hub (``hotpot_qa``, distractor) when ``data_path`` is None;
or ``records`` built in code.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmgym.envs.base import LanguageEnv, Problem
from lmgym.envs.checks import check_choice
from lmgym.envs.hotpotqa.data import HotpotQARecord, load_hotpotqa
from lmgym.envs.hotpotqa.metrics import exact_match
from lmgym.envs.hotpotqa.rewards import exact_match_reward, f1_reward
from lmgym.envs.rewards.functions import RewardFn
from lmgym.envs.tool_env import ANSWER_CLOSE, last_answer

CONTEXTS = ("closed_book", "distractor")
ANSWER_INSTRUCTION = "\nAnswer with a short phrase (or yes/no) in <answer>...</answer>."
QA_REWARD_FNS: dict[str, RewardFn] = {"em": exact_match_reward, "f1": f1_reward}
QA_REWARD_WEIGHTS = {"em": 0.5, "f1": 0.5}


class HotpotQAProblems:
    """The problems of a HotpotQA env and how they are graded: one problem per record (question, gold
    answer, id; ``fields``: question, answer, type, level, supporting_titles), SQuAD exact match as
    ``is_correct``, and ``supporting_titles`` in every info. A mixin for LanguageEnv subclasses (listed
    before them), as ``ArithmeticProblems`` is."""

    def _use_records(self, records: Sequence[HotpotQARecord] | None, data_path: str | Path | None, split: str,
                     subset: tuple[int, int] | None) -> None:
        if records is None:
            records = load_hotpotqa(data_path, split, subset)
        elif data_path is not None or subset is not None:
            raise ValueError("pass either records or data_path/subset, not both")
        records = list(records)
        if not records or not all(isinstance(r, HotpotQARecord) for r in records):
            raise ValueError("records must be a non-empty list of HotpotQARecord")
        self.records = records
        self.record_by_id = {record.id: record for record in records}
        if len(self.record_by_id) < len(records):
            raise ValueError("records must have distinct ids; a question id appears twice")

    @property
    def num_problems(self) -> int:
        return len(self.records)

    def get_problem(self, index: int) -> Problem:
        record = self.records[index]
        fields = {"question": record.question, "answer": record.answer, "type": record.type, "level": record.level,
                  "supporting_titles": list(record.supporting_titles)}
        return Problem(record.question, record.answer, record.id, fields=fields)

    def supporting_titles(self) -> list[str]:
        """The supporting paragraphs' titles of the current episode's question ([] before a reset)."""
        return [] if self._problem is None else list(self._problem.fields["supporting_titles"])

    def is_correct(self, parsed_answer: str, problem: Problem) -> bool:
        """SQuAD exact match with the gold answer."""
        return exact_match(parsed_answer, problem.gold) == 1.0

    def episode_info(self) -> dict[str, Any]:
        """The next class's keys and ``supporting_titles`` of the question."""
        return {**super().episode_info(), "supporting_titles": self.supporting_titles()}


def format_paragraphs(paragraphs: Sequence[tuple[str, Sequence[str]]]) -> str:
    """Numbered, titled paragraphs: ``[1] Title\\nsentence sentence...`` separated by blank lines."""
    return "\n\n".join(f"[{n}] {title}\n{''.join(sentences).strip()}"
                       for n, (title, sentences) in enumerate(paragraphs, start=1))


class HotpotQAEnv(HotpotQAProblems, LanguageEnv):
    """Multi-hop questions of HotpotQA (single mode), closed book or with the distractor paragraphs.

    Args:
        data_path: a HotpotQA file (either layout) or a folder of them; None: the hub.
        split: the hub split (when ``data_path`` is None).
        subset: (start, stop) records to keep.
        records: HotpotQARecords to use instead of loading (not with data_path/subset).
        context: "closed_book" (the question only) or "distractor" (the record's ten titled paragraphs,
            the two supporting ones among them, before the question).
        instruction: appended to the question (default: answer in ``<answer>...</answer>``).
        reward_fns: default EM and F1 (see the module docstring).
        reward_weights: default 0.5 each.
        **base_kwargs: LanguageEnv's other keyword arguments (render_mode, max_action_chars, reward_timeout).
    """

    modes = ("single",)

    def __init__(self, data_path: str | Path | None = None, split: str = "validation", *,
                 subset: tuple[int, int] | None = None, records: Sequence[HotpotQARecord] | None = None,
                 context: str = "closed_book", instruction: str = ANSWER_INSTRUCTION,
                 reward_fns: dict[str, RewardFn] | None = None, reward_weights: dict[str, float] | None = None,
                 **base_kwargs: Any):
        check_choice("context", context, CONTEXTS)
        if reward_fns is None:
            reward_fns, reward_weights = QA_REWARD_FNS, reward_weights or QA_REWARD_WEIGHTS
        super().__init__(instruction=instruction, reward_fns=reward_fns, reward_weights=reward_weights,
                         **base_kwargs)
        self.context = context
        self._use_records(records, data_path, split, subset)

    def build_prompt(self, problem: Problem) -> str:
        """The question and the instruction; in distractor mode the titled paragraphs come first."""
        if self.context == "closed_book":
            return problem.question + self.instruction
        paragraphs = format_paragraphs(self.record_by_id[problem.problem_id].context)
        return f"{paragraphs}\n\nQuestion: {problem.question}{self.instruction}"

    @property
    def stop_strings(self) -> list[str]:
        """Generation stops at ``</answer>``."""
        return [ANSWER_CLOSE]

    def parse_answer(self, solution: str) -> str | None:
        """The text of the last complete ``<answer>...</answer>``, or None."""
        return last_answer(solution)
