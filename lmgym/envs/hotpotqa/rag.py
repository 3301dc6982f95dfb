"""Retrieval-augmented HotpotQA (``RAG-HotpotQA-v0``): the model searches a document store, then answers.

An episode (mode "multi_turn", a ToolEnv) starts from the question. An action that ends in
``<search>QUERY</search>`` (generation stops at ``</search>``) is answered with the store's top ``k``
passages for QUERY, numbered and titled, ``<result>[1] Title\\ntext\\n\\n[2] ...</result>``, as a tool turn
(``result_role="tool"``; None appends it as raw text); the engine masks it out of the loss. The model may
search ``max_searches`` times. The episode ends (terminated) at a complete ``<answer>...</answer>``, graded
by SQuAD exact match (``is_correct``), or is truncated after ``max_steps`` actions (default
``max_searches + 2``). Stop strings: ``</search>`` and ``</answer>``, on every turn.

Malformed calls never run a search and never raise. Each action has at most one violation, the first
that applies, answered with an ``<result>error: ...</result>`` turn and recorded in the episode's
``format_violations``:

- "search_after_cap": a search once ``max_searches`` have run;
- "unopened_tag": ``</search>`` with no ``<search>`` before it;
- "nested_tags": a ``<search>`` opened inside another, or tags (``</search>``, ``<answer>``, ``</answer>``)
  inside the query;
- "empty_query": a blank query;
- "query_too_long": a query over ``max_query_chars`` characters (an action over ``max_action_chars``,
  20,000 by default, is cut first, and a cut call is "unclosed_tag");
- "unclosed_tag": an action that ends without a call or an answer but opens ``<search>`` or ``<answer>``
  without closing it.

The episode's format penalty is ``format_penalty`` (default 0.5) times its number of violations;
``format_reward`` subtracts it.

Episode state (``get_state``/``set_state`` round-trip it): ToolEnv's ``tool_calls``/``tool_log``,
``retrieved`` (every passage of every search, in order: ``search`` number, ``query``, ``rank``, ``doc_id``,
``title``, ``text``, ``score``) and ``format_violations``. Every step's info and the reward functions'
info carry them with ``format_penalty`` and ``supporting_titles``.

Rewards (``reward_fns``): by default ``em``, ``f1``, ``mrr``, ``support_recall``, ``redundant_search``,
``format``, ``strict_format`` and, with an embedder (the ``embedder`` argument, else the store's
``embedder`` attribute), ``answer_similarity``, all in ``envs/hotpotqa/rewards.py``, with equal weights that
sum to 1 (``rag_reward_weights`` gives ``DEFAULT_WEIGHTS``, which examples/rag_grpo.py and
examples/rag_agent.py use); each shows in ``info["reward_components"]``.

The store is anything with ``search(query, k, **search_kwargs)`` returning hits with ``doc_id``,
``title``, ``text`` and ``score`` (``lmgym.retrieval.DocumentStore``), or the folder of a saved index, opened
with ``lmgym.retrieval.DocumentStore.load``. A store that also has ``search_batch(queries, k, **search_kwargs)``
(``DocumentStore``'s) searches for all of an engine batch's branches at once: ``prepare_steps`` (ToolEnv's) gives
the search tool every well-formed query of the batch, each distinct query is searched once in one
``search_batch`` call, and each branch's step reads its hits, the hits its own search would return.
``search_kwargs`` the store cannot run (e.g. method "dense" on a BM25-only index) are refused when the env
is made, in one line naming the method and what the store has.
A search that fails anyway is an ``error: search failed (...)`` result the model sees, and is recorded in
the episode's ``tool_errors``, which trainers count (``tool_errors``, ``tool_error_rate``) and warn about
once a run.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from lmgym.core import messages
from lmgym.core.extras import require_extra
from lmgym.envs.checks import check_positive_int
from lmgym.envs.hotpotqa.data import HotpotQARecord
from lmgym.envs.hotpotqa.env import HotpotQAProblems, format_paragraphs
from lmgym.envs.hotpotqa.rewards import (
    DEFAULT_WEIGHTS,
    SEARCH_CLOSE,
    SEARCH_OPEN,
    Embedder,
    answer_similarity_reward,
    exact_match_reward,
    f1_reward,
    format_reward,
    mrr_reward,
    redundant_search_reward,
    strict_format_reward,
    support_recall_reward,
)
from lmgym.envs.rewards.functions import RewardFn
from lmgym.envs.tool_env import ANSWER_CLOSE, ANSWER_OPEN, ToolEnv
from lmgym.envs.tools import TagTool, ToolCall
from lmgym.retrieval import DocumentStore

DEFAULT_MAX_QUERY_CHARS = 500
DEFAULT_MAX_PASSAGE_CHARS = 1000
DEFAULT_FORMAT_PENALTY = 0.5
RAG_INSTRUCTION = ("\nSearch the documents with <search>QUERY</search> (at most {max_searches} searches; each "
                   "returns the top {k} passages). Then give the answer, a short phrase (or yes/no), as "
                   "<answer>...</answer>.")
VIOLATION_MESSAGES = {
    "search_after_cap": "no searches left; give the final answer as <answer>...</answer>",
    "unopened_tag": "</search> without <search>; write <search>QUERY</search>",
    "nested_tags": "nested tags; write one <search>QUERY</search> with plain text inside",
    "empty_query": "empty query; write <search>QUERY</search>",
    "query_too_long": "query too long; write a short <search>QUERY</search>",
    "unclosed_tag": "unclosed tag; write <search>QUERY</search> or <answer>...</answer>",
}


class SearchTool(TagTool):
    """``<search>QUERY</search>``: the top ``k`` passages of ``store`` for QUERY, titled and numbered.

    Args:
        store: an object with ``search(query, k, **search_kwargs)`` returning hits with ``doc_id``,
            ``title``, ``text`` and ``score``; optionally ``search_batch`` too (see ``prepare_calls``).
        k: passages per search.
        max_query_chars: longer queries are refused.
        max_passage_chars: each passage's text is cut to this many characters in the output.
        search_kwargs: passed to ``store.search`` (e.g. ``{"method": "bm25"}``).
    """

    def __init__(self, store: Any, k: int = 3, *, max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
                 max_passage_chars: int = DEFAULT_MAX_PASSAGE_CHARS, search_kwargs: Mapping[str, Any] | None = None):
        if not callable(getattr(store, "search", None)):
            raise ValueError(f"store must have a search(query, k) method; got {type(store).__name__}")
        check_positive_int("k", k)
        check_positive_int("max_query_chars", max_query_chars)
        check_positive_int("max_passage_chars", max_passage_chars)
        if not isinstance(search_kwargs, (Mapping, type(None))):
            raise ValueError(f"search_kwargs must be a dict of store.search keyword arguments; got {search_kwargs!r}")
        check_search_settings(store, k, dict(search_kwargs or {}))
        super().__init__("search", f"the top {k} passages (title and text) for QUERY", argument_name="QUERY",
                         max_input_chars=max_query_chars, max_nesting=max_query_chars, cpu_seconds=None,
                         max_output_chars=k * (max_passage_chars + 1000))
        self.store, self.k, self.max_passage_chars = store, k, max_passage_chars
        self.search_kwargs = dict(search_kwargs or {})
        self._prepared: dict[tuple[str, int, str], list[dict[str, Any]]] = {}  # prepare_calls' hits, by search

    def check_call(self, text: str) -> tuple[str | None, str | None]:
        """For text ending in ``</search>`` (trailing white space allowed): (the stripped query, None), or
        (the query or None, the violation: "unopened_tag", "nested_tags", "empty_query", "query_too_long")."""
        body = text.rstrip()
        end = len(body) - len(SEARCH_CLOSE)
        start = body.rfind(SEARCH_OPEN, 0, end) if body.endswith(SEARCH_CLOSE) else -1
        if start < 0:
            return None, "unopened_tag"
        query, before = body[start + len(SEARCH_OPEN) : end], body[:start]
        if len(query) > self.max_input_chars:
            return None, "query_too_long"
        if before.rfind(SEARCH_OPEN) > before.rfind(SEARCH_CLOSE) or any(
                tag in query for tag in (SEARCH_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)):
            return query, "nested_tags"
        if not query.strip():
            return query, "empty_query"
        return query.strip(), None

    def parse(self, text: str) -> ToolCall | None:
        """The well-formed search call ``text`` ends with, or None (see ``check_call``)."""
        if not isinstance(text, str):
            return None
        query, violation = self.check_call(text)
        return ToolCall(self.name, query) if violation is None and query is not None else None

    def retrieve(self, query: str) -> list[dict[str, Any]]:
        """The store's top ``k`` hits for ``query`` as dicts: doc_id, title, text, score (those that
        ``prepare_calls`` found for it, if it did, else one search now)."""
        prepared = self._prepared.get(self._search_key(query))
        if prepared is not None:
            return [dict(passage) for passage in prepared]
        return self._passages(self.store.search(query, self.k, **self.search_kwargs))

    def prepare_calls(self, calls: Sequence[ToolCall]) -> None:
        """Search the queries of ``calls`` (every branch's next search) at once, each distinct query once, with
        the store's ``search_batch(queries, k, **search_kwargs)`` (one list of hits per query, as ``search``
        returns them), and keep the hits for ``retrieve`` until the next call; ``[]`` drops them. Nothing is
        kept from a store without ``search_batch`` or a batch that fails: each call then searches (and fails)
        on its own, as without this."""
        self._prepared = {}
        search_batch = getattr(self.store, "search_batch", None)
        queries = list(dict.fromkeys(call.argument for call in calls if call.tool == self.name))
        if not queries or not callable(search_batch):
            return
        try:
            found = [self._passages(hits) for hits in search_batch(queries, self.k, **self.search_kwargs)]
        except Exception:  # noqa: BLE001 - each step's own search reports the failure, as it would unbatched
            return
        if len(found) == len(queries):
            self._prepared = {self._search_key(query): passages for query, passages in zip(queries, found)}

    def _search_key(self, query: str) -> tuple[str, int, str]:
        """What a search's hits depend on: the query, ``k`` and the store's keyword arguments."""
        return query, self.k, repr(sorted(self.search_kwargs.items()))

    def _passages(self, hits: Any) -> list[dict[str, Any]]:
        return [{"doc_id": str(hit.doc_id), "title": str(hit.title), "text": str(hit.text), "score": float(hit.score)}
                for hit in list(hits)[: self.k]]

    def format_passages(self, passages: Sequence[Mapping[str, Any]]) -> str:
        """``[1] Title\\ntext`` per passage (text cut to ``max_passage_chars``), blank lines between."""
        if not passages:
            return "no passages found"
        return format_paragraphs([(p["title"], [p["text"][: self.max_passage_chars]]) for p in passages])

    def run(self, argument: str) -> str:
        """The formatted top passages for the query ``argument``."""
        return self.format_passages(self.retrieve(argument))


def check_search_settings(store: Any, k: int, search_kwargs: dict[str, Any]) -> None:
    """A one-line ValueError, at construction, when ``store.search(query, k, **search_kwargs)`` could never
    run: the store's own ``check_search`` (``lmgym.retrieval.DocumentStore``'s: a method it has no index for, an
    unknown method or fusion), else keyword arguments its ``search`` does not take. Otherwise every search
    of every episode would fail, each seen by the model as an error result."""
    check = getattr(store, "check_search", None)
    if callable(check):
        try:
            check(k, **search_kwargs)
        except (TypeError, ValueError) as error:
            raise ValueError(f"search_kwargs {search_kwargs!r} do not fit the store: {one_line(error)}") from None
        return
    try:
        inspect.signature(store.search).bind("query", k, **search_kwargs)
    except TypeError as error:
        raise ValueError(f"search_kwargs {search_kwargs!r} do not fit {type(store).__name__}.search: "
                         f"{one_line(error)}") from None
    except ValueError:  # no signature to read (a builtin): its first search tells
        return


def one_line(error: BaseException) -> str:
    """An exception's message on one line (white space collapsed, at most 300 characters)."""
    return messages.one_line(str(error))[:300] or type(error).__name__


