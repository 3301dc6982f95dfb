"""The shapes of the OpenAI routes' answers: errors ({"error": {...}}), whole replies, and the chunks of a stream
(server-sent events, "data: {...}" then "data: [DONE]")."""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from lmgym.core.extras import extra_imports

with extra_imports("The HTTP server"):  # fastapi comes with the [serve] extra
    from fastapi.responses import JSONResponse, StreamingResponse

from lmgym.serving.openai_engine import Choice
from lmgym.serving.openai_schemas import SamplingFields

DISCONNECT_POLL_SECONDS = 0.05  # how often a waiting request checks that its client is still there
CLIENT_GONE = 499  # nginx's "client closed request": the answer nobody receives

class OpenAIError(Exception):
    """An error answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def response(self) -> JSONResponse:
        return JSONResponse(status_code=self.status, content={"error": {
            "message": self.message, "type": self.kind, "param": self.param, "code": self.code}})



def usage_of(prompts: Sequence[list[int]], body: SamplingFields, choices: Sequence[Choice]) -> dict[str, int]:
    """OpenAI's usage: prompt tokens (each prompt once per request), completion tokens, their total."""
    prompt_tokens = sum(len(p) for p in prompts)
    completion_tokens = sum(c.tokens for c in choices)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


@dataclass
class Reply:
    """A finished request's answer, as one JSON body or as server-sent events."""

    prefix: str
    kind: str
    model: str
    choices: list[Choice]
    details: list[dict | None]
    usage: dict[str, int]
    chat: bool

    def __post_init__(self) -> None:
        self.id, self.created = f"{self.prefix}-{uuid.uuid4().hex}", int(time.time())

    def _head(self, kind: str) -> dict:
        """The fields every body and chunk of this reply starts with."""
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def _choice(self, index: int, choice: Choice) -> dict:
        body: dict = {"index": index, "logprobs": None, "finish_reason": choice.finish_reason}
        if self.chat:
            body["message"] = {"role": "assistant", "content": choice.text}
        else:
            body["text"] = choice.text
        if self.details[index] is not None:
            body["search"] = self.details[index]
        return body

    def body(self) -> dict:
        return {**self._head(self.kind), "choices": [self._choice(i, c) for i, c in enumerate(self.choices)],
                "usage": self.usage}

    def chunks(self, include_usage: bool) -> Iterator[dict]:
        """OpenAI's stream: per choice, (chat) a role delta, the text, then the finish_reason; usage last."""
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        extra = {"usage": None} if include_usage else {}
        for index, choice in enumerate(self.choices):
            if self.chat:
                deltas = [({"role": "assistant", "content": ""}, None), ({"content": choice.text}, None),
                          ({}, choice.finish_reason)]
                for delta, reason in deltas:
                    yield {**self._head(kind), "choices": [{"index": index, "delta": delta, "logprobs": None,
                                                            "finish_reason": reason}], **extra}
            else:
                yield {**self._head(kind), "choices": [{"index": index, "text": choice.text, "logprobs": None,
                                                        "finish_reason": choice.finish_reason}], **extra}
        if include_usage:
            yield {**self._head(kind), "choices": [], "usage": self.usage}

    def stream(self, body: SamplingFields) -> StreamingResponse:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)

        def events() -> Iterator[str]:
            for chunk in self.chunks(include_usage):
                yield event(chunk)
            yield event("[DONE]")

        return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)

    def delta_chunks(self, index: int, delta: str, finish_reason: str | None, include_usage: bool) -> Iterator[dict]:
        """The chunks of one choice's step of a token stream: its new text (when any), then its finish_reason
        (when it ended); a chat choice's first chunk is preceded by the role delta (`role_chunk`)."""
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        extra = {"usage": None} if include_usage else {}
        if self.chat:
            parts = ([({"content": delta}, None)] if delta else []) + ([({}, finish_reason)] if finish_reason else [])
            for body, reason in parts:
                yield {**self._head(kind), "choices": [{"index": index, "delta": body, "logprobs": None,
                                                        "finish_reason": reason}], **extra}
        elif delta or finish_reason:
            yield {**self._head(kind), "choices": [{"index": index, "text": delta, "logprobs": None,
                                                    "finish_reason": finish_reason}], **extra}

    def role_chunk(self, index: int, include_usage: bool) -> dict:
        """A chat stream's first chunk for a choice: the assistant role, no text yet."""
        extra = {"usage": None} if include_usage else {}
        return {**self._head("chat.completion.chunk"), "choices": [{"index": index, "delta": {
            "role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}], **extra}

    def usage_chunk(self) -> dict:
        """A stream's last chunk with stream_options.include_usage: no choices, the usage."""
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {**self._head(kind), "choices": [], "usage": self.usage}


SSE_HEADERS = {"Cache-Control": "no-cache"}


def event(chunk: dict | str) -> str:
    """One server-sent event: a chunk as JSON, or the closing [DONE]."""
    return f"data: {chunk if isinstance(chunk, str) else json.dumps(chunk)}\n\n"
