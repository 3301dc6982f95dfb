"""Finding the final answer in a model's text (no evaluation, only string scanning)."""

from __future__ import annotations

import re

__all__ = ["extract_answer", "gsm8k_gold"]

_NUMBER = r"[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?"  # 1,234 -2.5 3/4
_NUMBER_RE = re.compile(_NUMBER)
_ANSWER_IS_RE = re.compile(r"\banswer\s*(?:is\b|:)\s*:?[ \t]*", re.IGNORECASE)
_PROSE_RE = re.compile(r"[A-Za-z]{2,} +[A-Za-z]{2,} +[A-Za-z]{2,}")
_LEADING_NUMBER_RE = re.compile(rf"\$?({_NUMBER})\s+[A-Za-z]")


def _clean(s: str) -> str:
    """Strip whitespace, surrounding ``$`` and trailing periods."""
    prev = None
    while prev != s:
        prev = s
        s = s.strip().rstrip(".").strip().strip("$")
    return s


def _last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces), or None."""
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    i = start + len("\\boxed")
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != "{":
        m = re.match(r"\s+([^\s$]+)", text[start + len("\\boxed"):])  # "\boxed 5"
        return m.group(1) if m else None
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None  # unbalanced (truncated) box


def extract_answer(text: str) -> str | None:
    """Return the final answer in a model's text, or None.

    Priority: text after the last ``####`` (to end of line), the last
    ``\\boxed{...}``, "The answer is X" / "answer: X", the last number.
    """
    if not isinstance(text, str):
        return None
    idx = text.rfind("####")
    if idx >= 0:
        ans = _clean(text[idx + 4 :].split("\n", 1)[0])
        if ans:
            return ans
    boxed = _last_boxed(text)
    if boxed is not None and _clean(boxed):
        return _clean(boxed)
    last = None
    for last in _ANSWER_IS_RE.finditer(text):
        pass
    if last is not None:
        ans = _clean(text[last.end() :].lstrip().split("\n", 1)[0])
        m = _LEADING_NUMBER_RE.match(ans)  # "18 apples" -> "18"
        if m:
            return m.group(1)
        if _PROSE_RE.search(ans):  # "that she has 5 apples" -> "5"
            nums = _NUMBER_RE.findall(ans)
            if nums:
                return nums[-1]
        if ans:
            return ans
    last = None
    for last in _NUMBER_RE.finditer(text):
        pass
    return last.group(0) if last is not None else None


def gsm8k_gold(answer_field: str) -> str:
    """Gold answer of a GSM8K ``answer`` field: text after ``####``, commas removed."""
    idx = answer_field.rfind("####")
    if idx < 0:
        raise ValueError(f"GSM8K answer field has no '####' marker: {answer_field[-80:]!r}")
    gold = answer_field[idx + 4 :].strip().split("\n", 1)[0].strip().replace(",", "")
    if not gold:
        raise ValueError("GSM8K answer field has an empty answer after '####'")
    return gold