def open_store(store: Any) -> Any:
    """``store`` itself (an object with ``search``), or the index saved in the folder ``store`` (a path)."""
    if isinstance(store, (str, os.PathLike)):
        require_extra("bm25s", "RAG")  # a saved index is read with bm25s, of the [rag] extra
        return DocumentStore.load(store)
    if not callable(getattr(store, "search", None)):
        raise ValueError(f"store must be a document store (an object with search(query, k), e.g. "
                         f"lmgym.retrieval.DocumentStore) or the folder of a saved index; got {store!r}")
    return store


def unclosed_tag(text: str) -> bool:
    """Whether ``text`` opens ``<search>`` or ``<answer>`` after the last closing tag of the same kind."""
    return any(text.rfind(opening) > text.rfind(closing)
               for opening, closing in ((SEARCH_OPEN, SEARCH_CLOSE), (ANSWER_OPEN, ANSWER_CLOSE)))


def rag_reward_fns(embedder: Embedder | None) -> dict[str, RewardFn]:
    """The default rewards: em, f1, mrr, support_recall, redundant_search, format, strict_format, and
    answer_similarity when there is an embedder (each in ``envs/hotpotqa/rewards.py``)."""
    fns: dict[str, RewardFn] = {"em": exact_match_reward, "f1": f1_reward, "mrr": mrr_reward,
                                "support_recall": support_recall_reward, "redundant_search": redundant_search_reward,
                                "format": format_reward, "strict_format": strict_format_reward}
    if embedder is not None:
        fns["answer_similarity"] = answer_similarity_reward(embedder)
    return fns


