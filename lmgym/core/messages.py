"""Error text on one line: what every one-line error message and recorded failure of the toolkit is made of."""
from __future__ import annotations

__all__ = ["one_line", "first_line", "error_line"]


def one_line(text: str) -> str:
    """`text` with its whitespace runs (newlines included) turned into single spaces."""
    return " ".join(text.split())


def _message(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails still gets reported
        return "(message could not be read)"


def first_line(error: BaseException) -> str:
    """The first non-blank line of `error`'s message, stripped; its type's name when the message is blank."""
    return next((ln.strip() for ln in _message(error).splitlines() if ln.strip()), type(error).__name__)


def error_line(error: BaseException, max_chars: int) -> str:
    """ "ExceptionType: first line of its message", the message cut to `max_chars` ("..." marks a cut)."""
    lines = _message(error).strip().splitlines()
    message = lines[0] if lines else ""
    if len(message) > max_chars:
        message = message[: max_chars - 3] + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
