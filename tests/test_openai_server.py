"""The OpenAI-compatible routes through the real `openai` client against a uvicorn server on a free port (the tiny
model), and the request queue that batches concurrent requests into fewer engine calls."""
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from lmgym.serving import BatchSettings, ServerLimits
from lmgym.serving.batcher import Batcher, QueueFull
from lmgym.serving.limits import ComputeTimeout, Deadline
from tests.tiers import slow


def openai_library():
    """The `openai` package, imported when a test first needs it (skipped without it): at module level it took
    ~40 s of every worker's collection on the CI machine kind."""
    return pytest.importorskip("openai")

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]


class CountingPolicy:
    """The tiny policy, counting its `sample` calls (engine calls); with `gate`, the first call waits until
    `gate()` is true, so requests sent meanwhile are all queued when it returns."""

    def __init__(self, policy, gate=None):
        self._policy, self.calls, self.rows, self.gate = policy, 0, [], gate

    def __getattr__(self, name):
        return getattr(self._policy, name)

    def sample(self, prompts, *args, **kwargs):
        self.calls += 1
        self.rows.append(len(prompts))
        if self.gate is not None and self.calls == 1:
            gate_opened = threading.Event()
            for _ in range(600):
                if self.gate(len(prompts)):
                    gate_opened.set()
                    break
                gate_opened.wait(0.05)
        return self._policy.sample(prompts, *args, **kwargs)


class Served:
    """A uvicorn server for `app` in a thread, on a port the OS picked, and an openai client for it."""

    def __init__(self, app):
        uvicorn = pytest.importorskip("uvicorn")
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()
        started = threading.Event()
        while not self.server.started and self.thread.is_alive():
            started.wait(0.02)
        port = self.socket.getsockname()[1]
        self.client = openai_library().OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0,
                                    timeout=120)
        self.model = self.client.models.list().data[0].id

    def close(self):
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.socket.close()