def rag_reward_weights(embedder: Embedder | None) -> dict[str, float]:
    """``lmgym.envs.hotpotqa.rewards.DEFAULT_WEIGHTS`` (answering pays more than finding paragraphs) for the default
    rewards ``rag_reward_fns(embedder)`` (answer_similarity only with an embedder)."""
    names = rag_reward_fns(embedder)
    return {name: weight for name, weight in DEFAULT_WEIGHTS.items() if name in names}


class RAGHotpotQAEnv(HotpotQAProblems, ToolEnv):
    """HotpotQA questions answered by searching a document store (see the module docstring).

    Args:
        data_path: the questions, as HotpotQAEnv takes them.
        split: as HotpotQAEnv's.
        store: a document store (``search(query, k, ...)``) or the folder of a saved index; required.
        subset: as HotpotQAEnv's.
        records: as HotpotQAEnv's.
        k: passages per search.
        max_searches: searches per episode.
        max_steps: actions per episode; None: ``max_searches + 2``.
        format_penalty: subtracted from the format reward per malformed call (>= 0).
        max_query_chars: as SearchTool's.
        max_passage_chars: as SearchTool's.
        search_kwargs: as SearchTool's.
        embedder: for the answer-similarity reward (``embed(texts) -> array``); None: the store's
            ``embedder`` attribute if it has one, else no answer-similarity reward.
        result_role: "tool" (default), "user" or None (passages as raw text).
        instruction: appended to the question; None: ``RAG_INSTRUCTION`` filled in.
        reward_fns: None: ``rag_reward_fns``.
        reward_weights: None: equal weights summing to 1.
        **tool_kwargs: ToolEnv's and LanguageEnv's other keyword arguments (nudge, mode, render_mode,
            max_action_chars, reward_timeout).
    """

    episode_state: ClassVar[dict[str, Any]] = {"retrieved": [], "format_violations": []}

    def __init__(self, data_path: str | Path | None = None, split: str = "validation", *, store: Any = None,
                 subset: tuple[int, int] | None = None, records: Sequence[HotpotQARecord] | None = None, k: int = 3,
                 max_searches: int = 3, max_steps: int | None = None, format_penalty: float = DEFAULT_FORMAT_PENALTY,
                 max_query_chars: int = DEFAULT_MAX_QUERY_CHARS, max_passage_chars: int = DEFAULT_MAX_PASSAGE_CHARS,
                 search_kwargs: Mapping[str, Any] | None = None, embedder: Embedder | None = None,
                 result_role: str | None = "tool", instruction: str | None = None,
                 reward_fns: dict[str, RewardFn] | None = None, reward_weights: dict[str, float] | None = None,
                 **tool_kwargs: Any):
        check_positive_int("max_searches", max_searches)
        max_steps = max_searches + 2 if max_steps is None else max_steps
        if isinstance(format_penalty, bool) or not isinstance(format_penalty, (int, float)) or not (
                math.isfinite(format_penalty) and format_penalty >= 0):
            raise ValueError(f"format_penalty must be a finite number >= 0; got {format_penalty!r}")
        self.search_tool = SearchTool(open_store(store), k, max_query_chars=max_query_chars,
                                      max_passage_chars=max_passage_chars, search_kwargs=search_kwargs)
        if reward_fns is None:
            reward_fns = rag_reward_fns(embedder or getattr(self.search_tool.store, "embedder", None))
            reward_weights = reward_weights or dict.fromkeys(reward_fns, 1.0 / len(reward_fns))
        if instruction is None:
            instruction = RAG_INSTRUCTION.format(max_searches=max_searches, k=k)
        super().__init__([self.search_tool], max_tool_calls=max_searches, result_role=result_role,
                         instruction=instruction, max_steps=max_steps, reward_fns=reward_fns,
                         reward_weights=reward_weights, **tool_kwargs)
        self.max_searches, self.format_penalty = max_searches, float(format_penalty)
        self._use_records(records, data_path, split, subset)

    @property
    def stop_strings(self) -> list[str]:
        """``</search>`` and ``</answer>``, on every turn (a search after the cap is answered with an error)."""
        return [SEARCH_CLOSE, ANSWER_CLOSE]

    def respond(self, action: str, final: bool) -> tuple[str, str | None]:
        """The passages for a well-formed search; an error turn for a malformed call (recorded); nothing
        after the final answer; otherwise ToolEnv's line break or nudge."""
        if final:
            return "", None
        if self.called_tool(action) is None:
            return self._refuse("unclosed_tag", None) if unclosed_tag(action) else super().respond(action, final)
        if self.search_tool not in self.available_tools():
            return self._refuse("search_after_cap", None)
        query, violation = self.search_tool.check_call(action)
        if violation is not None:
            return self._refuse(violation, query)
        return self._search(query)

    def episode_info(self) -> dict[str, Any]:
        """ToolEnv's keys, ``supporting_titles``, ``retrieved``, ``format_violations``, ``format_penalty``."""
        return {**super().episode_info(), "retrieved": [dict(p) for p in self.retrieved],
                "format_violations": list(self.format_violations),
                "format_penalty": self.format_penalty * len(self.format_violations)}

    def _search(self, query: str) -> tuple[str, str | None]:
        number = self.tool_calls.get(self.search_tool.name, 0) + 1
        try:
            passages = self.search_tool.retrieve(query)
            output = self.search_tool.format_passages(passages)
        except Exception as error:  # noqa: BLE001 - a failing store is an output the model sees, not a crash
            passages, output = [], f"error: search failed ({type(error).__name__})"
            self.record_tool_error(self.search_tool, error)  # counted in the trainer's metrics, warned about
        self.tool_calls[self.search_tool.name] = number
        self.tool_log.append({"tool": self.search_tool.name, "argument": query, "output": output})
        self.retrieved.extend({"search": number, "query": query, "rank": rank, **passage}
                              for rank, passage in enumerate(passages, start=1))
        return self.search_tool.result_text(output), self.result_role

    def _refuse(self, violation: str, query: str | None) -> tuple[str, str | None]:
        output = f"error: {VIOLATION_MESSAGES[violation]}"
        self.format_violations.append(violation)
        if violation != "unclosed_tag":  # the others are (malformed) calls of the tool
            self.tool_log.append({"tool": self.search_tool.name, "argument": query, "output": output})
        return self.search_tool.result_text(output), self.result_role
