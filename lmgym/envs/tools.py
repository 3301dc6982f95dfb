"""Tools a model may call from its text: the ``Tool`` protocol, ``TagTool`` (calls written as
``<name>ARGUMENT</name>``) and ``CalculatorTool``, the first tool.

A tool's text comes from the model, so it is untrusted: ``parse`` refuses arguments longer than
``max_input_chars`` or with brackets nested deeper than ``max_nesting`` (before anything reads them), and
``execute`` runs under a CPU-time bound (:func:`lmgym.envs.rewards.guard.cpu_time_limit`: SIGPROF, main thread
only; elsewhere a tool runs unbounded, so a tool must bound its own work too, as the calculator does)
and never raises: a failure is an ``"error: ..."`` output the model sees. Outputs longer than
``max_output_chars`` are cut.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from lmgym.envs.calculator import MAX_CALC_CHARS, safe_calculate
from lmgym.envs.checks import check_positive_int, check_timeout
from lmgym.envs.rewards.guard import RewardTimeout, cpu_time_limit
from lmgym.envs.safe_arith import MAX_NESTING, max_nesting

__all__ = ["CalculatorTool", "TagTool", "Tool", "ToolCall"]

DEFAULT_TOOL_CPU_SECONDS = 1.0
DEFAULT_MAX_OUTPUT_CHARS = 500
RESULT_OPEN, RESULT_CLOSE = "<result>", "</result>"


@dataclass(frozen=True)
class ToolCall:
    """One parsed call: the tool's name and its argument text."""

    tool: str
    argument: str


@runtime_checkable
class Tool(Protocol):
    """What a tool env needs of a tool.

    ``name``: unique within an env. ``syntax``: how a call is written, shown to the model
    (``<calc>EXPRESSION</calc>``). ``description``: what the tool does, one line. ``stop_string``: the
    text that ends a call, where generation stops so the env can answer (``</calc>``).

    Optional, not part of the protocol: ``prepare_calls(calls: list[ToolCall]) -> None``, handed every branch's
    next call of this tool before they are executed one by one (``ToolEnv.prepare_steps``), to run them as one
    batch; each ``execute`` that follows must return what it would have without it.
    """

    name: str
    syntax: str
    description: str
    stop_string: str

    def parse(self, text: str) -> ToolCall | None:
        """The call that ``text`` ends with (trailing white space allowed), or None: no call of this tool,
        or one over the input size or nesting limits."""

    def execute(self, call: ToolCall) -> str:
        """The tool's output for ``call``, bounded in CPU time; ``"error: ..."`` on failure, never raises."""

    def result_text(self, output: str) -> str:
        """How ``output`` is written into the transcript (``<result>OUTPUT</result>``)."""


class TagTool(abc.ABC):
    """A tool called as ``<name>ARGUMENT</name>``; a subclass implements ``run(argument) -> str``.

    Args:
        name: the tag name (letters, digits, "_" or "-").
        description: one line shown to the model.
        argument_name: the placeholder in ``syntax`` (``<name>ARGUMENT</name>``).
        max_input_chars: longer arguments are not parsed.
        max_nesting: arguments with brackets nested deeper are not parsed.
        cpu_seconds: CPU-time bound of one ``run`` (None: no bound).
        max_output_chars: longer outputs are cut.
    """

    def __init__(
        self,
        name: str,
        description: str,
        *,
        argument_name: str = "ARGUMENT",
        max_input_chars: int = 200,
        max_nesting: int = MAX_NESTING,
        cpu_seconds: float | None = DEFAULT_TOOL_CPU_SECONDS,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    ):
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "_-" for c in name):
            raise ValueError(f"tool name must be a non-empty str of letters, digits, '_' or '-'; got {name!r}")
        if not isinstance(description, str) or not isinstance(argument_name, str):
            raise ValueError(f"tool {name!r}: description and argument_name must be str")
        check_positive_int("max_input_chars", max_input_chars)
        check_positive_int("max_nesting", max_nesting)
        check_timeout("cpu_seconds", cpu_seconds)
        check_positive_int("max_output_chars", max_output_chars)
        self.name, self.description = name, description
        self.open_tag, self.stop_string = f"<{name}>", f"</{name}>"
        self.syntax = f"{self.open_tag}{argument_name}{self.stop_string}"
        self.max_input_chars, self.max_nesting = max_input_chars, max_nesting
        self.cpu_seconds, self.max_output_chars = cpu_seconds, max_output_chars

    @abc.abstractmethod
    def run(self, argument: str) -> str:
        """The output for a parsed argument (may raise; ``execute`` turns that into an error output)."""

    def parse(self, text: str) -> ToolCall | None:
        """The ``<name>ARGUMENT</name>`` that ``text`` ends with (trailing white space allowed), or None:
        no such call, an argument longer than ``max_input_chars`` or nested deeper than ``max_nesting``."""
        if not isinstance(text, str):
            return None
        body = text.rstrip()
        if not body.endswith(self.stop_string):
            return None
        end = len(body) - len(self.stop_string)
        start = body.rfind(self.open_tag, max(0, end - self.max_input_chars - len(self.open_tag)), end)
        if start < 0:
            return None  # no opening tag, or the argument is longer than max_input_chars
        argument = body[start + len(self.open_tag) : end]
        if max_nesting(argument) > self.max_nesting:
            return None
        return ToolCall(self.name, argument)

    def execute(self, call: ToolCall) -> str:
        """``run(call.argument)`` within ``cpu_seconds`` CPU seconds; ``"error: ..."`` if it fails."""
        if not isinstance(call, ToolCall) or call.tool != self.name:
            return f"error: not a call of {self.name}"
        try:
            with cpu_time_limit(self.cpu_seconds):
                output = self.run(call.argument)
        except RewardTimeout:
            return f"error: {self.name} ran out of time"
        except Exception as error:  # noqa: BLE001 - a tool's failure is an output the model sees
            return f"error: {self.name} failed ({type(error).__name__})"
        if not isinstance(output, str):
            return f"error: {self.name} returned {type(output).__name__}, not text"
        return output[: self.max_output_chars]

    def result_text(self, output: str) -> str:
        """``<result>OUTPUT</result>``."""
        return f"{RESULT_OPEN}{output}{RESULT_CLOSE}"


class CalculatorTool(TagTool):
    """Exact arithmetic (``+ - * / **``, parentheses) by :func:`lmgym.envs.calculator.safe_calculate`: no eval,
    size-guarded, with its own deadline; called as ``<calc>EXPRESSION</calc>``."""

    def __init__(self, name: str = "calc", *, cpu_seconds: float | None = DEFAULT_TOOL_CPU_SECONDS):
        super().__init__(name, "exact arithmetic: + - * / ** and parentheses", argument_name="EXPRESSION",
                         max_input_chars=MAX_CALC_CHARS, cpu_seconds=cpu_seconds)

    def run(self, argument: str) -> str:
        """The value of ``argument`` ("24", "2.5", "0.333333"), or an error output."""
        value = safe_calculate(argument, timeout=self.cpu_seconds or DEFAULT_TOOL_CPU_SECONDS)
        return value if value is not None else "error: not an arithmetic expression"