@pytest.fixture
def serve():
    servers = []

    def start(policy, **kwargs):
        from lmgym.serving import create_app

        servers.append(Served(create_app(policy, **kwargs)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_models_and_a_streamed_chat_completion_with_n_choices(serve, tiny_policy):
    served = serve(CountingPolicy(tiny_policy))
    assert served.model == "CountingPolicy" and served.client.models.list().object == "list"
    stream = served.client.chat.completions.create(model=served.model, messages=CHAT, n=2, max_tokens=4,
                                                   temperature=1.0, seed=3, stream=True,
                                                   stream_options={"include_usage": True})
    texts, reasons, usage = {}, {}, None
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk" and chunk.id.startswith("chatcmpl-")
        usage = chunk.usage or usage
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            reasons[choice.index] = choice.finish_reason or reasons.get(choice.index)
    assert sorted(texts) == [0, 1] and all(reasons[i] in ("stop", "length") for i in texts)
    reply = served.client.chat.completions.create(model=served.model, messages=CHAT, n=2, max_tokens=4,
                                                  temperature=1.0, seed=3)
    assert reply.object == "chat.completion" and [c.index for c in reply.choices] == [0, 1]
    assert [c.message.content for c in reply.choices] == [texts[0], texts[1]]  # same seed, same choices
    assert all(c.message.role == "assistant" for c in reply.choices)
    assert reply.usage.completion_tokens <= 8 and reply.usage.prompt_tokens > 0
    assert usage.total_tokens == reply.usage.total_tokens
    three = served.client.chat.completions.create(model=served.model, messages=CHAT, n=3, max_tokens=3)
    assert len(three.choices) == 3


def test_a_completion_stops_at_a_stop_string(serve, tiny_policy):
    served = serve(tiny_policy)
    ask = dict(model=served.model, prompt="Hello there", max_tokens=12, temperature=1.0, seed=3)
    full = served.client.completions.create(**ask)
    text = full.choices[0].text
    assert full.object == "text_completion" and full.choices[0].finish_reason == "length" and len(text) >= 8
    stop = text[4:6]  # a two-character stop string first seen at character 4 (seed 3 gives 'e@my6P2G%sM9')
    assert text.find(stop) == 4
    stopped = served.client.completions.create(**ask, stop=[stop, "never seen"])
    assert stopped.choices[0].text == text[:4] and stopped.choices[0].finish_reason == "stop"
    assert stopped.usage.completion_tokens < full.usage.completion_tokens
    streamed = list(served.client.completions.create(**ask, stop=stop, stream=True))
    assert "".join(c.choices[0].text for c in streamed) == text[:4] and streamed[-1].choices[0].finish_reason == "stop"


class RoundsOnly(CountingPolicy):
    """The counting policy without a model to step: the server batches it in rounds of `sample` calls."""

    model = None


def ask_sixteen(served) -> list[str]:
    def ask(i: int) -> str:
        messages = [{"role": "user", "content": f"What is {i} + {i}?"}]
        reply = served.client.chat.completions.create(model=served.model, messages=messages, max_tokens=3,
                                                      temperature=0)
        return reply.choices[0].message.content

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(ask, range(16)))
    assert len(answers) == 16 and all(isinstance(a, str) for a in answers)
    return answers


@slow
def test_sixteen_concurrent_requests_join_one_running_batch(serve, tiny_policy):
    served = serve(tiny_policy, batching=BatchSettings(max_batch_rows=64))
    engine = served.server.config.app.state.engine
    pool = ThreadPoolExecutor(1)
    with engine.lock:  # the engine waits until all sixteen are queued
        answers = pool.submit(ask_sixteen, served)
        for _ in range(600):
            if engine.waiting() == 16:
                break
            threading.Event().wait(0.05)
        assert engine.waiting() == 16
    answers.result(120)
    pool.shutdown()
    assert engine.peak_rows == 16 and engine.steps <= 3  # one batch, a token a step


def test_sixteen_concurrent_requests_run_in_fewer_engine_calls_without_a_model_to_step(serve, tiny_policy):
    holder = {}
    policy = RoundsOnly(tiny_policy, gate=lambda rows: rows + holder["batcher"].waiting() >= 16)
    served = serve(policy, batching=BatchSettings(window_ms=20, max_batch_rows=64))
    holder["batcher"] = served.server.config.app.state.batcher
    assert served.server.config.app.state.engine is None
    policy.calls = 0
    ask_sixteen(served)
    assert 1 <= policy.calls <= 2 < 16 and sum(policy.rows) == 16
    assert holder["batcher"].calls == policy.calls


def test_a_greedy_stream_sends_the_text_step_by_step_as_the_whole_answer_reads(serve, tiny_policy):
    served = serve(tiny_policy)
    ask = dict(model=served.model, prompt="Hello there", max_tokens=12, temperature=0)
    whole = served.client.completions.create(**ask).choices[0]
    chunks = list(served.client.completions.create(**ask, stream=True))
    texts = [c.choices[0].text for c in chunks if c.choices and c.choices[0].text]
    assert len(texts) > 1 and "".join(texts) == whole.text and len(whole.text) >= 8
    assert chunks[-1].choices[0].finish_reason == whole.finish_reason
    chat = served.client.chat.completions.create(model=served.model, messages=CHAT, max_tokens=8, temperature=0)
    stream = served.client.chat.completions.create(model=served.model, messages=CHAT, max_tokens=8, temperature=0,
                                                   stream=True)
    deltas = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(deltas) > 1 and "".join(deltas) == chat.choices[0].message.content


def test_a_stream_past_its_timeout_ends_with_an_error_event_and_leaves_the_batch(serve, tiny_policy):
    forward = tiny_policy.model.forward

    def slow(*args, **kwargs):  # 0.1 s a decoding step: 100 tokens take 10 s, past the 5 s timeout
        threading.Event().wait(0.1)
        return forward(*args, **kwargs)

    tiny_policy.model.forward = slow
    # 5 s: on a loaded 2-core machine the first tokens took over 2 s, and the request then ended in a 504 before
    # streaming anything, which is not the path this test is about
    served = serve(tiny_policy, limits=ServerLimits(timeout_seconds=5))
    engine = served.server.config.app.state.engine
    stream = served.client.completions.create(model=served.model, prompt="Hello there", max_tokens=100,
                                              temperature=1.0, seed=0, stream=True)  # seed 0: no EOS in 100
    texts = []
    with pytest.raises(openai_library().APIError, match="timeout of 5 s"):
        for chunk in stream:
            texts.append(chunk.choices[0].text)
    assert texts and all(texts)  # it streamed tokens before its deadline
    for _ in range(200):
        if engine.running() == 0:
            break
        threading.Event().wait(0.05)
    assert engine.running() == 0 and engine.steps < 100  # its row left the batch


def error_of(call) -> dict:
    with pytest.raises(openai_library().APIStatusError) as raised:
        call()
    error = raised.value.response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and "\n" not in error["message"]
    return {"status": raised.value.status_code, **error}


def test_bad_input_gets_a_4xx_in_openais_error_shape(serve, tiny_policy):
    served = serve(tiny_policy, limits=ServerLimits(max_new_tokens=8, max_budget=4, max_prompt_chars=50))
    chat = served.client.chat.completions.create
    too_long = error_of(lambda: chat(model=served.model, messages=CHAT, max_tokens=9))
    assert too_long["status"] == 400 and too_long["param"] == "max_tokens" and "limit of 8" in too_long["message"]
    empty = error_of(lambda: chat(model=served.model, messages=[]))
    assert empty["status"] == 400 and empty["param"] == "messages" and empty["type"] == "invalid_request_error"
    unknown = error_of(lambda: chat(model=served.model, messages=CHAT, extra_body={"search": {"method": "best_of"}}))
    assert unknown["status"] == 400 and unknown["param"] == "search.method"
    assert "did you mean 'best_of_n'?" in unknown["message"]
    needs_prm = error_of(lambda: chat(model=served.model, messages=CHAT, extra_body={"search": {"method": "mcts"}}))
    assert needs_prm["code"] == "needs_prm"
    assert error_of(lambda: chat(model=served.model, messages=CHAT, n=5))["param"] == "n"
    long_prompt = [{"role": "user", "content": "x" * 51}]
    assert error_of(lambda: chat(model=served.model, messages=long_prompt))["code"] == "prompt_too_long"
    assert error_of(lambda: chat(model="gpt-4o", messages=CHAT))["status"] == 404
    assert error_of(lambda: chat(model=served.model, messages=CHAT, temperature=3))["param"] == "temperature"
    unsupported = error_of(lambda: chat(model=served.model, messages=CHAT, presence_penalty=0.5))
    assert unsupported["param"] == "presence_penalty"
    stops = error_of(lambda: served.client.completions.create(model=served.model, prompt="hi", stop=list("abcde")))
    assert stops["param"] == "stop"


@slow
def test_search_is_chosen_through_extra_body(serve, tiny_policy):
    served = serve(tiny_policy)
    reply = served.client.chat.completions.create(model=served.model, messages=CHAT, max_tokens=4,
                                                  extra_body={"search": {"method": "maj", "n": 2}})
    choice = reply.choices[0]
    assert len(reply.choices) == 1 and choice.finish_reason == "stop"
    assert choice.model_extra["search"]["method"] == "maj" and choice.model_extra["search"]["budget"] == 2
    assert reply.usage.completion_tokens > 0
    greedy = served.client.completions.create(model=served.model, prompt="What is 1 + 1?",
                                              extra_body={"search": {"method": "greedy"}})
    assert greedy.choices[0].model_extra["search"]["method"] == "greedy"


def test_the_queue_is_bounded_and_drops_requests_past_their_deadline():
    started, release = threading.Event(), threading.Event()

    def run(key, payloads, ended):
        started.set()
        release.wait(30)
        return [f"{key}:{p}" for p in payloads]

    batcher = Batcher(run, BatchSettings(window_ms=0, max_queue=1))
    first = batcher.submit("k", 1, 1, Deadline(60)).future
    started.wait(30)  # the worker holds the first job: the queue is empty again
    second = batcher.submit("k", 2, 1, Deadline(60)).future
    with pytest.raises(QueueFull, match=r"holds 1 requests already \(max_queue\)"):
        batcher.submit("k", 3, 1, Deadline(60))
    release.set()
    assert first.result(30) == "k:1" and second.result(30) == "k:2" and batcher.calls == 2
    late = batcher.submit("k", 4, 1, Deadline(0)).future
    with pytest.raises(ComputeTimeout, match="waited in the queue"):
        late.result(30)
    assert batcher.calls == 2
