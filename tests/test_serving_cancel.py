"""The server stops work nobody waits for: a request that timed out (504) or whose client went away leaves
the queue at once and its rows end at the engine's next decoding step. A slow fake engine (a fixed sleep per
decoding step, honouring the `cancelled_rows` hook as HFPolicy's decoders do) makes the costs deterministic."""
import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from lmgym.policies import Generation, Policy, build_tiny_tokenizer
from lmgym.serving import BatchSettings, ServerLimits, create_app
from lmgym.serving import limits as limits_module
from lmgym.serving.batcher import Batcher, QueueFull
from lmgym.serving.limits import Deadline
from tests.tiers import slow

STEP_SECONDS = 0.03  # what one decoding step of the fake engine costs


class SlowEngine(Policy):
    """Decodes 'x' tokens one step at a time, STEP_SECONDS a step, up to max_new_tokens; ends the rows its
    `cancelled_rows` hook names after each step. Counts its steps and each row's."""

    def __init__(self):
        self.tokenizer = build_tiny_tokenizer()
        self.cancelled_rows = None
        self.steps = 0  # decoding steps run in all
        self.rows_ended = 0  # rows ended by the hook
        self.calls_running = 0  # sample calls under way
        self.started = threading.Event()  # set when a call has run its first step

    def format_prompt(self, observation) -> list[int]:
        text = observation if isinstance(observation, str) else " ".join(m["content"] for m in observation)
        return self.encode_text(text)

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        self.calls_running += 1
        try:
            return self._sample(prompts, n, max_new_tokens)
        finally:
            self.calls_running -= 1

    def _sample(self, prompts, n, max_new_tokens):
        rows = len(prompts) * n
        done, reasons, lengths = [False] * rows, ["length"] * rows, [0] * rows
        for _ in range(max_new_tokens):
            time.sleep(STEP_SECONDS)
            self.steps += 1
            for r in range(rows):
                lengths[r] += not done[r]
            self.started.set()
            for r in (self.cancelled_rows() if self.cancelled_rows is not None else ()):
                if not done[r]:
                    done[r], reasons[r] = True, "cancelled"
                    self.rows_ended += 1
            if all(done):
                break
        x = self.encode_text("x")[0]
        flat = [Generation(list(prompts[r // n]), [x] * lengths[r], [-1.0] * lengths[r], "x" * lengths[r], reasons[r])
                for r in range(rows)]
        return [flat[i * n:(i + 1) * n] for i in range(len(prompts))]

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0):
        raise NotImplementedError("the fake engine only samples")


def wait_until(condition, tries: int = 2000) -> bool:
    """Whether `condition()` comes true within `tries` checks 5 ms apart (about 10 s at most)."""
    for _ in range(tries):
        if condition():
            return True
        threading.Event().wait(0.005)
    return condition()


def chat(max_tokens: int, **extra) -> dict:
    return {"model": "SlowEngine", "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens,
            "temperature": 0, **extra}


@slow
def test_a_small_request_after_timed_out_heavy_ones_is_served_in_its_idle_time():
    engine = SlowEngine()
    app = create_app(engine, limits=ServerLimits(timeout_seconds=1.5), batching=BatchSettings(window_ms=1))
    with TestClient(app) as client:
        idle = 0.0
        for _ in range(2):  # the slower of two idle runs: a loaded machine's jitter is not the server's cost
            start = time.monotonic()
            assert client.post("/v1/chat/completions", json=chat(16)).status_code == 200
            idle = max(idle, time.monotonic() - start)  # 16 steps: about 0.5 s
        heavy = chat(400)  # 400 steps: 12 s, far past the 1.5 s timeout
        with ThreadPoolExecutor(3) as pool:
            statuses = list(pool.map(lambda _: client.post("/v1/chat/completions", json=heavy).status_code, range(3)))
        assert statuses == [504, 504, 504]
        start = time.monotonic()
        small = client.post("/v1/chat/completions", json=chat(16))
        latency = time.monotonic() - start
    assert small.status_code == 200, small.text  # without cancellation it waits behind 10 s of heavy rows: 504
    assert latency <= 2 * idle, (latency, idle)
    assert engine.steps < 2 * 16 + 2 * (1.5 / STEP_SECONDS) + 16  # the heavy rows stopped soon after their 504


def test_a_cancelled_job_leaves_the_queue_at_once_and_frees_its_place():
    started, release, ran = threading.Event(), threading.Event(), []

    def run(key, payloads, ended):
        ran.extend(payloads)
        started.set()
        release.wait(30)
        return list(payloads)

    batcher = Batcher(run, BatchSettings(window_ms=0, max_queue=1))
    first = batcher.submit("k", "first", 1, Deadline(60))
    assert started.wait(10)  # the worker runs it: the queue is empty again
    waiting = batcher.submit("k", "waiting", 1, Deadline(60))
    with pytest.raises(QueueFull):
        batcher.submit("k", "one too many", 1, Deadline(60))
    batcher.cancel(waiting)
    assert batcher.waiting() == 0 and waiting.future.cancelled()
    third = batcher.submit("k", "third", 1, Deadline(60))  # the cancelled job's place is free at once
    release.set()
    assert first.future.result(30) == "first" and third.future.result(30) == "third"
    assert ran == ["first", "third"] and batcher.calls == 2  # the cancelled job never reached the engine


@pytest.mark.parametrize("how", ["cancelled", "timed out"])
def test_a_running_job_stops_at_the_step_after_its_cancel_or_its_deadline(how, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(limits_module.time, "monotonic", lambda: clock[0])
    steps, gate = [0], threading.Semaphore(0)

    def run(key, payloads, ended):
        while not all(ended()):
            gate.acquire()  # each step waits for the test to allow it: the count is exact
            steps[0] += 1
        return [None] * len(payloads)

    batcher = Batcher(run, BatchSettings(window_ms=0))
    job = batcher.submit("k", "p", 1, Deadline(60))
    for _ in range(5):
        gate.release()
    assert wait_until(lambda: steps[0] == 5)
    if how == "cancelled":
        batcher.cancel(job)
    else:
        clock[0] = 61.0  # past its deadline: nobody waits for it any more
    at_cancel = steps[0]
    for _ in range(50):  # allowed to run 50 more steps
        gate.release()
    assert job.future.result(30) is None  # the engine call returned
    assert steps[0] - at_cancel <= 1  # the step it was in when cancelled, and no more


def test_a_client_that_disconnects_from_a_stream_cancels_its_generation():
    engine = SlowEngine()
    app = create_app(engine, limits=ServerLimits(timeout_seconds=60))
    body = json.dumps(chat(400, stream=True)).encode()  # 400 steps: 12 s unless cancelled
    sent, received = [], [False]

    async def receive():
        if not received[0]:
            received[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        if engine.started.is_set():
            return {"type": "http.disconnect"}  # the client went away after the generation began
        await asyncio.sleep(3600)  # nothing from the client yet (the server's poll cancels this wait)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
             "root_path": "", "query_string": b"", "server": ("test", 80), "client": ("test", 1),
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]}

    async def call():
        await asyncio.wait_for(app(scope, receive, send), 30)

    asyncio.run(call())
    assert wait_until(lambda: engine.rows_ended == 1)
    assert engine.steps < 40  # cancelled within a few polls of the disconnect, not after 400 steps
    start = [m for m in sent if m["type"] == "http.response.start"]
    assert start and start[0]["status"] == 499  # the answer nobody receives, never a 5xx
    assert app.state.batcher.waiting() == 0


def test_generate_past_its_timeout_gets_504_and_its_rows_end_at_the_next_step():
    engine = SlowEngine()
    client = TestClient(create_app(engine, limits=ServerLimits(timeout_seconds=0.5)))
    response = client.post("/generate", json={"prompt": "hi", "max_new_tokens": 400})  # 12 s unless ended
    assert response.status_code == 504, response.text
    assert engine.rows_ended == 1 and engine.steps <= 0.5 / STEP_SECONDS + 2  # ended at the step past 0.5 s


@slow  # waits on the wall clock for the search to go idle (tests/tiers.py)
def test_a_search_request_past_its_timeout_stops_its_search_at_the_next_step():
    engine = SlowEngine()  # its steps never write an answer: the search would sample 8 actions of 64 tokens
    client = TestClient(create_app(engine, limits=ServerLimits(timeout_seconds=0.5)))
    response = client.post("/v1/chat/completions", json=chat(8, search={"method": "greedy"}))
    assert response.status_code == 504, response.text
    # Either the search had begun sampling by the timeout (its rows end at the next step, through the hook) or it
    # had not (on a loaded machine the job can still wait in the queue, or before its first call: it never
    # samples). Either way it goes idle, having sampled at most a step past the timeout.
    assert wait_until(lambda: engine.calls_running == 0 and (engine.rows_ended >= 1 or engine.steps == 0))
    threading.Event().wait(0.3)  # a search that went on would sample 10 more steps meanwhile
    assert engine.calls_running == 0 and engine.steps <= 0.5 / STEP_SECONDS + 3
