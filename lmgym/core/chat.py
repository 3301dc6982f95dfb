"""Chat-format prompts: a list of {"role", "content"} messages, as TRL and the chat templates take them.

The one checker of messages: envs (a question given as messages), policies (rendering them with the
chat template) and the SFT data (chat examples) all use it.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ROLES = ("system", "user", "assistant", "tool")

Messages = list[dict[str, str]]


def is_messages(value: Any) -> bool:
    """Whether `value` is meant as chat messages: a list or tuple (not text) whose items are all mappings.
    An empty list is not: it is neither a prompt nor a conversation. `check_messages` says what is wrong."""
    return (isinstance(value, (list, tuple)) and len(value) > 0
            and all(isinstance(item, Mapping) for item in value))


def check_messages(messages: Any) -> tuple[dict[str, str], ...]:
    """`messages` as a tuple of {"role", "content"} dicts; ValueError (one line) unless each is one, with a
    known role and str content."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
        raise ValueError(f"messages must be a list of {{'role', 'content'}} objects, got {type(messages).__name__}")
    checked = []
    for k, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), str):
            raise ValueError(f"message {k} must be an object with a str 'content', got {str(message)[:80]!r}")
        if message.get("role") not in ROLES:
            raise ValueError(f"message {k} has role {message.get('role')!r}; expected one of {', '.join(ROLES)}")
        checked.append({"role": message["role"], "content": message["content"]})
    return tuple(checked)


def check_chat_prompt(messages: Any) -> Messages:
    """A chat-format prompt as a new list of messages: `check_messages`, and not empty (ValueError, one line)."""
    checked = list(check_messages(messages))
    if not checked:
        raise ValueError("a chat-format prompt must hold at least one message; got an empty list")
    return checked


def messages_text(messages: Iterable[Mapping[str, str]]) -> str:
    """Messages as plain readable text ("role: content" per message), for rendering and logs; not a model input."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)
