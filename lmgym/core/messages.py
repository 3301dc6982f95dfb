"""How the toolkit's errors read: text on one line (what every one-line error message and recorded failure is
made of), and "did you mean ...?" for a mistyped name.

`close_names` puts first the names the mistyped one abbreviates (`learn` -> `learning_rate`, what
argparse's prefix matching used to take silently), then those whose words' initials it spells (`lr` ->
`learning_rate`), then difflib's closest matches (`learning_rat` -> `learning_rate`). A dotted name
(`mcts.simulatons`) is matched on its last part among the known names under the same prefix.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["one_line", "first_line", "error_line", "close_names", "did_you_mean"]

MAX_NAME = 200  # a longer "name" is no typo of ours: no suggestion (and difflib stays cheap)
CUTOFF = 0.6    # difflib's default similarity cutoff
MARGIN = 0.1    # difflib matches kept: those within this of the best one's similarity


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


def _initials(name: str) -> str:
    return "".join(word[0] for word in name.replace(".", "_").replace("-", "_").split("_") if word)


def close_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` of `known` that `name` most likely meant (case-insensitive; an empty list when none is close)."""
    name = str(name)
    if not name or len(name) > MAX_NAME:
        return []
    by_lower: dict[str, str] = {}
    for k in known:
        by_lower.setdefault(str(k).lower(), str(k))
    outer, dot, leaf = name.rpartition(".")
    inside = {k[len(outer) + 1:]: k for k in by_lower.values() if dot and k.startswith(outer + ".")}
    if inside:  # a nested config's field: matched on its own name among that config's fields
        return [inside[k] for k in close_names(leaf, inside, n)]
    typed = name.lower()
    found = [k for k in by_lower if k.startswith(typed) and k != typed]
    found += [k for k in by_lower if len(typed) >= 2 and "_" in k and _initials(k) == typed]
    scored = difflib.get_close_matches(typed, list(by_lower), n=n, cutoff=CUTOFF)
    if scored:  # only those about as close as the closest: `simulatons` -> simulations, not also max_tokens
        best = difflib.SequenceMatcher(None, typed, scored[0]).ratio()
        found += [k for k in scored if difflib.SequenceMatcher(None, typed, k).ratio() >= best - MARGIN]
    return [by_lower[k] for k in dict.fromkeys(found)][:n]


def did_you_mean(name: str, known: Iterable[str], quote=str) -> str:
    """" (did you mean X or Y?)" for `close_names(name, known)`, each shown with `quote`; "" when none is close."""
    matches = close_names(name, known)
    return f" (did you mean {' or '.join(map(quote, matches))}?)" if matches else ""
