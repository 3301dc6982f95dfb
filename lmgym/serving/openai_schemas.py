"""The request bodies of the OpenAI-compatible routes, as OpenAI's API reference names their fields.

Fields the server does not implement (logprobs, penalties, tools, ...) are refused by name (extra="forbid")
rather than silently ignored; a null field means its default, as in OpenAI's API. `search` is this server's
own field (the openai client sends it with `extra_body={"search": {...}}`). A string UTF-8 cannot encode (a lone
surrogate) anywhere in a body is refused first (serving/text_check.py)."""
from __future__ import annotations

from typing import Literal

from lmgym.core.extras import extra_imports

with extra_imports("The HTTP server"):  # pydantic comes with fastapi, in the [serve] extra
    from pydantic import BaseModel, ConfigDict, Field

from lmgym.serving.text_check import EncodableText

MAX_STOP = 4  # stop strings per request (OpenAI's limit)
MAX_STOP_CHARS = 200


class SearchBody(BaseModel):
    """A search method instead of plain sampling: method, one registered in `lmgym.search.methods` (greedy, maj,
    weighted_maj, best_of_n, beam, mcts, ...); n its budget (samples for maj, weighted_maj and best_of_n, beams
    for beam, simulations for mcts)."""

    model_config = ConfigDict(extra="forbid")
    method: str
    n: int | None = Field(None, ge=1)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_usage: bool | None = None


class SamplingFields(EncodableText):
    """What both routes take: the model's name, sampling parameters, streaming and the search extension."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    model: str
    n: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = None
    search: SearchBody | None = None

    def stop_strings(self) -> tuple[str, ...]:
        """`stop` as a tuple (a string is one stop string)."""
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)


class CompletionRequest(SamplingFields):
    """POST /v1/completions: raw text in (no chat template), one prompt or a list of prompts."""

    prompt: str | list[str]


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]
    name: str | None = None

    def text(self) -> str:
        """The content as one string (text parts joined)."""
        return self.content if isinstance(self.content, str) else "".join(part.text for part in self.content)


class ChatCompletionRequest(SamplingFields):
    """POST /v1/chat/completions: messages rendered with the policy's chat template, the assistant turn opened."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)

    def message_dicts(self) -> list[dict[str, str]]:
        """The messages as the chat template takes them ("developer" is OpenAI's newer name for "system")."""
        return [{"role": "system" if m.role == "developer" else m.role, "content": m.text()} for m in self.messages]
