"""A sampling request of the OpenAI routes through the continuous-batching engine (serving/stream_engine.py).

`answer_streamed` submits the request as one `StreamJob` and listens to its updates on an asyncio queue (the
engine thread puts each step's updates there). With `stream: true` each step's new text goes out at once as
OpenAI's chunks; the response starts once the first update arrives, so a request that waits in the queue past
its timeout still gets a 504 status (and a full queue a 503). A request past its deadline later, mid stream,
gets an error event in OpenAI's shape (the status has been sent) and its rows leave the batch. Without
`stream` the choices are collected and answered as one body.

While it waits, every DISCONNECT_POLL_SECONDS, a request checks that its client is still there; a client gone
cancels the job (its rows leave the batch at the next step), as does a stream whose response is closed.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from lmgym.core.extras import extra_imports

with extra_imports("The HTTP server"):  # fastapi comes with the [serve] extra
    from fastapi import Request
    from fastapi.responses import StreamingResponse

from lmgym.serving.batcher import QueueFull
from lmgym.serving.limits import ComputeTimeout, Deadline
from lmgym.serving.openai_engine import Choice
from lmgym.serving.openai_reply import (
    CLIENT_GONE,
    DISCONNECT_POLL_SECONDS,
    SSE_HEADERS,
    OpenAIError,
    Reply,
    event,
    usage_of,
)
from lmgym.serving.openai_schemas import SamplingFields
from lmgym.serving.stream_engine import StreamEngine, StreamJob, Update


def timeout_error(seconds: float) -> OpenAIError:
    return OpenAIError(504, f"the request ran over this server's timeout of {seconds:g} s (timeout_seconds); ask "
                            f"for fewer tokens or choices", None, "timeout", "timeout")


class Listener:
    """One job's updates as the route reads them: waited for within the deadline while the client stays."""

    def __init__(self, engine: StreamEngine, request: Request, deadline: Deadline):
        self.engine, self.request, self.deadline = engine, request, deadline
        self.queue: asyncio.Queue = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self.publish = lambda item: loop.call_soon_threadsafe(self.queue.put_nowait, item)
        self.job: StreamJob | None = None

    def submit(self, job: StreamJob) -> None:
        try:
            self.job = self.engine.submit(job)
        except QueueFull as error:
            raise OpenAIError(503, str(error), None, "queue_full", "server_overloaded") from None

    async def next(self) -> list[Update]:
        """The next step's updates; OpenAIError 504 past the deadline, 499 when the client went away."""
        while True:
            if self.deadline.passed():
                raise timeout_error(self.deadline.seconds)
            try:
                item = await asyncio.wait_for(self.queue.get(), min(DISCONNECT_POLL_SECONDS, self.deadline.left()))
            except asyncio.TimeoutError:
                if await self.request.is_disconnected():
                    raise OpenAIError(CLIENT_GONE, "the client disconnected before its answer was ready", None,
                                      "client_disconnected") from None
                continue
            if isinstance(item, ComputeTimeout):
                raise timeout_error(self.deadline.seconds)
            if isinstance(item, BaseException):
                raise item
            return item

    def cancel(self) -> None:
        if self.job is not None:
            self.engine.cancel(self.job)


async def answer_streamed(engine: StreamEngine, request: Request, body: SamplingFields, job_fields: dict,
                          prompts: Sequence[list[int]], reply: Reply, timeout_seconds: float):
    """The route's answer for a sampling request through `engine`: a StreamingResponse with `stream`, else the
    reply's body. `job_fields` are StreamJob's fields but the prompts, deadline and publish."""
    deadline = Deadline(timeout_seconds)
    listener = Listener(engine, request, deadline)
    listener.submit(StreamJob(list(map(list, prompts)), deadline=deadline, publish=listener.publish, **job_fields))
    count = len(prompts) * job_fields["n"]
    finished: dict[int, Update] = {}
    try:
        first = await listener.next()
    except BaseException:
        listener.cancel()
        raise
    if not body.stream:
        try:
            updates = first
            while True:
                finished.update((u.index, u) for u in updates if u.finish_reason is not None)
                if len(finished) == count:
                    break
                updates = await listener.next()
        finally:
            listener.cancel()  # nothing once finished
        reply.choices = [Choice(u.text, u.finish_reason, u.tokens) for _, u in sorted(finished.items())]
        reply.details = [None] * count
        reply.usage = usage_of(prompts, body, reply.choices)
        return reply.body()
    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    async def events() -> AsyncIterator[str]:
        try:
            if reply.chat:
                for index in range(count):
                    yield event(reply.role_chunk(index, include_usage))
            updates = first
            while True:
                for update in updates:
                    for chunk in reply.delta_chunks(update.index, update.delta, update.finish_reason, include_usage):
                        yield event(chunk)
                    if update.finish_reason is not None:
                        finished[update.index] = update
                if len(finished) == count:
                    break
                try:
                    updates = await listener.next()
                except OpenAIError as error:
                    if error.status != CLIENT_GONE:
                        yield event({"error": {"message": error.message, "type": error.kind, "param": error.param,
                                               "code": error.code}})
                    return
            if include_usage:
                ended = [Choice(u.text, u.finish_reason, u.tokens) for u in finished.values()]
                reply.usage = usage_of(prompts, body, ended)
                yield event(reply.usage_chunk())
            yield event("[DONE]")
        finally:  # the response closed early (a client gone, the server stopping): the rows leave the batch
            listener.cancel()

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)
