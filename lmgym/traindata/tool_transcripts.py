"""Tool-use transcripts for SFT: HotpotQA questions answered through the RAG environment itself.

`tool_transcript(env, record)` plays one episode of `RAGHotpotQAEnv` (``RAG-HotpotQA-v0``) with scripted
actions, so each tool turn is the env's own observation (the store's real passages, formatted as the
model sees them in GRPO):

- hop 1: ``<search>QUESTION</search>``;
- hop 2, from the supporting titles not retrieved so far: a bridge question searches one, the second
  supporting title (the bridge entity) or, when hop 1 found that one, the other; a comparison question
  searches each of its entities (supporting titles), in order, skipping one already retrieved;
- then ``<answer>GOLD</answer>``.

Searches beyond the env's ``max_searches`` are dropped (hop 2's last ones first). The transcript is a
`ChatExample`: the reset observation as the "user" turn, each action an "assistant" turn and each result
a turn of the env's ``result_role`` ("tool" by default), after a "system" turn when ``system_prompt`` is
given (else the SFT policy's own system prompt is put first when it is encoded, as the GRPO engine does
when it prompts). The SFT encoder (`lmgym.algorithms.sft_tokens`) trains on the assistant turns only, so the
system and user prompt and the tool turns are masked.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lmgym.envs.hotpotqa.data import HotpotQARecord
from lmgym.envs.hotpotqa.rag import SEARCH_CLOSE, SEARCH_OPEN, RAGHotpotQAEnv
from lmgym.envs.tool_env import ANSWER_CLOSE, ANSWER_OPEN
from lmgym.traindata.sft_data import ChatExample

QUESTION_TYPES = ("bridge", "comparison")


@dataclass(frozen=True)
class ToolTranscript:
    """One scripted episode: its chat example, the searches it ran and the titles they retrieved."""

    record_id: str
    type: str
    example: ChatExample
    queries: tuple[str, ...]
    supporting_titles: tuple[str, ...]
    retrieved_titles: tuple[str, ...]  # distinct, in the order first retrieved

    @property
    def found_all(self) -> bool:
        """Whether every supporting title was among the retrieved passages."""
        return set(self.supporting_titles) <= set(self.retrieved_titles)

    def to_row(self) -> dict[str, Any]:
        """A JSONL row `lmgym.traindata.load_sft_examples` reads (``messages``) with the transcript's facts."""
        return {"messages": [dict(m) for m in self.example.messages], "id": self.record_id, "type": self.type,
                "queries": list(self.queries), "supporting_titles": list(self.supporting_titles),
                "retrieved_titles": list(self.retrieved_titles)}


def hop2_queries(question_type: str, supporting_titles: Sequence[str], retrieved: Iterable[str]) -> list[str]:
    """The hop-2 searches after hop 1 retrieved the titles `retrieved` (see the module docstring)."""
    if question_type not in QUESTION_TYPES:
        raise ValueError(f"question type must be one of {', '.join(QUESTION_TYPES)}; got {question_type!r}")
    found = set(retrieved)
    missing = [title for title in dict.fromkeys(supporting_titles) if title not in found]
    if question_type == "comparison" or not missing:
        return missing
    second = supporting_titles[1] if len(supporting_titles) > 1 else None
    return [second if second in missing else missing[0]]


def tool_transcript(env: RAGHotpotQAEnv, record: HotpotQARecord, system_prompt: str | None = None
                    ) -> ToolTranscript:
    """The scripted episode of `record`, one of `env`'s questions, played through `env` (reset, then one
    `step` per action), after a system turn holding `system_prompt` when given. ValueError (one line) when
    the env cannot give a chat transcript (raw results), the record is not the env's, or the env refuses
    an action or ends the episode before the answer."""
    if not isinstance(env, RAGHotpotQAEnv):
        raise ValueError(f"env must be a RAGHotpotQAEnv (RAG-HotpotQA-v0); got {type(env).__name__}")
    if env.result_role is None:
        raise ValueError("the env writes search results as raw text (result_role None); a chat transcript "
                         "needs them as turns: make it with result_role 'tool' (the default) or 'user'")
    index = next((i for i, r in enumerate(env.records) if r.id == record.id), None)
    if index is None or env.records[index] != record:
        raise ValueError(f"question {record.id!r} is not one of the env's; make the env with records holding it")
    observation, _ = env.reset(options={"index": index})
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    episode = _Episode(env, record.id, system + [{"role": "user", "content": observation}])
    episode.search(record.question.strip())
    for query in hop2_queries(record.type, record.supporting_titles, episode.titles)[: env.max_searches - 1]:
        if query not in episode.titles:  # a comparison's second entity may come with the first one's search
            episode.search(query)
    episode.answer(record.answer)
    return ToolTranscript(record.id, record.type, ChatExample(tuple(episode.messages)), tuple(episode.queries),
                          record.supporting_titles, tuple(dict.fromkeys(episode.titles)))


def tool_transcripts(env: RAGHotpotQAEnv, records: Iterable[HotpotQARecord] | None = None,
                     system_prompt: str | None = None) -> Iterator[ToolTranscript]:
    """`tool_transcript` of each record (default: every question of the env, in order)."""
    for record in env.records if records is None else records:
        yield tool_transcript(env, record, system_prompt)


class _Episode:
    """The messages, queries and retrieved titles of a scripted episode in progress."""

    def __init__(self, env: RAGHotpotQAEnv, record_id: str, messages: list[dict[str, str]]):
        self.env, self.record_id, self.messages = env, record_id, messages
        self.queries: list[str] = []
        self.titles: list[str] = []

    def search(self, query: str) -> None:
        info = self._act(f"{SEARCH_OPEN}{query}{SEARCH_CLOSE}", final=False)
        if info.get("format_violations") or info.get("tool_errors"):
            problem = (info.get("format_violations") or [e["error"] for e in info["tool_errors"]])[-1]
            raise ValueError(f"question {self.record_id!r}: the env did not run the search {query[:80]!r} "
                             f"({problem})")
        self.queries.append(query)
        self.titles.extend(passage["title"] for passage in info["retrieved"])
        self.messages.append({"role": info["injected_role"], "content": info["injected_text"]})

    def answer(self, gold: str) -> None:
        self._act(f"{ANSWER_OPEN}{gold}{ANSWER_CLOSE}", final=True)

    def _act(self, action: str, final: bool) -> dict[str, Any]:
        _, _, terminated, truncated, info = self.env.step(action)
        self.messages.append({"role": "assistant", "content": action})
        if terminated != final or truncated:
            what = "did not end at the answer" if final else "ended before the answer"
            raise ValueError(f"question {self.record_id!r}: the episode {what} (max_steps {self.env.max_steps}, "
                             f"action {action[:80]!r})")
        return info
