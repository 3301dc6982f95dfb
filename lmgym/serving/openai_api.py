"""OpenAI-compatible routes: `GET /v1/models`, `POST /v1/completions`, `POST /v1/chat/completions`.

Requests and responses have OpenAI's shapes (id, object, created, model, choices, usage), so the `openai`
client and any tool built on it work unchanged; `stream: true` answers with server-sent events ("data: {...}"
chunks, then "data: [DONE]"). Parameters: n, temperature (default 1), top_p, max_tokens (completions: 16 or
the server's max_new_tokens when smaller; chat: the server's max_new_tokens; max_completion_tokens is its
newer name), stop (at most 4 strings, dropped from the text), seed (the same seed gives the same choices,
whatever shares the batch).

`"search": {"method": "best_of_n", "n": 8}` (extra_body in the openai client) answers with a search method
of search/ instead: greedy, maj, best_of_n, beam or mcts, n its budget; best_of_n, beam and mcts need the
server's PRM. The question is the prompt (chat: the last user message), played as a stepwise `QuestionsEnv`
with the server's instruction and `SearchSettings` (temperature, tokens per step); the choice's text is the
chosen solution and `choice["search"]` holds its parsed answer.

A sampling request runs in the continuous-batching engine (serving/stream_engine.py, serving/openai_stream.py):
it joins the running batch at the next decoding step, and with `stream` every chunk carries the text decoded
since the last one. Search requests go through the `Batcher` (serving/batcher.py): those that arrive within a
few milliseconds share one search call, and a stream sends each choice whole when its batch finishes (as does
sampling for a policy without a model to step, one that only has `sample`). Errors have OpenAI's shape, {"error":
{"message", "type", "param", "code"}}: 400 for bad input (a field's type or range, a limit passed, an unknown
search method, text no tokenizer can encode), 404 for another model's name, 503 when the queue is full, 504
past the request's timeout (mid stream: an error event).

A request that times out, or whose client disconnects (polled every DISCONNECT_POLL_SECONDS while it waits,
streaming or not), is cancelled: out of the queue at once, and its rows of a running batch end at the engine's
next decoding step, so nobody's compute is spent on an answer nobody reads.
"""
from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from lmgym.core.extras import extra_imports
from lmgym.core.messages import did_you_mean

with extra_imports("The HTTP server"):  # fastapi comes with the [serve] extra
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

from lmgym.policies.decoding.generation import row_key
from lmgym.search import SearchSettings
from lmgym.search.methods import search_methods
from lmgym.serving.batcher import Batcher, BatchSettings, Job, QueueFull
from lmgym.serving.limits import ComputeTimeout, Deadline, ServerLimits
from lmgym.serving.openai_engine import Choice, SampleJob, SearchJob, run_sampling, run_searches, settings_for
from lmgym.serving.openai_reply import CLIENT_GONE, DISCONNECT_POLL_SECONDS, OpenAIError, Reply, usage_of
from lmgym.serving.openai_schemas import (
    MAX_STOP,
    MAX_STOP_CHARS,
    ChatCompletionRequest,
    CompletionRequest,
    SamplingFields,
)
from lmgym.serving.openai_stream import answer_streamed
from lmgym.serving.stream_engine import StreamEngine, streams
from lmgym.serving.text_check import unencodable_error

COMPLETION_DEFAULT_TOKENS = 16  # OpenAI's default max_tokens for /v1/completions
DEFAULT_SEARCH_BUDGET = 8


def validation_error(error: RequestValidationError) -> JSONResponse:
    """Pydantic's complaints about a /v1 body as one OpenAI error (400), naming the first bad field as param."""
    text = unencodable_error(error)
    if text is not None:
        return OpenAIError(400, text["message"], text["field"], "invalid_text").response()
    parts, param = [], None
    for item in error.errors():
        if item.get("type") == "json_invalid":
            parts.append("the body is not valid JSON")
            continue
        where = ".".join(str(p) for p in item.get("loc", ()) if p != "body") or "body"
        param = param or where
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    message = " ".join("; ".join(parts).split())
    return OpenAIError(400, message, param, "invalid_value").response()


