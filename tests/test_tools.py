"""lmgym.envs.tools: the Tool protocol, TagTool's parse limits and CPU-bounded execute, and the calculator tool."""

from __future__ import annotations

import re

import pytest

from lmgym.envs import CalculatorTool, TagTool, Tool, ToolCall
from lmgym.envs.calculator import MAX_CALC_CHARS
from lmgym.envs.safe_arith import MAX_NESTING
from tests.cpu_timing import cpu_call
from tests.tiers import slow
from tests.tool_toys import LookupTool, ShoutTool


class SpinTool(TagTool):
    """Never returns on its own, and swallows ordinary exceptions."""

    def __init__(self) -> None:
        super().__init__("spin", "burns CPU", cpu_seconds=0.2)

    def run(self, argument: str) -> str:
        while True:
            try:
                sum(range(10_000))
            except Exception:  # noqa: BLE001 - the bound must still stop it
                pass


class BrokenTool(TagTool):
    def __init__(self, output: object = None) -> None:
        super().__init__("broken", "fails")
        self.output = output

    def run(self, argument: str) -> str:
        if self.output is None:
            raise KeyError(argument)
        return self.output  # type: ignore[return-value]


def test_calculator_tool_states_its_syntax_and_stop_string():
    calc = CalculatorTool()
    assert isinstance(calc, Tool) and isinstance(ShoutTool(), Tool) and not isinstance(object(), Tool)
    assert (calc.name, calc.syntax, calc.stop_string) == ("calc", "<calc>EXPRESSION</calc>", "</calc>")
    assert calc.result_text("12") == "<result>12</result>"


@pytest.mark.parametrize(
    ("text", "argument"),
    [
        ("So <calc>3*4</calc>", "3*4"),
        ("<calc>(1+2)*3</calc>  \n", "(1+2)*3"),  # trailing white space after the call
        ("<calc>1</calc> then <calc>2+2</calc>", "2+2"),  # the call the text ends with
        ("<calc></calc>", ""),
    ],
)
def test_parse_reads_the_call_the_text_ends_with(text, argument):
    assert CalculatorTool().parse(text) == ToolCall("calc", argument)


@pytest.mark.parametrize(
    "text",
    [
        "3*4",  # no call
        "<calc>3*4</calc> and more",  # the call does not end the text
        "3*4</calc>",  # no opening tag
        "<calc>3*4</lookup>",  # another tool's closing tag
        "<calc>" + "1+" * MAX_CALC_CHARS + "1</calc>",  # over the input size limit
        "<calc>" + "(" * (MAX_NESTING + 1) + "1" + ")" * (MAX_NESTING + 1) + "</calc>",  # nested too deep
    ],
)
def test_parse_refuses_no_call_and_calls_over_the_limits(text):
    assert CalculatorTool().parse(text) is None


def test_parse_accepts_the_largest_argument_and_nesting_allowed():
    calc = CalculatorTool()
    longest = "1" * MAX_CALC_CHARS
    deepest = "(" * MAX_NESTING + "1" + ")" * MAX_NESTING
    assert calc.parse(f"<calc>{longest}</calc>") == ToolCall("calc", longest)
    assert calc.parse(f"<calc>{deepest}</calc>") == ToolCall("calc", deepest)


def test_parse_of_a_huge_text_reads_only_its_end():
    text = "x" * 1_000_000 + "<calc>2**10</calc>"
    call, seconds = cpu_call(CalculatorTool().parse, text)
    assert call == ToolCall("calc", "2**10") and seconds < 1.0


@pytest.mark.parametrize(
    ("argument", "output"),
    [("3*4", "12"), ("1/3", "0.333333"), ("2 ** 10", "1024"), ("9**9**9", "error: not an arithmetic expression"),
     ("__import__('os')", "error: not an arithmetic expression"), ("", "error: not an arithmetic expression")],
)
def test_calculator_executes_exactly_and_refuses_code_and_huge_numbers(argument, output):
    assert CalculatorTool().execute(ToolCall("calc", argument)) == output


@slow
def test_execute_is_bounded_in_cpu_time_and_never_raises():
    output, seconds = cpu_call(SpinTool().execute, ToolCall("spin", ""))
    assert output == "error: spin ran out of time" and seconds < 5.0
    assert BrokenTool().execute(ToolCall("broken", "x")) == "error: broken failed (KeyError)"
    assert BrokenTool(output=7).execute(ToolCall("broken", "x")) == "error: broken returned int, not text"
    assert BrokenTool(output="y" * 10_000).execute(ToolCall("broken", "x")) == "y" * 500
    assert CalculatorTool().execute(ToolCall("lookup", "1+1")) == "error: not a call of calc"


def test_a_tag_tool_of_the_tests_answers_its_lookup():
    lookup = LookupTool()
    assert lookup.execute(lookup.parse("<lookup> Apple </lookup>")) == "3"
    assert lookup.execute(ToolCall("lookup", "kiwi")) == "error: unknown fruit"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "my calc"}, "tool name must be a non-empty str of letters, digits, '_' or '-'; got 'my calc'"),
        ({"name": ""}, "tool name must be"),
        ({"max_input_chars": 0}, "max_input_chars must be an int >= 1; got 0"),
        ({"cpu_seconds": -1}, "cpu_seconds must be a number of seconds > 0 or None; got -1"),
        ({"max_nesting": 1.5}, "max_nesting must be an int >= 1"),
    ],
)
def test_bad_tool_arguments_are_one_line_errors(kwargs, message):
    class Plain(TagTool):
        def run(self, argument: str) -> str:
            return argument

    arguments = {"name": "plain", "description": "echo", **kwargs}
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        Plain(**arguments)
