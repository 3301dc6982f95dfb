"""A toy two-tool env for tests: its stop strings change per turn.

Tools: ``shout`` (any text ending in "!" is a call: the env answers with the last line shouted, a
``Tool`` written against the protocol alone) and ``lookup`` (a ``TagTool``: ``<lookup>apple</lookup>``
answers the fruit's number). Phases: on the first turn only ``shout`` is available; afterwards every
tool with calls left (``max_tool_calls`` per tool, default 1). So the stop strings go
``["!", "</answer>"]`` -> ``["</lookup>", "</answer>"]`` after a shout -> ``["</answer>"]`` once both
are used up. The character-level tiny model writes "!" often enough to call ``shout`` by chance.
"""

from __future__ import annotations

from typing import ClassVar

from lmgym.envs import Problem, TagTool, ToolCall, ToolEnv, correctness_reward, register

FRUIT_NUMBERS = {"apple": "3", "pear": "5", "plum": "7", "fig": "11"}
MAX_SHOUT_CHARS = 40


class ShoutTool:
    """A protocol-only tool: text ending in "!" is a call; the output is its last line in capitals."""

    name = "shout"
    syntax = "WORDS!"
    description = "repeats the line in capitals"
    stop_string = "!"

    def parse(self, text: str) -> ToolCall | None:
        body = text.rstrip()
        if not body.endswith(self.stop_string):
            return None
        line = body[:-1].rsplit("\n", 1)[-1]
        return ToolCall(self.name, line) if len(line) <= MAX_SHOUT_CHARS else None

    def execute(self, call: ToolCall) -> str:
        return call.argument.upper()

    def result_text(self, output: str) -> str:
        return f" [{output}]"


class LookupTool(TagTool):
    """``<lookup>FRUIT</lookup>``: the fruit's number."""

    def __init__(self) -> None:
        super().__init__("lookup", "the number of a fruit", argument_name="FRUIT", max_input_chars=20)

    def run(self, argument: str) -> str:
        return FRUIT_NUMBERS.get(argument.strip().lower(), "error: unknown fruit")


class FruitToolsEnv(ToolEnv):
    """What is a fruit's number? Two tools, available in phases (see the module docstring)."""

    default_reward_fns: ClassVar[dict] = {"correctness": correctness_reward}

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("max_tool_calls", 1)
        kwargs.setdefault("max_steps", 3)
        super().__init__([ShoutTool(), LookupTool()], **kwargs)

    @property
    def num_problems(self) -> int:
        return len(FRUIT_NUMBERS)

    def get_problem(self, index: int) -> Problem:
        fruit = list(FRUIT_NUMBERS)[index]
        return Problem(f"What is the number of {fruit}?", FRUIT_NUMBERS[fruit], f"fruit/{fruit}")

    def available_tools(self) -> list:
        left = super().available_tools()
        return [tool for tool in left if tool.name == "shout"] if self.steps_taken == 0 else left


register("ToyFruitTools-v0", FruitToolsEnv)
