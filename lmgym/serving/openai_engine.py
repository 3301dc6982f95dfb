"""What the OpenAI routes ask of the model, as batches: many requests' prompts in one `policy.sample` call, and
many questions' searches in one `run_search` call.

Sampling: every request of a batch shares the temperature and top_p (the batch key); each choice samples with
its own `RowKeys` key (from the request's seed, or a random one), so what a request gets does not depend on
which requests share its batch. The call runs to the batch's largest max_tokens and each choice is cut to its
own: a choice's first k tokens are the same whatever the limit, so a cut choice equals one sampled with
max_tokens k (finish_reason "length"). Stop strings are per row; OpenAI's convention drops the matched stop
string from the text.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lmgym.envs.questions import QuestionsEnv
from lmgym.policies.decoding.generation import Generation, RowKeys, row_key
from lmgym.search import SearchSettings, run_search
from lmgym.search.methods import search_method
from lmgym.search.search_types import SearchResult
from lmgym.serving.limits import ComputeTimeout, TimedPolicy, TimedScorer, ending_rows


@dataclass(frozen=True)
class SampleJob:
    """One prompt of a request: `n` choices of at most `max_tokens` tokens, ending at any of `stop`."""

    prompt_ids: tuple[int, ...]
    n: int
    max_tokens: int
    stop: tuple[str, ...]
    key: int  # the request's sampling key; choice j samples with row_key(key, j)


@dataclass(frozen=True)
class Choice:
    """One finished choice: its text, OpenAI's finish_reason ("stop" | "length") and its token count."""

    text: str
    finish_reason: str
    tokens: int


def run_sampling(policy, temperature: float, top_p: float, jobs: Sequence[SampleJob],
                 ended: Callable[[], list[bool]] = lambda: []) -> list[list[Choice]]:
    """Every job's choices from one `policy.sample` call (one row per choice). `ended()` says which jobs nobody
    waits for any more: their rows end at the next decoding step (a policy with the `cancelled_rows` hook)."""
    prompts, stops, keys, owners = [], [], [], []
    for index, job in enumerate(jobs):
        for j in range(job.n):
            prompts.append(list(job.prompt_ids))
            stops.append(list(job.stop))
            keys.append(row_key(job.key, j))
            owners.append(index)

    def cancelled_rows() -> list[int]:
        flags = ended()
        return [row for row, owner in enumerate(owners) if owner < len(flags) and flags[owner]]

    longest = max(job.max_tokens for job in jobs)
    with ending_rows(policy, cancelled_rows):
        rows = [generations[0] for generations in
                policy.sample(prompts, 1, longest, temperature, top_p, stops, RowKeys(keys))]
    choices, start = [], 0
    for job in jobs:
        choices.append([finished(policy.tokenizer, g, job) for g in rows[start:start + job.n]])
        start += job.n
    return choices


def finished(tokenizer, generation: Generation, job: SampleJob) -> Choice:
    """`generation` as the request asked for it: cut to max_tokens, the stop string dropped."""
    ids = generation.completion_ids
    if len(ids) > job.max_tokens:
        ids = ids[:job.max_tokens]
        return Choice(tokenizer.decode(ids, skip_special_tokens=True), "length", len(ids))
    text = generation.text
    if generation.finish_reason == "stop":
        text = text[:min((i for i in (text.find(s) for s in job.stop if s) if i >= 0), default=len(text))]
    return Choice(text, "length" if generation.finish_reason == "length" else "stop", len(ids))


@dataclass(frozen=True)
class SearchJob:
    """One question answered by a search method (the batch key holds the method and budget)."""

    question: str


class AllEnded:
    """The `Limit` of a batch: passed once every one of its jobs has ended (nobody waits for any of them)."""

    def __init__(self, ended: Callable[[], list[bool]]):
        self._ended = ended

    def passed(self) -> bool:
        flags = self._ended()
        return bool(flags) and all(flags)  # no jobs named (the default): never

    def check(self) -> None:
        if self.passed():
            raise ComputeTimeout("every request of this batch was cancelled or timed out")


def run_searches(policy, scorer, settings: SearchSettings, questions: Sequence[str], instruction: str,
                 max_steps: int, ended: Callable[[], list[bool]] = lambda: []) -> list[SearchResult]:
    """Every question searched with `settings`, all together in one `run_search` (its engine batches them).
    Once `ended()` says nobody waits for any of them, the next decoding step ends the search (ComputeTimeout)."""
    env = QuestionsEnv(list(questions), instruction=instruction, max_steps=max_steps)
    starts = [{"options": {"index": i}} for i in range(len(questions))]
    limit = AllEnded(ended)
    timed_scorer = TimedScorer(scorer, limit) if scorer is not None else None
    results = run_search(TimedPolicy(policy, limit), env, starts, settings, timed_scorer)
    limit.check()  # its last sampling call may have been cut short
    return results


def settings_for(search: SearchSettings, method: str, budget: int) -> SearchSettings:
    """`search` with `method` and its budget (the method's `budget` field in `lmgym.search.methods`: samples for
    maj/weighted_maj/best_of_n, beams for beam, simulations for mcts)."""
    return search_method(method).with_budget(search, budget)