@dataclass
class OpenAIServer:
    """The routes' state: the model, its limits, and the batch runner the queue calls."""

    policy: Any
    scorer: Any
    limits: ServerLimits
    search: SearchSettings
    model: str
    instruction: str
    max_steps: int
    batcher: Batcher | None = None
    engine: StreamEngine | None = None  # sampling requests' continuous batching (None: the batcher's rounds)

    def run_batch(self, key: Hashable, payloads: list, ended: Callable[[], list[bool]]) -> list:
        """One engine call for a batch: ("sample", temperature, top_p) or ("search", method, budget); rows of
        the payloads `ended()` names stop at the next decoding step."""
        if key[0] == "sample":
            return run_sampling(self.policy, key[1], key[2], payloads, ended)
        settings = settings_for(self.search, key[1], key[2])
        results = run_searches(self.policy, self.scorer, settings, [job.question for job in payloads],
                               self.instruction, self.max_steps, ended)
        return [[(Choice(r.trajectory.text if r.trajectory is not None else "", "stop", r.tokens), r.answer)]
                for r in results]

    async def answer(self, request: Request, body: SamplingFields, prompts: Sequence[list[int]],
                     questions: Sequence[str], max_tokens: int) -> tuple[list[Choice], list[dict | None]]:
        """The choices for every prompt (prompt i's n choices at indices i*n .. i*n+n-1), and each one's
        search details (None without search), through the queue."""
        if body.search is not None:
            key, payloads, rows = self.search_jobs(body, questions)
        else:
            key, payloads, rows = self.sample_jobs(body, prompts, max_tokens)
        deadline = Deadline(self.limits.timeout_seconds)
        jobs: list[Job] = []
        try:
            for payload in payloads:
                jobs.append(self.submit(key, payload, rows, deadline))
            results = await self.results(request, jobs, deadline)
        except BaseException:  # a 503, a 504, a client gone, the server stopping: nobody waits for the jobs
            for job in jobs:
                self.batcher.cancel(job)
            raise
        if body.search is None:
            choices = [choice for result in results for choice in result]
            return choices, [None] * len(choices)
        found = [pair for result in results for pair in result]
        details = [{"method": key[1], "budget": key[2], "answer": answer} for _, answer in found]
        return [choice for choice, _ in found], details

    def submit(self, key: Hashable, payload: Any, rows: int, deadline: Deadline) -> Job:
        """`payload` queued; a 503 when the queue is full."""
        try:
            return self.batcher.submit(key, payload, rows, deadline)
        except QueueFull as error:
            raise OpenAIError(503, str(error), None, "queue_full", "server_overloaded") from None

    async def results(self, request: Request, jobs: Sequence[Job], deadline: Deadline) -> list:
        """The jobs' results, waited for until the deadline (504) while the client stays (checked every
        DISCONNECT_POLL_SECONDS; a client gone is a 499 nobody receives)."""
        waiting = asyncio.gather(*(asyncio.wrap_future(job.future) for job in jobs))
        try:
            while not waiting.done():
                if deadline.passed():
                    raise ComputeTimeout("past the deadline")
                await asyncio.wait({waiting}, timeout=min(DISCONNECT_POLL_SECONDS, deadline.left()))
                if not waiting.done() and await request.is_disconnected():
                    raise OpenAIError(CLIENT_GONE, "the client disconnected before its answer was ready", None,
                                      "client_disconnected")
            return waiting.result()
        except ComputeTimeout:
            raise OpenAIError(504, f"the request ran over this server's timeout of {self.limits.timeout_seconds:g} "
                                   f"s (timeout_seconds); ask for fewer tokens or choices", None, "timeout",
                              "timeout") from None
        finally:
            waiting.cancel()  # nothing once done
            waiting.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved: not logged

    def sampling(self, body: SamplingFields, prompts: Sequence[list[int]], max_tokens: int) -> dict:
        """A sampling request's checked parameters: n, max_tokens, stop, key (the seed), temperature, top_p."""
        n = body.n if body.n is not None else 1
        if n * len(prompts) > self.limits.max_budget:
            raise OpenAIError(400, f"n={n} for {len(prompts)} prompt(s) asks for {n * len(prompts)} choices; this "
                                   f"server gives at most {self.limits.max_budget} per request (max_budget)", "n")
        if max_tokens > self.limits.max_new_tokens:
            raise OpenAIError(400, f"max_tokens {max_tokens} is over this server's limit of "
                                   f"{self.limits.max_new_tokens} (max_new_tokens)", "max_tokens")
        stop = body.stop_strings()
        if len(stop) > MAX_STOP or any(not s or len(s) > MAX_STOP_CHARS for s in stop):
            raise OpenAIError(400, f"stop takes at most {MAX_STOP} non-empty strings of at most {MAX_STOP_CHARS} "
                                   f"characters", "stop")
        return {"n": n, "max_tokens": max_tokens, "stop": stop,
                "key": body.seed if body.seed is not None else secrets.randbits(63),
                "temperature": body.temperature if body.temperature is not None else 1.0,
                "top_p": body.top_p if body.top_p is not None else 1.0}

    def sample_jobs(self, body: SamplingFields, prompts: Sequence[list[int]],
                    max_tokens: int) -> tuple[Hashable, list[SampleJob], int]:
        fields = self.sampling(body, prompts, max_tokens)
        jobs = [SampleJob(tuple(ids), fields["n"], max_tokens, fields["stop"], row_key(fields["key"], i))
                for i, ids in enumerate(prompts)]
        return ("sample", fields["temperature"], fields["top_p"]), jobs, fields["n"]

    async def reply(self, request: Request, body: SamplingFields, prompts: Sequence[list[int]],
                    questions: Sequence[str], max_tokens: int, reply: Reply):
        """The route's answer: through the engine (each step's text streamed) for sampling when the server has
        one, else through the batcher, the whole answer at once."""
        if self.engine is not None and body.search is None:
            return await answer_streamed(self.engine, request, body, self.sampling(body, prompts, max_tokens),
                                         prompts, reply, self.limits.timeout_seconds)
        choices, details = await self.answer(request, body, prompts, questions, max_tokens)
        reply.choices, reply.details, reply.usage = choices, details, usage_of(prompts, body, choices)
        return reply.stream(body) if body.stream else reply.body()

    def search_jobs(self, body: SamplingFields, questions: Sequence[str]) -> tuple[Hashable, list[SearchJob], int]:
        method, methods = body.search.method, search_methods()
        if method not in methods:
            raise OpenAIError(400, f"search.method {method!r} is not one of {' | '.join(methods)}"
                                   f"{did_you_mean(method, list(methods), repr)}", "search.method", "unknown_method")
        if methods[method].needs_scorer and self.scorer is None:
            raise OpenAIError(400, f"search.method {method} needs a PRM, and this server has none (start it with "
                                   f"--prm); use greedy or maj", "search.method", "needs_prm")
        if body.n not in (None, 1):
            raise OpenAIError(400, "n must be 1 with search (the method returns one solution; search.n is its "
                                   "budget)", "n")
        budget = body.search.n if body.search.n is not None else min(DEFAULT_SEARCH_BUDGET, self.limits.max_budget)
        if budget > self.limits.max_budget:
            raise OpenAIError(400, f"search.n {budget} is over this server's limit of {self.limits.max_budget} "
                                   f"(max_budget)", "search.n")
        if any(not q.strip() for q in questions):
            raise OpenAIError(400, "search needs a non-blank question", "search")
        budget = 1 if methods[method].budget is None else budget
        return ("search", method, budget), [SearchJob(q) for q in questions], budget

    def check_chars(self, param: str, chars: int) -> None:
        if chars > self.limits.max_prompt_chars:
            raise OpenAIError(400, f"{param} is {chars} characters; this server takes at most "
                                   f"{self.limits.max_prompt_chars} (max_prompt_chars)", param, "prompt_too_long")

    def check_model(self, name: str) -> None:
        if name != self.model:
            raise OpenAIError(404, f"the model {name!r} does not exist; this server serves {self.model!r} "
                                   f"(GET /v1/models)", "model", "model_not_found")


