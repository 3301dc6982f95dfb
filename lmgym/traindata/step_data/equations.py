"""Plain arithmetic in solution steps: find "a op b = c" equations, evaluate them exactly, write numbers.

Only numbers and + - * / (also "x" and "×" for times) are read, with the usual precedence; nothing is
ever evaluated as code. Every regex is linear on one line of text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

_TERM = r"\$?\d+(?:,\d{3})*(?:\.\d+)?"
_OP = r"(?:\s*[-+*/×]\s*|\s+x\s+)"
EQUATION_RE = re.compile(rf"(?<![\w.$])(?P<lhs>-?{_TERM}(?:{_OP}{_TERM})+)\s*=\s*"
                         r"\$?(?P<rhs>-?\d+(?:,\d{3})*(?:\.\d+)?)")
NUMBER_RE = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")
_TOKEN_RE = re.compile(r"\s*(?:(?P<num>\$?\d+(?:,\d{3})*(?:\.\d+)?)|(?P<op>[-+*/×]|x))")
_TIMES = {"x", "×"}
# the operation each one is mistaken for ("wrong operation")
SWAPPED_OP = {"+": "-", "-": "+", "*": "/", "/": "*", "x": "/", "×": "/"}


@dataclass(frozen=True)
class Equation:
    """One "lhs = rhs" in a line: where its operators and result are, and its operands in order."""

    numbers: tuple[Fraction, ...]
    ops: tuple[str, ...]
    op_spans: tuple[tuple[int, int], ...]  # character spans of the operators in the line
    rhs_span: tuple[int, int]  # character span of the stated result in the line
    lhs_span: tuple[int, int]  # character span of the left-hand side ("a op b ...") in the line


def parse_number(text: str) -> Fraction:
    """A number as written ("1,200", "$3.50", "-7") as an exact Fraction."""
    return Fraction(text.replace(",", "").replace("$", ""))


def format_number(value: Fraction, decimals: int | None = None) -> str:
    """An integer as is; other values with `decimals` places (default: up to 2, trailing zeros dropped, or 3
    significant digits for a value that would round to 0)."""
    if decimals is None:
        if value.denominator == 1:
            return str(value.numerator)
        text = f"{float(value):.2f}".rstrip("0").rstrip(".")
        return f"{float(value):.3g}" if text in ("0", "-0") else text
    return f"{float(value):.{decimals}f}" if decimals else str(round(value))


def decimals_of(text: str) -> int:
    """Digits after the decimal point in a written number."""
    return len(text.split(".", 1)[1]) if "." in text else 0


def evaluate(numbers: tuple[Fraction, ...] | list[Fraction], ops: tuple[str, ...] | list[str]) -> Fraction | None:
    """numbers[0] ops[0] numbers[1] ... with * and / before + and -, left to right; None on division by 0."""
    return solve_steps(list(numbers), list(ops))[1]


Operation = tuple[Fraction, str, Fraction, Fraction]  # left, op, right, result


def solve_steps(numbers: list[Fraction], ops: list[str]) -> tuple[list[Operation], Fraction | None]:
    """The operations done one at a time, as (left, op, right, result), and the value (None: division by 0)."""
    if len(numbers) != len(ops) + 1:
        raise ValueError(f"an expression needs one more number than operators; got {len(numbers)} and {len(ops)}")
    numbers, ops, done = list(numbers), ["*" if op in _TIMES else op for op in ops], []
    for level in ("*/", "+-"):
        index = 0
        while index < len(ops):
            if ops[index] not in level:
                index += 1
                continue
            left, op, right = numbers[index], ops[index], numbers[index + 1]
            if op == "/" and right == 0:
                return done, None
            result = {"*": left * right, "/": left / right if right else None, "+": left + right,
                      "-": left - right}[op]
            done.append((left, op, right, result))
            numbers[index:index + 2] = [result]
            del ops[index]
    return done, numbers[0]


def tokens(expression: str) -> tuple[list[Fraction], list[str], list[tuple[int, int]]]:
    """(numbers, operators, operator spans) of an expression like "16 - 3 - 4" or "-7 + 3"; a leading
    minus belongs to the first number. ValueError for anything else."""
    numbers, ops, spans, position, negative = [], [], [], 0, False
    for match in _TOKEN_RE.finditer(expression):
        if match.start() != position:
            break
        position = match.end()
        if match.group("num") is not None:
            if len(numbers) != len(ops):
                raise ValueError(f"two numbers in a row in {expression!r}")
            value = parse_number(match.group("num"))
            numbers.append(-value if negative else value)
            negative = False
        elif not numbers and match.group("op") == "-":
            negative = True
        else:
            if len(numbers) != len(ops) + 1:
                raise ValueError(f"two operators in a row in {expression!r}")
            ops.append(match.group("op"))
            spans.append(match.span("op"))
    if position != len(expression.rstrip()) or len(numbers) != len(ops) + 1 or not ops:
        raise ValueError(f"not an arithmetic expression: {expression!r}")
    return numbers, ops, spans


def find_equations(line: str) -> list[Equation]:
    """Every "a op b ... = c" in `line`, in order."""
    found = []
    for match in EQUATION_RE.finditer(line):
        try:
            numbers, ops, spans = tokens(match.group("lhs"))
        except ValueError:
            continue
        offset = match.start("lhs")
        found.append(Equation(tuple(numbers), tuple(ops), tuple((a + offset, b + offset) for a, b in spans),
                              match.span("rhs"), match.span("lhs")))
    return found
