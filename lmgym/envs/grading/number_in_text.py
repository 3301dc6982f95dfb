"""The one number of a short answer written as words, units or money (``1,000.99€``, ``USD 5``, ``Rs. 500``).

Used only against a gold that is a plain number (``lmgym.envs.answers``): "The cost is $1,000.99" then
states 1000.99.  A string scan, no evaluation, linear in its (bounded) input.

Accepted: exactly one number (digits, thousands commas, one decimal point or decimal comma, a sign,
``%``), not glued to a letter on either side (``5x``, ``x2``, ``5th`` are no such numbers), and
around it only words of any script, currency signs and sentence punctuation.  Refused: a second
digit anywhere, any operator, bracket or backslash (an expression or LaTeX: the worker's job), a
single Latin letter (a variable: ``5 x``), a math word (``2 pi``) and the hedge words of
``HEDGE_WORDS`` (``5 or 6``, ``at least 5``, ``not 5``), which change what is stated.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["HEDGE_WORDS", "MAX_TEXT_CHARS", "is_greek", "sole_number"]

MAX_TEXT_CHARS = 200
HEDGE_WORDS = frozenset(
    "or and not no nor least most than more less fewer between except without over under above below "
    "up to from approximately approx about around nearly almost roughly maybe perhaps possibly "
    "pi sin cos tan log ln exp sqrt mod lambda return yield print if else elif def import".split()
)
# A number: sign, ASCII digits with optional thousands or decimal separators, optional percent.  No letter of
# any script, digit or point may touch it (the lookarounds: "5x", "x2", "2π", "1.2.3" are no sole numbers).
_NUMBER_RE = re.compile(r"(?<![\w.,])([-+−]?[0-9]+(?:[.,][0-9]+)*)(\s?%)?(?!\w)")
_DIGIT_RE = re.compile(r"\d")
_WORD_RE = re.compile(r"[^\W\d_]+")
_ALLOWED_PUNCTUATION = frozenset(" \t.,:;!?'\"’-")


def is_greek(ch: str) -> bool:
    """A Greek letter (a math symbol such as π, never a unit word)."""
    return "\u0370" <= ch <= "\u03ff" or "\u1f00" <= ch <= "\u1fff"


def _is_allowed_char(ch: str) -> bool:
    return ch in _ALLOWED_PUNCTUATION or unicodedata.category(ch)[0] in "LM" or unicodedata.category(ch) == "Sc"


def sole_number(text: str) -> str | None:
    """The written number of ``text`` if it is the only one, surrounded by words and currency only; else None.

    ``"1,000.99€"`` -> ``"1,000.99"``; ``"USD 5"`` -> ``"5"``; ``"50 %"`` -> ``"50%"``;
    ``"5 or 6"``, ``"at least 5"``, ``"5x"``, ``"2 + 3"`` -> None.
    """
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
        return None
    numbers = list(_NUMBER_RE.finditer(text))
    if len(numbers) != 1:
        return None
    m = numbers[0]
    rest = text[: m.start()] + " " + text[m.end() :]
    if _DIGIT_RE.search(rest) or not all(_is_allowed_char(ch) for ch in rest):
        return None
    for word in _WORD_RE.findall(rest):
        if word.lower() in HEDGE_WORDS or (len(word) == 1 and word.isascii()) or any(map(is_greek, word)):
            return None
    return m.group(1).replace("−", "-") + ("%" if m.group(2) else "")
