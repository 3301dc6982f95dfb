"""The continuous-batching engine of the OpenAI routes (serving/stream_engine.py) on the tiny model: requests join
the running batch at the next step, leave it when cancelled or past their deadline, and stream their text step by
step. Steps are observed through the engine's counters and its model lock (held by a test, the engine waits
between steps), never through the clock."""
import threading

import pytest
import torch

from lmgym.policies.decoding.generation import RowKeys, row_key
from lmgym.serving import BatchSettings
from lmgym.serving.batcher import QueueFull
from lmgym.serving.limits import ComputeTimeout, Deadline
from lmgym.serving.stream_engine import StreamEngine, StreamJob, streams


class Listened:
    """A job's updates as the engine publishes them (from its thread)."""

    def __init__(self, engine: StreamEngine, prompt: list[int], max_tokens: int, n: int = 1, temperature=0.0,
                 key: int = 3, stop: tuple[str, ...] = (), seconds: float = 60.0):
        self.updates, self.error, self.done = [], None, threading.Event()
        self.job = StreamJob([prompt], n, max_tokens, stop, key, temperature, 1.0, Deadline(seconds), self.publish)
        self.first = threading.Event()

    def publish(self, item):
        if isinstance(item, BaseException):
            self.error = item
            self.done.set()
            return
        self.updates.extend(item)
        self.first.set()
        if sum(u.finish_reason is not None for u in self.updates) == self.job.rows:
            self.done.set()

    def texts(self) -> dict[int, str]:
        return {u.index: u.text for u in self.updates if u.finish_reason is not None}

    def deltas(self, index: int = 0) -> list[str]:
        return [u.delta for u in self.updates if u.index == index and u.delta]


def prompt_of(policy, text: str) -> list[int]:
    return policy.tokenizer(text)["input_ids"]


def test_the_engine_streams_text_step_by_step_and_samples_as_policy_sample_does(tiny_policy):
    assert streams(tiny_policy)
    engine = StreamEngine(tiny_policy)
    prompt = prompt_of(tiny_policy, "Hello there")
    sampled = Listened(engine, prompt, 12, n=2, temperature=1.0, key=3)
    engine.submit(sampled.job)
    assert sampled.done.wait(60) and sampled.error is None
    keys = RowKeys([row_key(row_key(3, 0), j) for j in range(2)])
    expected = [g[0] for g in tiny_policy.sample([prompt, prompt], 1, 12, 1.0, 1.0, None, keys)]
    assert sampled.texts() == {0: expected[0].text, 1: expected[1].text}  # seed 3: 'e@my6P2G%sM9' for choice 0
    for index in (0, 1):
        assert len(sampled.deltas(index)) > 1 and "".join(sampled.deltas(index)) == sampled.texts()[index]
    ends = [u for u in sampled.updates if u.finish_reason is not None]
    assert [u.tokens for u in ends] == [len(g.completion_ids) for g in expected]
    assert engine.steps == max(len(g.completion_ids) for g in expected) and engine.running() == 0


def test_a_stop_string_is_held_back_and_left_out(tiny_policy):
    engine = StreamEngine(tiny_policy)
    prompt = prompt_of(tiny_policy, "Hello there")
    stopped = Listened(engine, prompt, 12, temperature=1.0, key=3, stop=("6P", "never seen"))
    engine.submit(stopped.job)
    assert stopped.done.wait(60)
    assert stopped.texts() == {0: "e@my"} and "".join(stopped.deltas()) == "e@my"
    assert stopped.updates[-1].finish_reason == "stop"


class ActsWhenPublished(Listened):
    """A Listened job that calls `action()` once, from the engine's thread, as its `after`-th token is published:
    between two steps, with the engine's lock held. A test thread taking that lock after the first token raced
    the engine (a lock does not queue its waiters: it could find every step run)."""

    def __init__(self, *args, after: int, action, **kwargs):
        super().__init__(*args, **kwargs)
        self.after, self.action, self.acted = after, action, False

    def publish(self, item):
        super().publish(item)
        if not self.acted and len(self.updates) >= self.after:
            self.acted = True
            self.action()


