"""A multi-turn env whose actions may end in tool calls: the env runs the tool and writes its result.

Episode (mode ``"multi_turn"``): each action is model text.

- It ends with a complete call of one of the env's tools (``<calc>3*4</calc>``, trailing white space
  allowed): the env executes it and injects ``tool.result_text(output)`` (``<result>12</result>``) as
  ``info["injected_text"]``, with ``info["injected_role"] = result_role`` (None: raw text appended
  after the call; "tool" or "user": a chat turn of that role); the episode goes on. A call the tool
  cannot parse (over its size or nesting limits) is answered ``error: ...``, and so is a call of a tool
  that is not available now (``available_tools``).
- Otherwise, it contains a complete final answer ``<answer>...</answer>``: the episode ends
  (terminated); the answer is the text of the last such tag, graded by ``is_correct`` (base: exact
  match; ``ToolArithmeticEnv`` uses the math grader). An action that ends in a tool call is never final.
- Otherwise (no call, no answer): raw mode writes a line break (as stepwise envs do); chat mode
  (``result_role`` set) writes ``nudge`` as a "user" turn.
- ``max_steps`` actions without a final answer: truncated (scored, unparseable).

Stop strings, read per turn: the closing strings of the tools available now (each tool may be called
``max_tool_calls`` times per episode; a subclass may override ``available_tools`` for phases) and
``</answer>``. Per-episode tool-call counts (``tool_calls``), the log of calls (``tool_log``: tool,
argument, output) and the calls whose tool itself failed (``tool_errors``: tool, error; e.g. a document
store whose search raised, recorded by a subclass with ``record_tool_error``) are episode state (saved by
``get_state``), reported in every step's ``info`` and to the reward functions. Trainers count
``tool_errors`` in their metrics (evaluation/episode_metrics.py).

Batched tool calls: before the episode engine steps a batch of branches, ``prepare_steps`` hands each tool
that has ``prepare_calls(calls)`` every well-formed call of that tool among the batch's actions, so it can run
them at once (the RAG env's search tool: one batched search of every query) and answer each branch's step
from what it found, exactly as a call on its own would be answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from lmgym.core.messages import error_line
from lmgym.envs.base import LanguageEnv
from lmgym.envs.checks import check_choice, check_positive_int, check_str
from lmgym.envs.tools import Tool, ToolCall

ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
RESULT_ROLES = (None, "tool", "user")
NUDGE_ROLE = "user"
DEFAULT_NUDGE = "Call a tool, or give the final answer as <answer>...</answer>."
MAX_ERROR_CHARS = 300  # of a recorded tool error


def last_answer(text: str) -> str | None:
    """The stripped text of the last complete ``<answer>...</answer>`` in ``text``, or None (blank too)."""
    end = text.rfind(ANSWER_CLOSE)
    start = text.rfind(ANSWER_OPEN, 0, end) if end >= 0 else -1
    if start < 0:
        return None
    return text[start + len(ANSWER_OPEN) : end].strip() or None


def tools_instruction(tools: Sequence[Tool]) -> str:
    """The default instruction: the tools' syntax and descriptions, how results come back, how to answer."""
    calls = "; ".join(f"{tool.syntax} ({tool.description})" for tool in tools)
    return (f" Tools: {calls}. Each call is answered in the text. Give the final answer as "
            f"{ANSWER_OPEN}...{ANSWER_CLOSE}.\n")


