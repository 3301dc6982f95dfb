"""A screen for model text that looks like code, applied before ``grader="math_verify"`` sees it.

Math-Verify extracts an answer from the raw text itself, and from code it happily takes the last
number: ``__import__('os').system('x') or 0`` is credited for the gold 0, ``0 if x else 1`` too.  A
math answer never needs Python syntax, so such text is refused in the parent process (no parsing,
no evaluation, linear time) and never reaches the worker.

Refused: backticks (inline code, fences), dunder names (``__import__``), calls of Python builtins
(``print(``, ``eval(``, ``open(``, ...), attribute calls (``os.system(``), a method or subscript on a
call, list or string (``).system``, ``[1, 2][0]``), a name called with a string or with nothing
(``system('x')``, ``f()``), ``or``/``and`` after a call, list or string (``...) or 0``) or next to a
Python literal (``True and 0``), ``==`` and ``:=``, ``lambda ...:``, ``def name(``, ``import``
statements, ``return`` at the start of a statement, and a conditional expression (``a if c else b``
on one line).  Not refused: LaTeX (``\\lambda``, ``\\int(x)``, ``\\text{or}``), ``f(x) = 2x+3``,
``\\sin(x)``, ``x = 1 or x = 2``, intervals and prose.
"""

from __future__ import annotations

import re

__all__ = ["looks_like_code"]

_BUILTINS = "print|exec|eval|exit|quit|open|compile|getattr|setattr|delattr|hasattr|globals|locals|vars|breakpoint"
_CODE_RE = re.compile(
    r"`"
    r"|__[A-Za-z]\w*__"
    rf"|(?<![\\\w])(?:{_BUILTINS}|isinstance|repr|system|popen)\("
    r"|(?<!\w)[A-Za-z_]\w*\.[A-Za-z_]\w*\("  # attribute call: os.system(
    r"|[)\]'\"]\.[A-Za-z_]"  # method of a call, list or string: ').system', '].append'
    r"|[)\]]\["  # subscript of a call or list: ()[0], [1, 2][0]
    r"|[A-Za-z_]\([ \t]*['\"]"  # a name called with a string: system('x')
    r"|(?<![\\\w])[A-Za-z_]\w*\(\)"  # a name called with nothing: f(), __subclasses__()
    r"|[)\]'\"][ \t]*(?:or|and)[ \t]+[-+]?\d"  # ... ) or 0
    r"|(?<![\\\w])(?:True|False|None)[ \t]+(?:or|and)\b|\b(?:or|and)[ \t]+(?:True|False|None)\b"
    r"|==|:="
    r"|(?<![\\\w])lambda(?:[ \t]+[A-Za-z_]\w*(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*)?[ \t]*:"
    r"|(?<![\\\w])def[ \t]+[A-Za-z_]\w*[ \t]*\("
    r"|(?:^|[;\n])[ \t]*(?:import|from[ \t]+[\w.]+[ \t]+import)[ \t]+[A-Za-z_]"
    r"|(?:^|[;:\n])[ \t]*return\b",
    re.ASCII,
)
_IF_RE = re.compile(r"(?<![\\\w])if[ \t]+\S")
_ELSE_RE = re.compile(r"[ \t]else\b")


def _has_conditional_expression(text: str) -> bool:
    """``a if c else b`` on one line: an ``if`` (not at the line's start) followed by ``else`` on that line."""
    for line in text.splitlines():
        m = _IF_RE.search(line, 1)
        if m is not None and _ELSE_RE.search(line, m.end()):
            return True
    return False


def looks_like_code(text: str) -> bool:
    """True if ``text`` has Python syntax that no math answer needs (see the module docstring)."""
    return bool(_CODE_RE.search(text)) or _has_conditional_expression(text)
