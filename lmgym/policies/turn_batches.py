"""`encode_turns`: the token ids of many env-injected turns (one per branch of an engine batch) with one tokenizer
call, the same ids as `Policy.encode_turn` / `Policy.encode_text` give each turn alone.

A policy that has its own `encode_turns(turns)` method is asked for it; one that keeps `Policy`'s `encode_text`
and `encode_turn` is batched here (each chat turn rendered by the template, then every text tokenised in one
call: a fast tokenizer encodes a batch in Rust, in parallel); any other policy (its own `encode_text` or
`encode_turn`, e.g. a protocol-only policy) is asked one turn at a time, so its own encoding always holds.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lmgym.policies.base import Policy
from lmgym.policies.chat_turns import turn_text

Turn = tuple[str, str | None, Sequence[int]]  # (text, role: None for raw text, the tokens it follows)


def encode_turns(policy: Any, turns: Sequence[Turn]) -> list[list[int]]:
    """For each (text, role, after) of `turns`: `policy.encode_text(text)` where role is None, else
    `policy.encode_turn(text, role, after)`; in one tokenizer call where the policy allows it (see the module
    doc). A text that is not a str, or a role the template rejects, is a one-line ValueError."""
    own = getattr(policy, "encode_turns", None)
    if callable(own):
        return own(turns)
    for text, _, _ in turns:
        if not isinstance(text, str):
            raise ValueError(f"encode_turns: each turn's text must be a str; got {type(text).__name__}")
    if not _default_encoding(policy):
        return [policy.encode_text(text) if role is None else policy.encode_turn(text, role, after)
                for text, role, after in turns]
    if not turns:
        return []
    tokenizer, chat = policy.tokenizer, bool(policy.use_chat_template)
    texts = [turn_text(tokenizer, text, role) if chat and role is not None else text for text, role, _ in turns]
    ids = [list(row) for row in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    if chat:
        specials = set(tokenizer.all_special_ids)
        for row, (_, role, after) in zip(ids, turns):
            if role is not None and after and row and after[-1] == row[0] and row[0] in specials:
                del row[0]  # the assistant already closed its turn (as chat_turns.turn_ids drops it)
    return ids


def _default_encoding(policy: Any) -> bool:
    """Whether `policy` encodes text and turns as `Policy` does (it inherits both methods unchanged)."""
    cls = type(policy)
    return (getattr(cls, "encode_text", None) is Policy.encode_text
            and getattr(cls, "encode_turn", None) is Policy.encode_turn)