def test_a_request_joins_the_running_batch_before_the_first_one_ends(tiny_policy):
    engine = StreamEngine(tiny_policy)
    second = Listened(engine, prompt_of(tiny_policy, "What is 2 + 3?"), 4, temperature=1.0, key=5)
    submitted_at = []
    first = ActsWhenPublished(engine, prompt_of(tiny_policy, "Hello there"), 40, temperature=1.0, key=0,  # no EOS
                              after=3, action=lambda: submitted_at.append(engine.steps) or engine.submit(second.job))
    engine.submit(first.job)
    assert first.done.wait(60) and second.done.wait(60)
    assert first.updates[-1].finish_reason == "length" and first.job.finished_step == 40  # one token a step
    assert submitted_at == [3] and second.job.admitted_step == 4 < first.job.finished_step  # joined at the next step
    assert second.job.finished_step < first.job.finished_step and engine.peak_rows == 2


def test_waiting_requests_join_together_and_the_queue_is_bounded(tiny_policy):
    engine = StreamEngine(tiny_policy, BatchSettings(max_queue=3))
    with engine.lock:  # nothing is admitted while the test holds the lock
        jobs = [Listened(engine, prompt_of(tiny_policy, f"What is {i} + {i}?"), 3, key=i) for i in range(3)]
        for listened in jobs:
            engine.submit(listened.job)
        with pytest.raises(QueueFull, match=r"holds 3 requests already \(max_queue\)"):
            engine.submit(Listened(engine, prompt_of(tiny_policy, "one too many"), 3).job)
    assert all(listened.done.wait(60) for listened in jobs)
    assert engine.peak_rows == 3 and engine.steps <= 3  # one batch from the first step: 3 tokens, 3 steps at most


def test_a_cancelled_request_leaves_the_batch_and_its_row_is_reused(tiny_policy):
    engine = StreamEngine(tiny_policy, BatchSettings(max_batch_rows=1))
    short = Listened(engine, prompt_of(tiny_policy, "What is 2 + 3?"), 3, temperature=1.0, key=5)
    seen = {}

    def submit_then_cancel():  # between two steps, the engine's lock held
        engine.submit(short.job)  # waits: the batch has no free row
        seen.update(waiting=engine.waiting(), running=engine.running())
        engine.cancel(long.job)
        seen.update(at=engine.steps, heard=len(long.updates))

    long = ActsWhenPublished(engine, prompt_of(tiny_policy, "Hello there"), 200, temperature=1.0, key=0,  # EOS at 159
                             after=1, action=submit_then_cancel)
    engine.submit(long.job)
    assert short.done.wait(60) and short.error is None
    assert seen["waiting"] == 1 and seen["running"] == 1
    assert short.job.admitted_step == seen["at"] + 1  # the cancelled row left at the next step and the new one took it
    assert engine.peak_rows == 1 and len(long.updates) == seen["heard"] and not long.done.is_set()
    assert engine.running() == 0 and engine.steps < 200


def test_a_request_past_its_deadline_leaves_the_batch_with_a_timeout(tiny_policy, monkeypatch):
    engine = StreamEngine(tiny_policy)
    seen = []

    def deadline_passes():  # between two steps, the engine's lock held
        monkeypatch.setattr(late.job.deadline, "at", 0.0)
        seen.append(engine.steps)

    late = ActsWhenPublished(engine, prompt_of(tiny_policy, "Hello there"), 200, temperature=1.0, key=0,
                             after=1, action=deadline_passes)
    engine.submit(late.job)
    assert late.done.wait(60) and isinstance(late.error, ComputeTimeout)
    assert seen == [1] and engine.steps == 1 and engine.running() == 0


def test_prompts_admitted_together_prefill_their_shared_prefix_once_with_the_same_logits(tiny_policy):
    engine = StreamEngine(tiny_policy)
    head = prompt_of(tiny_policy, "You are a helpful assistant. Answer briefly.")
    prompts = [tuple(head + prompt_of(tiny_policy, tail)) for tail in ("What is 2 + 3?", "Hi", "Name a colour.")]
    assert len(head) >= 8
    cache, attention, positions, logits = engine._prefill(prompts)
    assert cache.get_seq_length() == len(head) + max(len(p) - len(head) for p in prompts)  # the head once
    for row, prompt in enumerate(prompts):
        alone = tiny_policy.model(input_ids=torch.tensor([prompt])).logits[0, -1]
        assert torch.allclose(logits[row], alone, atol=1e-4)
        assert positions[row, -1].item() == len(prompt) - 1 and attention[row].sum().item() == len(prompt)
