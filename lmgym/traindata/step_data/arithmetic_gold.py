"""Gold step-by-step solutions of Arithmetic-v0 problems: one line per operation, then "#### N".

Levels 0-3 ask "What is <expression>?"; the expression is worked with the usual precedence (* before
+ and -, left to right). Level 4's word problems are read by their template's wording: its numbers,
in the order the question states them, go into the template's expression.
"""
from __future__ import annotations

import re
from fractions import Fraction

from lmgym.envs.base import Problem
from lmgym.traindata.step_data.equations import Operation, format_number, solve_steps, tokens

_WHAT_IS_RE = re.compile(r"What is ([-+*/ 0-9]+)\?")
_INTEGER_RE = re.compile(r"\d+")
# level 4: a phrase that identifies the template -> its expression over the question's numbers
WORD_EXPRESSIONS = (
    ("bags of", "{0} + {1} * {2} - {3}"),
    ("trays of", "{0} * {1} - {2}"),
    ("pages every day", "{0} * {1} + {2}"),
    ("A box holds", "{0} * {1} + {2}"),
    ("books that cost", "{0} - {1} * {2}"),
    ("groups of", "{0} / {1} * {2}"),
    ("per hour", "{0} * {1} * {2}"),
)


def arithmetic_expression(question: str) -> str:
    """The arithmetic an Arithmetic-v0 question asks for ("12 + 7 * 3"); ValueError if it is not one."""
    match = _WHAT_IS_RE.fullmatch(question.strip())
    if match:
        return match.group(1).strip()
    numbers = _INTEGER_RE.findall(question)
    for phrase, expression in WORD_EXPRESSIONS:
        if phrase in question:
            return expression.format(*numbers)
    raise ValueError(f"not an Arithmetic-v0 question: {question[:80]!r}")


def solved_arithmetic(question: str) -> tuple[list[Operation], Fraction]:
    """An Arithmetic-v0 question worked: its operations `(a, op, b, result)` in order, and its value (ValueError
    if it is not one or divides by zero)."""
    numbers, ops, _ = tokens(arithmetic_expression(question))
    done, value = solve_steps(numbers, ops)
    if value is None:
        raise ValueError(f"division by zero in {question[:80]!r}")
    return done, value


def arithmetic_steps(question: str) -> tuple[str, ...]:
    """The gold solution of an Arithmetic-v0 question as steps: "a op b = c" per operation, then "#### N"
    (each step ends in a line break)."""
    done, value = solved_arithmetic(question)
    lines = [f"{format_number(a)} {op} {format_number(b)} = {format_number(c)}\n" for a, op, b, c in done]
    return (*lines, f"#### {format_number(value)}\n")


def problem_gold_steps(problem: Problem) -> tuple[str, ...]:
    """`arithmetic_steps` of an Arithmetic-v0 problem's question; ValueError if they do not end in its gold
    answer."""
    steps = arithmetic_steps(problem.question)
    if steps[-1] != f"#### {problem.gold}\n":
        raise ValueError(f"the gold solution of {problem.problem_id} ends {steps[-1]!r}, not #### {problem.gold}")
    return steps
