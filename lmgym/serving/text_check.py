"""Text the tokenizer cannot take, refused before anything reads it: a 400 naming the field, on every route.

JSON's `\\ud800` escape gives Python a lone surrogate, a str that no tokenizer can encode (the fast
tokenizers raise TypeError deep inside). Every request body inherits `EncodableText`, which looks at each
string of the parsed JSON (keys too) before pydantic checks the fields, so every string field is covered
(prompts, messages and their parts, stop strings, names) with one message. A body whose bytes are not UTF-8
never gets this far: `not_utf8` words that refusal.
"""
from __future__ import annotations

from typing import Any

from lmgym.core.extras import extra_imports

with extra_imports("The HTTP server"):  # pydantic comes with fastapi, in the [serve] extra
    from pydantic import BaseModel, model_validator
    from pydantic_core import PydanticCustomError

UNENCODABLE = "unencodable_text"  # the pydantic error type the routes answer with a 400


def unencodable(data: Any) -> tuple[str, str] | None:
    """The first string in JSON `data` that UTF-8 cannot encode, as (its field, e.g. "messages.0.content",
    and a one-line message naming it); None when every string is text."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:  # iteratively: a deeply nested body does not reach the recursion limit
        where, value = stack.pop()
        if isinstance(value, dict):
            items = [(f"{where}.{_shown(key)}".lstrip("."), key, item) for key, item in value.items()]
            for path, key, _ in items:
                found = _problem(path, key, f"the key {path}") if isinstance(key, str) else None
                if found:
                    return found
            stack.extend((path, item) for path, _, item in reversed(items))
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{where}.{i}".lstrip("."), item) for i, item in reversed(list(enumerate(value))))
        elif isinstance(value, str):
            found = _problem(where or "body", value)
            if found:
                return found
    return None


def _shown(key: Any) -> str:
    """A key as a field path shows it: a lone surrogate written as its escape (a response must be UTF-8)."""
    return str(key).encode("utf-8", "backslashreplace").decode("utf-8")


def _problem(where: str, text: str, name: str | None = None) -> tuple[str, str] | None:
    """(where, the message) when `text` has a character UTF-8 cannot encode; `name` is what the message calls it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return where, (f"{name or where} is not valid Unicode text: character {error.start} is a lone surrogate "
                       f"{ascii(text[error.start])[1:-1]}, which no tokenizer can encode")
    return None


def unencodable_error(error: Any) -> dict[str, str] | None:
    """The {"message", "field"} of `EncodableText`'s refusal among a RequestValidationError's errors, if any."""
    for item in error.errors():
        if item.get("type") == UNENCODABLE:
            return item["ctx"]
    return None


def not_utf8(error: UnicodeDecodeError) -> str:
    """The one line for a request body whose bytes are not UTF-8 (JSON text must be)."""
    return (f"the body is not valid UTF-8: byte 0x{error.object[error.start]:02x} at position {error.start} "
            f"({error.reason}); JSON text must be UTF-8")


class EncodableText(BaseModel):
    """A request body whose every string is checked (`unencodable`) before its fields are."""

    @model_validator(mode="before")
    @classmethod
    def _every_string_is_text(cls, data: Any) -> Any:
        found = unencodable(data)
        if found is not None:
            field, message = found
            raise PydanticCustomError(UNENCODABLE, "{message}", {"message": message, "field": field})
        return data
