"""A gymnasium space for free-form text.

gymnasium's own ``Text`` space only accepts strings drawn from a fixed
character set and length range, which rejects ordinary model output
(newlines, LaTeX, unicode). ``AnyText`` accepts any ``str`` up to a length.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Space

from lmgym.core.chat import check_messages, is_messages

_SAMPLE_CHARS = string.ascii_letters + string.digits + string.punctuation + " \n"
_DEFAULT_SAMPLE_LENGTH = 32


class AnyText(Space[str]):
    """Any Python ``str`` of at most ``max_length`` characters."""

    def __init__(self, max_length: int = 100_000, seed: int | np.random.Generator | None = None):
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
            raise ValueError(f"max_length must be a positive int, got {max_length!r}")
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Text has no fixed-size numeric representation."""
        return False

    def contains(self, x: Any) -> bool:
        """True for any ``str`` no longer than ``max_length``."""
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: int | None = None, probability: Any = None) -> str:
        """A random printable string from this space's seeded generator.

        ``mask``, if given, is the exact length to sample; otherwise the length is
        uniform in ``[0, min(max_length, 32)]``.
        """
        if probability is not None:
            raise ValueError("AnyText.sample does not support `probability`")
        if mask is None:
            length = int(self.np_random.integers(0, min(self.max_length, _DEFAULT_SAMPLE_LENGTH) + 1))
        elif isinstance(mask, (int, np.integer)) and 0 <= mask <= self.max_length:
            length = int(mask)
        else:
            raise ValueError(f"AnyText.sample mask must be a length in [0, {self.max_length}], got {mask!r}")
        picks = self.np_random.integers(0, len(_SAMPLE_CHARS), size=length)
        return "".join(_SAMPLE_CHARS[i] for i in picks)

    def __repr__(self) -> str:
        return f"AnyText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyText) and other.max_length == self.max_length

    def __hash__(self) -> int:
        return hash((AnyText, self.max_length))


class AnyPrompt(AnyText):
    """An observation space for text or chat-format prompts: any ``str`` up to ``max_length``, or a list of
    {"role", "content"} messages (roles and content as ``lmgym.core.chat.check_messages`` accepts them) whose
    contents add up to at most ``max_length`` characters. ``sample`` draws text."""

    def contains(self, x: Any) -> bool:
        """True for text as ``AnyText`` takes it, or a valid non-empty list of messages within the length."""
        if isinstance(x, str):
            return super().contains(x)
        if not is_messages(x):
            return False
        try:
            messages = check_messages(x)
        except ValueError:
            return False
        return sum(len(m["content"]) for m in messages) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyPrompt(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyPrompt) and other.max_length == self.max_length

    def __hash__(self) -> int:
        return hash(("AnyPrompt", self.max_length))