def add_openai_routes(app: FastAPI, policy, scorer, limits: ServerLimits, search: SearchSettings,
                      batching: BatchSettings | None, lock: threading.Lock, model: str, instruction: str,
                      max_steps: int) -> Batcher:
    """Add the /v1 routes to `app`; returns the round-based queue (its `calls` counts engine calls; search requests,
    and sampling for a policy the continuous engine cannot run); `app.state.engine` is the continuous engine."""
    server = OpenAIServer(policy, scorer, limits, search, model, instruction, max_steps)
    server.batcher = Batcher(server.run_batch, batching, lock)
    server.engine = StreamEngine(policy, batching, lock) if streams(policy) else None
    app.state.engine = server.engine
    created = int(time.time())

    @app.exception_handler(OpenAIError)
    async def openai_error(request: Request, error: OpenAIError) -> JSONResponse:
        return error.response()

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": model, "object": "model", "created": created, "owned_by": "rlgym"}]}

    @app.post("/v1/completions")
    async def completions(request: Request, body: CompletionRequest):
        server.check_model(body.model)
        texts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
        if not texts or any(not text for text in texts):
            raise OpenAIError(400, "prompt must be a non-empty string or a non-empty list of them", "prompt")
        for text in texts:
            server.check_chars("prompt", len(text))
        prompts = [policy.tokenizer(text)["input_ids"] for text in texts]  # raw text: no chat template
        max_tokens = body.max_tokens if body.max_tokens is not None else min(COMPLETION_DEFAULT_TOKENS,
                                                                           limits.max_new_tokens)
        reply = Reply("cmpl", "text_completion", model, [], [], {}, chat=False)
        return await server.reply(request, body, prompts, texts, max_tokens, reply)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request, body: ChatCompletionRequest):
        server.check_model(body.model)
        messages = body.message_dicts()
        server.check_chars("messages", sum(len(m["content"]) for m in messages))
        try:
            prompt = policy.format_prompt(messages)
        except ValueError as error:
            raise OpenAIError(400, str(error), "messages") from None
        questions = [next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")]
        given = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
        max_tokens = given if given is not None else limits.max_new_tokens
        reply = Reply("chatcmpl", "chat.completion", model, [], [], {}, chat=True)
        return await server.reply(request, body, [prompt], questions, max_tokens, reply)

    return server.batcher


