"""A chat-template turn as token ids: what a tool's or user's message adds after the assistant's text.

The tokens come from the tokenizer's own chat template: a conversation whose assistant turn holds a
sentinel is rendered with the new turn after it (and the next assistant generation prompt), and the
text after the sentinel is what the turn adds: the assistant's end of turn, the new turn, the opening
of the next assistant turn.
"""
from __future__ import annotations

from collections.abc import Sequence

_SENTINEL = "\u2063TURN-SENTINEL\u2063"  # never in real text; the template renders it verbatim


def turn_text(tokenizer, text: str, role: str) -> str:
    """The chat template's text after an assistant message up to the next assistant generation prompt,
    holding a `role` message with `text` (ValueError, one line, when the template rejects the role)."""
    if not isinstance(role, str) or not role:
        raise ValueError(f"encode_turn: role must be a non-empty string (e.g. 'tool', 'user'); got {role!r}")
    if not isinstance(text, str):
        raise ValueError(f"encode_turn: text must be a str; got {type(text).__name__}")
    messages = [{"role": "user", "content": "?"}, {"role": "assistant", "content": _SENTINEL},
                {"role": role, "content": text}]
    try:
        rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    except Exception as err:  # noqa: BLE001 - jinja's TemplateError or the template's own raise_exception
        reason = " ".join(str(err).split())[:200]
        raise ValueError(f"encode_turn: the chat template rejects a {role!r} turn after the assistant's "
                         f"({reason})") from None
    at = rendered.find(_SENTINEL)
    if at < 0:
        raise ValueError("encode_turn: the chat template drops the assistant's text, so where its turn ends "
                         "is unknown")
    return rendered[at + len(_SENTINEL):]


def turn_ids(tokenizer, text: str, role: str, after: Sequence[int] = ()) -> list[int]:
    """Token ids of `turn_text`; when `after` (the tokens so far) already ends with the special token that
    closes the assistant's turn (it sampled its end-of-turn/EOS token), that token is not repeated."""
    ids = tokenizer(turn_text(tokenizer, text, role), add_special_tokens=False)["input_ids"]
    if after and ids and after[-1] == ids[0] and ids[0] in set(tokenizer.all_special_ids):
        ids = ids[1:]
    return ids