class ToolEnv(LanguageEnv):
    """A LanguageEnv whose actions may call tools (see the module docstring); a subclass gives the problems.

    Args:
        tools: the tools (unique names, distinct stop strings that do not end one another).
        max_tool_calls: calls of each tool per episode; a used-up tool is no longer available.
        result_role: None (tool results are raw text), "tool" or "user" (a chat turn of that role).
        nudge: the "user" turn written after an action with no call and no answer (chat mode only).
        instruction: appended to each question; None: ``tools_instruction(tools)``.
        mode: "multi_turn" (the only mode).
        **base_kwargs: LanguageEnv's other keyword arguments (max_steps, reward_fns, reward_weights,
            render_mode, max_action_chars, reward_timeout).
    """

    modes = ("multi_turn",)
    episode_state: ClassVar[dict[str, Any]] = {"tool_calls": {}, "tool_log": [], "tool_errors": []}

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        max_tool_calls: int = 4,
        result_role: str | None = None,
        nudge: str = DEFAULT_NUDGE,
        instruction: str | None = None,
        mode: str = "multi_turn",
        **base_kwargs: Any,
    ):
        self.tools = checked_tools(tools)
        check_positive_int("max_tool_calls", max_tool_calls)
        check_choice("result_role", result_role, RESULT_ROLES)
        check_str("nudge", nudge)
        instruction = tools_instruction(self.tools) if instruction is None else instruction
        super().__init__(mode=mode, instruction=instruction, **base_kwargs)
        self.max_tool_calls = max_tool_calls
        self.result_role = result_role
        self.nudge = nudge

    def available_tools(self) -> list[Tool]:
        """The tools the model may call next: those with calls left this episode."""
        return [tool for tool in self.tools if self.tool_calls.get(tool.name, 0) < self.max_tool_calls]

    @property
    def stop_strings(self) -> list[str]:
        """The available tools' closing strings and ``</answer>``."""
        return [tool.stop_string for tool in self.available_tools()] + [ANSWER_CLOSE]

    def parse_answer(self, solution: str) -> str | None:
        """The text of the last complete ``<answer>...</answer>``, or None."""
        return last_answer(solution)

    def is_final_action(self, action: str) -> bool:
        """A complete ``<answer>...</answer>`` in an action that does not end in a tool call."""
        return self.called_tool(action) is None and last_answer(action) is not None

    def called_tool(self, action: str) -> Tool | None:
        """The tool whose call closes ``action`` (trailing white space allowed), or None."""
        body = action.rstrip()
        return next((tool for tool in self.tools if body.endswith(tool.stop_string)), None)

    def respond(self, action: str, final: bool) -> tuple[str, str | None]:
        """A called tool's result (role ``result_role``); after a final answer nothing; otherwise a line
        break (raw mode) or the nudge as a "user" turn."""
        tool = None if final else self.called_tool(action)
        if tool is not None:
            return tool.result_text(self._call(tool, action)), self.result_role
        if final:
            return "", None
        if self.result_role is None:
            return ("" if action.endswith("\n") else "\n"), None
        return self.nudge, NUDGE_ROLE

    def prepare_steps(self, actions: Sequence[str]) -> None:
        """Each tool that batches (one with ``prepare_calls(calls)``, e.g. the RAG env's ``SearchTool``) gets
        the well-formed calls that ``actions`` end with, in one list, whether or not each branch may make its
        call now; the others get nothing. ``[]`` hands each of those tools ``[]`` (drop what you kept)."""
        calls: dict[str, list[ToolCall]] = {tool.name: [] for tool in self.tools}
        for action in actions:
            action = action[: self.max_action_chars] if isinstance(action, str) else ""  # cut as step cuts it
            tool = self.called_tool(action)
            call = tool.parse(action) if tool is not None else None
            if call is not None:
                calls[tool.name].append(call)
        for tool in self.tools:
            prepare = getattr(tool, "prepare_calls", None)
            if callable(prepare):
                prepare(calls[tool.name])

    def episode_info(self) -> dict[str, Any]:
        """``tool_calls`` (calls per tool this episode), ``tool_log`` (tool, argument, output per call) and
        ``tool_errors`` (tool, error per call whose tool failed)."""
        return {"tool_calls": dict(self.tool_calls), "tool_log": [dict(entry) for entry in self.tool_log],
                "tool_errors": [dict(entry) for entry in self.tool_errors]}

    def record_tool_error(self, tool: Tool, error: BaseException) -> None:
        """Note that a call of ``tool`` failed with ``error`` (not the model's fault: the tool could not run),
        as "ExceptionType: first line of its message" (the line cut to MAX_ERROR_CHARS characters)."""
        self.tool_errors.append({"tool": tool.name, "error": error_line(error, MAX_ERROR_CHARS)})

    def _call(self, tool: Tool, action: str) -> str:
        """Run the call that ends ``action``, count it and log it; the output text."""
        call = tool.parse(action)
        available = tool in self.available_tools()
        if not available:
            output = f"error: {tool.name} is not available now"
        elif call is None:
            output = f"error: not a valid call; write {tool.syntax}"
        else:
            output = tool.execute(call)
        if available:  # a call of an unavailable tool does not count against its budget
            self.tool_calls[tool.name] = self.tool_calls.get(tool.name, 0) + 1
        self.tool_log.append({"tool": tool.name, "argument": call.argument if call else None, "output": output})
        return output


def checked_tools(tools: Any) -> list[Tool]:
    """``tools`` as a list, or a one-line ValueError: not Tools, no tools, a repeated name, or a stop string
    that ends another (the env could not tell which tool was called)."""
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence) or not tools:
        raise ValueError(f"tools must be a non-empty list of Tool objects; got {tools!r}")
    for tool in tools:
        if not isinstance(tool, Tool):
            raise ValueError(f"tools must be Tool objects (name, syntax, description, stop_string, parse, "
                             f"execute, result_text); got {type(tool).__name__}")
    names = [tool.name for tool in tools]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"tool names must be unique; {repeated[0]!r} is used twice")
    stops = [tool.stop_string for tool in tools] + [ANSWER_CLOSE]
    for i, stop in enumerate(stops):
        if not isinstance(stop, str) or not stop:
            raise ValueError(f"tool {names[i]!r} needs a non-empty stop_string; got {stop!r}")
        clash = next((other for j, other in enumerate(stops) if j != i and stop.endswith(other)), None)
        if clash is not None:
            raise ValueError(f"tool stop strings must not end with another's (or {ANSWER_CLOSE!r}): "
                             f"{stop!r} ends with {clash!r}")
    return list(tools)
