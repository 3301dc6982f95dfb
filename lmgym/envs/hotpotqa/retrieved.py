"""HotpotQA answered from the store's top ``k`` passages for the question itself: retrieval without an
agent. One scripted search with the question as the query, then the model answers (single turn), as
``HotpotQAEnv`` does with its distractor paragraphs.

The prompt is the passages exactly as ``RAGHotpotQAEnv``'s search tool shows them (``[1] Title\\ntext``,
cut to ``max_passage_chars``), then ``Question: ...`` and the answer instruction. Each episode's info
reports that search as the RAG env reports its own: ``retrieved`` (``search`` 1, ``query``, ``rank``,
``doc_id``, ``title``, ``text``, ``score``), ``tool_calls`` (``{"search": 1}``) and ``tool_log``, so
the same metrics read both envs. Rewards: ``em`` and ``f1`` (0.5 each), and ``mrr`` and
``support_recall`` of that search, logged with weight 0 (the model does not choose the search).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from lmgym.envs.base import Problem
from lmgym.envs.hotpotqa.data import HotpotQARecord
from lmgym.envs.hotpotqa.env import ANSWER_INSTRUCTION, HotpotQAEnv
from lmgym.envs.hotpotqa.rag import DEFAULT_MAX_PASSAGE_CHARS, SearchTool, open_store
from lmgym.envs.hotpotqa.rewards import exact_match_reward, f1_reward, mrr_reward, support_recall_reward
from lmgym.envs.rewards.functions import RewardFn

QUESTION_SEARCH_REWARD_FNS: dict[str, RewardFn] = {"em": exact_match_reward, "f1": f1_reward, "mrr": mrr_reward,
                                                   "support_recall": support_recall_reward}
QUESTION_SEARCH_REWARD_WEIGHTS = {"em": 0.5, "f1": 0.5, "mrr": 0.0, "support_recall": 0.0}


class QuestionSearchHotpotQAEnv(HotpotQAEnv):
    """HotpotQA questions, each answered from the store's top ``k`` passages for the question (see the
    module docstring).

    Args:
        data_path: the questions, as HotpotQAEnv takes them.
        split: as HotpotQAEnv's.
        store: a document store or a saved index's folder, as ``RAGHotpotQAEnv``'s; required.
        subset: as HotpotQAEnv's.
        records: as HotpotQAEnv's.
        k: passages per question, as ``lmgym.envs.hotpotqa.rag.SearchTool``'s.
        max_passage_chars: as ``lmgym.envs.hotpotqa.rag.SearchTool``'s.
        search_kwargs: as ``lmgym.envs.hotpotqa.rag.SearchTool``'s.
        instruction: appended to the question.
        reward_fns: None: em, f1, mrr and support_recall.
        reward_weights: None: 0.5, 0.5, 0 and 0.
        **base_kwargs: LanguageEnv's other keyword arguments.
    """

    shared_attributes: ClassVar[tuple[str, ...]] = ("_passages",)  # a cache of each question's search

    def __init__(self, data_path: str | Path | None = None, split: str = "validation", *, store: Any = None,
                 subset: tuple[int, int] | None = None, records: Sequence[HotpotQARecord] | None = None, k: int = 3,
                 max_passage_chars: int = DEFAULT_MAX_PASSAGE_CHARS, search_kwargs: Mapping[str, Any] | None = None,
                 instruction: str = ANSWER_INSTRUCTION, reward_fns: dict[str, RewardFn] | None = None,
                 reward_weights: dict[str, float] | None = None, **base_kwargs: Any):
        self.search_tool = SearchTool(open_store(store), k, max_passage_chars=max_passage_chars,
                                      search_kwargs=search_kwargs)
        if reward_fns is None:
            reward_fns, reward_weights = QUESTION_SEARCH_REWARD_FNS, reward_weights or QUESTION_SEARCH_REWARD_WEIGHTS
        super().__init__(data_path, split, subset=subset, records=records, instruction=instruction,
                         reward_fns=reward_fns, reward_weights=reward_weights, **base_kwargs)
        self._passages: dict[str, list[dict[str, Any]]] = {}

    @staticmethod
    def query(problem: Problem) -> str:
        """The one search of a question: the question itself."""
        return problem.question.strip()

    def passages(self, problem: Problem) -> list[dict[str, Any]]:
        """The store's top ``k`` passages for the question (searched once per question, then cached)."""
        if problem.problem_id not in self._passages:
            self._passages[problem.problem_id] = self.search_tool.retrieve(self.query(problem))
        return self._passages[problem.problem_id]

    def build_prompt(self, problem: Problem) -> str:
        """The passages found for the question, then the question and the instruction."""
        passages = self.search_tool.format_passages(self.passages(problem))
        return f"{passages}\n\nQuestion: {problem.question}{self.instruction}"

    def episode_info(self) -> dict[str, Any]:
        """HotpotQAEnv's keys and the scripted search: ``retrieved``, ``tool_calls``, ``tool_log``."""
        info = super().episode_info()
        if self._problem is None:
            return info
        query, passages = self.query(self._problem), self.passages(self._problem)
        retrieved = [{"search": 1, "query": query, "rank": rank, **passage}
                     for rank, passage in enumerate(passages, start=1)]
        log = [{"tool": self.search_tool.name, "argument": query, "output": self.search_tool.format_passages(passages)}]
        return {**info, "retrieved": retrieved, "tool_calls": {self.search_tool.name: 1}, "tool_log": log}
