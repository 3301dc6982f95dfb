"""ReDoS shapes for a compiled regex, built from its own parse tree (a test helper, not a test file).

For every regex, pump strings are made of its literal characters, a
representative of each character class, pairs of those, and a string that
walks the pattern (first branch, two repetitions).  Each pump is repeated to
a long string and followed by a character that rarely matches, the shape that
makes a backtracking engine go quadratic or exponential.  Every run is bounded
with the env's own CPU-time limit (SIGPROF; ``re`` checks signals while it
matches), so an exponential pattern is reported instead of hanging the suite.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from functools import cache

try:  # Python >= 3.11
    import re._constants as sre_constants  # noqa: PLC2701 - the parser's opcodes
    import re._parser as sre_parse  # noqa: PLC2701 - the stdlib regex parser
except ImportError:  # Python 3.10
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

import lmgym.envs.base
import lmgym.envs.calculator
import lmgym.envs.extraction
import lmgym.envs.rewards.functions
import lmgym.envs.rewards.guard
from lmgym.envs.rewards.guard import RewardTimeout, cpu_time_limit

TEXT_MODULES = (lmgym.envs.extraction, lmgym.envs.calculator, lmgym.envs.rewards.functions, lmgym.envs.base,
                lmgym.envs.rewards.guard)
MAX_ALPHABET = 8
LONG, MEDIUM = 100_000, 20_000
KILLERS = ("", "\x00", "!")

_REPEATS = tuple(
    getattr(sre_constants, name) for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
    if hasattr(sre_constants, name)
)
_ATOMIC = getattr(sre_constants, "ATOMIC_GROUP", None)  # Python >= 3.11
_CATEGORY_CHARS = {
    sre_constants.CATEGORY_DIGIT: "1",
    sre_constants.CATEGORY_NOT_DIGIT: "a",
    sre_constants.CATEGORY_SPACE: " \n",
    sre_constants.CATEGORY_NOT_SPACE: "a",
    sre_constants.CATEGORY_WORD: "a_",
    sre_constants.CATEGORY_NOT_WORD: " ",
}


def module_regexes() -> list[tuple[str, re.Pattern]]:
    """Every compiled regex held at module level by the text modules, as (qualified name, pattern)."""
    found = []
    for module in TEXT_MODULES:
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found.append((f"{module.__name__}.{name}", value))
    return found


def _alphabet(items, out: list[str]) -> None:
    for op, arg in items:
        if op is sre_constants.LITERAL or op is sre_constants.NOT_LITERAL:
            out.append(chr(arg) if op is sre_constants.LITERAL else "a")
        elif op is sre_constants.IN:
            for sub_op, sub_arg in arg:
                if sub_op is sre_constants.LITERAL:
                    out.append(chr(sub_arg))
                elif sub_op is sre_constants.RANGE:
                    out.extend((chr(sub_arg[0]), chr(sub_arg[1])))
                elif sub_op is sre_constants.CATEGORY:
                    out.extend(_CATEGORY_CHARS.get(sub_arg, "a"))
        elif op is sre_constants.ANY:
            out.append("a")
        elif op is sre_constants.SUBPATTERN:
            _alphabet(arg[-1], out)
        elif op in _REPEATS:
            _alphabet(arg[2], out)
        elif op is sre_constants.BRANCH:
            for branch in arg[1]:
                _alphabet(branch, out)
        elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            _alphabet(arg[1], out)
        elif _ATOMIC is not None and op is _ATOMIC:
            _alphabet(arg, out)


def _walk(items, branch_choice: int) -> str:
    """A string that follows the pattern: the chosen branch, each repeat twice."""
    parts = []
    for op, arg in items:
        if op is sre_constants.LITERAL:
            parts.append(chr(arg))
        elif op is sre_constants.IN or op is sre_constants.ANY or op is sre_constants.NOT_LITERAL:
            chars: list[str] = []
            _alphabet([(op, arg)], chars)
            parts.append(chars[0] if chars else "a")
        elif op is sre_constants.SUBPATTERN:
            parts.append(_walk(arg[-1], branch_choice))
        elif _ATOMIC is not None and op is _ATOMIC:
            parts.append(_walk(arg, branch_choice))
        elif op in _REPEATS:
            parts.append(_walk(arg[2], branch_choice) * min(max(arg[0], 2), 4))
        elif op is sre_constants.BRANCH:
            branches = arg[1]
            parts.append(_walk(branches[branch_choice % len(branches)], branch_choice))
    return "".join(parts)


@cache
def pumps_for(pattern: str, flags: int) -> tuple[str, ...]:
    """Pump strings for one regex (deduplicated, in a fixed order)."""
    tree = sre_parse.parse(pattern, flags)
    chars: list[str] = []
    _alphabet(list(tree), chars)
    alphabet = list(dict.fromkeys(chars))[:MAX_ALPHABET]
    walks = [_walk(list(tree), choice) for choice in range(3)]
    pumps = alphabet + ["".join(pair) for pair in itertools.product(alphabet, repeat=2)]
    pumps += [walk for walk in walks if walk] + [walk + c for walk in walks if walk for c in alphabet[:3]]
    return tuple(dict.fromkeys(pump for pump in pumps if pump))


def pump_strings() -> list[str]:
    """All pump strings of all module regexes (for the generated hostile inputs)."""
    return sorted({pump for _, regex in module_regexes() for pump in pumps_for(regex.pattern, regex.flags)})


def _run_all(regex: re.Pattern, text: str) -> None:
    for _ in regex.finditer(text):
        pass
    regex.match(text)
    regex.fullmatch(text)


def _cpu_seconds(regex: re.Pattern, text: str, limit_s: float) -> float:
    """CPU seconds of finditer/match/fullmatch on ``text``, cut off just past ``limit_s`` (a cut-off run counts
    as over the limit: the profiling timer's tick-based count can fire a hair before this clock reaches it)."""
    start = time.process_time()
    try:
        with cpu_time_limit(limit_s):
            _run_all(regex, text)
    except RewardTimeout:
        return max(time.process_time() - start, math.nextafter(limit_s, math.inf))
    return time.process_time() - start


def slow_shape(regex: re.Pattern, limit_s: float, attempts: int = 3) -> tuple[str, float] | None:
    """The first (shape, CPU seconds) on which finditer/match/fullmatch exceed ``limit_s``, or None.

    A shape over the limit is run again, up to ``attempts`` runs, and judged on its fastest: a busy
    machine (a loaded sibling hyper-thread) inflates CPU seconds now and then; a super-linear regex is
    over the limit on every run."""
    for pump in pumps_for(regex.pattern, regex.flags):
        size = LONG if len(pump) == 1 else MEDIUM
        for killer in KILLERS:
            text = pump * (size // len(pump)) + killer
            spent = _cpu_seconds(regex, text, limit_s)
            for _ in range(attempts - 1):
                if spent <= limit_s:
                    break
                spent = min(spent, _cpu_seconds(regex, text, limit_s))
            if spent > limit_s:
                return f"{pump!r} * {size // len(pump)} + {killer!r}", spent
    return None
