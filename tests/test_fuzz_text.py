"""Property-based tests (hypothesis) of everything that reads model text: hostile input is bounded and inert.

Each property runs ``EXAMPLES`` (1,000) generated inputs, deterministically
(``derandomize=True``), hostile ones included: strings up to 1 MB, deep nesting
of braces, parentheses and ``\\boxed{``, unicode digits, dunder and shell
payloads that would create a marker file if anything ran them, and ReDoS
shapes built from every regex of the text modules.  Each input must take under
``MAX_CPU_S`` of CPU time (this process's and the grading worker's, measured by
:mod:`tests.cpu_timing`: the worker forked beforehand, a slow call judged on its
fastest of three runs, so a busy machine does not decide the verdict), raise nothing
(``env.step`` may only raise its documented TypeError for a non-str action)
and execute nothing.
"""

from __future__ import annotations

import builtins
import math
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lmgym.envs.base
import lmgym.envs.calculator
import lmgym.envs.extraction
import lmgym.envs.rewards.functions
from lmgym.envs import ArithmeticEnv, correctness_reward, format_reward
from lmgym.envs.calculator import apply_calculator, find_calculation, safe_calculate
from lmgym.envs.extraction import extract_answer
from tests.cpu_timing import cpu_call_within, cpu_step
from tests.redos import TEXT_MODULES, pump_strings
from tests.tiers import slow

pytestmark = slow  # the slow tier (tests/tiers.py): thousands of generated inputs

# 1,000 inputs a property: about 110 of them 100k-1M characters long (every hostile branch among them). The ReDoS
# pumps are sampled here (25 of the 657 at >= 100k; 42 with 2,000), not swept: tests/test_redos.py runs every pump
# against every regex of these modules. 2,000 cost the suite ~55 s more (issue: the suite under 15 minutes).
EXAMPLES = 1000
# A linear scan of the largest input (1M characters) takes ~0.13 CPU s on an idle 2-core AMD EPYC; the same call,
# best of three, measured 0.83 s while that machine ran the whole suite (CPU seconds inflate on a busy machine),
# so 0.5 s failed one full run of two there. A quadratic path on 1M characters costs hours, far past this bound.
MAX_CPU_S = 2.0
SIZES = (1, 2, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

MARKER_DIR = Path(tempfile.mkdtemp(prefix="rlgym_fuzz_"))
MARKER = MARKER_DIR / "pwned_X"
PAYLOADS = (
    f"__import__('os').system('touch {MARKER}')",
    f"__import__('os').system('touch {MARKER}') or 0",
    f"eval(\"__import__('os').system('touch {MARKER}')\")",
    f"exec(\"import os; os.system('touch {MARKER}')\")",
    f"().__class__.__base__.__subclasses__()[0]('touch {MARKER}')",
    f"\\boxed{{__import__('os').system('touch {MARKER}')}}",
    f"#### __import__('os').system('touch {MARKER}')",
    f"The answer is $(touch {MARKER})",
    f"`touch {MARKER}`",
    f"<<__import__('os').system('touch {MARKER}')=",
    f"\\immediate\\write18{{touch {MARKER}}}",
    f"{{{{ lambda: __import__('os').system('touch {MARKER}') }}}}",
)
FRAGMENTS = (
    "\\boxed{", "\\boxed ", "{", "}", "(", ")", "[", "]", "####", "#", "$", "$$", ".", ",", ";", ":", " ", "\n",
    "\t", "**", "=", "==", "<<", ">>", "+", "-", "*", "/", "^", "x", "×", "÷", "−", "%", "\\(", "\\)", "\\[",
    "\\]", "\\frac{", "\\sqrt{", "\\text{", "\\left(", "\\right)", "\\\\", "'", '"', "_", "answer", "is",
    "The answer is ", "Answer: ", "The final answer is $", "and", "or", "apples", "0", "1", "7", "42", "1,000",
    "1,500 + 200 =", "3.5", "-7/8", "9**9**9", "10^100", "٣", "５", "１２", "١٢٣", "𝟓", "²", "½", "Ⅻ", "\u202e",
    "\x00", "\ufeff", "😀", "e", "pi", "i", "sqrt", "inf", "nan", "1e308", *PAYLOADS,
)
GOLDS = ("0", "7", "42", "-3", "1000000", "1/2", "\\frac{1}{2}", "0.5", "(1, 2)", "3.14")


def _nested(parts: tuple[str, str, str, int]) -> str:
    opening, middle, closing, depth = parts
    return opening * depth + middle + closing * depth


def _repeated(parts: tuple[str, int]) -> str:
    piece, size = parts
    return piece * max(1, size // max(1, len(piece)))


def _enumerated(parts: tuple[str, int]) -> str:
    """Distinct pieces ("\\boxed{0}, \\boxed{1}, ...") up to about ``size`` characters."""
    template, size = parts
    out, total, i = [], 0, 0
    while total < size:
        piece = template.replace("{i}", str(i))
        out.append(piece)
        total, i = total + len(piece), i + 1
    return "".join(out)


ENUMERATED = ("\\boxed{{i}}, ", "\\boxed{{i}} and ", "{i}, ", "{i} = ", "<<{i}+1=", "The answer is {i}.\n", "({i}")
pieces = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)).map(str)
small_text = st.lists(pieces, max_size=12).map("".join)
pump = st.sampled_from(pump_strings())
hostile = st.one_of(
    small_text,
    st.text(max_size=60),
    st.tuples(small_text, st.sampled_from(SIZES)).map(_repeated),
    st.tuples(pump, st.sampled_from(SIZES)).map(_repeated),
    st.tuples(st.sampled_from(ENUMERATED), st.sampled_from(SIZES)).map(_enumerated),
    st.tuples(
        st.sampled_from(("{", "(", "[", "\\boxed{", "\\frac{", "\\left(", "<<", "2^", "-", "\\sqrt{")),
        small_text,
        st.sampled_from(("}", ")", "]", "", ">>", "}}")),
        st.sampled_from((1, 10, 100, 1_000, 10_000, 100_000, 400_000)),
    ).map(_nested),
    st.tuples(small_text, st.sampled_from(PAYLOADS), small_text).map("".join),
)


@contextmanager
def nothing_runs() -> Iterator[None]:
    """Make running a command or evaluating the payload fail loudly while the block runs."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"model text was executed: {args!r:.200}")

    def guarded(real: Callable) -> Callable:
        def call(source, *args, **kwargs):
            if isinstance(source, (str, bytes)) and str(MARKER) in str(source):
                refuse(source)
            return real(source, *args, **kwargs)

        return call

    saved = (os.system, os.popen, subprocess.Popen, builtins.eval, builtins.exec)
    os.system, os.popen, subprocess.Popen = refuse, refuse, refuse
    builtins.eval, builtins.exec = guarded(saved[3]), guarded(saved[4])
    try:
        yield
    finally:
        os.system, os.popen, subprocess.Popen, builtins.eval, builtins.exec = saved
    assert not MARKER.exists(), f"{MARKER} was created: model text was executed"


def cpu_bounded(fn: Callable, *args, **kwargs):
    result, spent = cpu_call_within(MAX_CPU_S, fn, *args, **kwargs)
    assert spent < MAX_CPU_S, f"{fn.__name__} took {spent:.2f} s CPU on {len(args[0])} chars: {args[0][:80]!r}"
    return result


def run_property(body: Callable[..., None], *strategies) -> int:
    """Run ``body`` on ``EXAMPLES`` generated inputs; return how many ran."""
    count = [0]

    @FUZZ
    @given(st.tuples(*strategies))
    def check(args):
        count[0] += 1
        body(*args)

    with nothing_runs():
        check()
    return count[0]


# ---- extraction ---------------------------------------------------------------------------------


def test_extraction_is_bounded_inert_and_finds_a_final_marker():
    def body(text: str) -> None:
        for fallback in (True, False):
            answer = cpu_bounded(extract_answer, text, last_number_fallback=fallback)
            assert answer is None or (isinstance(answer, str) and answer)
        assert cpu_bounded(extract_answer, text + "\n#### 42") == "42"

    assert run_property(body, hostile) >= EXAMPLES


# ---- calculator ---------------------------------------------------------------------------------

_RESULT_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def test_calculator_is_bounded_inert_and_reads_thousands():
    def body(text: str, a: int, b: int) -> None:
        result = cpu_bounded(safe_calculate, text[:1000])
        assert result is None or _RESULT_RE.fullmatch(result)
        found = cpu_bounded(find_calculation, text)
        assert found is None or (found[1] == len(text) and len(found[0]) <= lmgym.envs.calculator.MAX_CALC_CHARS)
        step, injected = cpu_bounded(apply_calculator, text)
        assert step is text and (injected == "" or _RESULT_RE.fullmatch(injected.strip().removesuffix(">>")))
        request = f"{text}\nSo {a:,} + {b:,} ="
        assert cpu_bounded(apply_calculator, request)[1].strip() == str(a + b)

    numbers = st.integers(min_value=0, max_value=10**9)
    assert run_property(body, hostile, numbers, numbers) >= EXAMPLES


# ---- reward functions ---------------------------------------------------------------------------


def test_correctness_reward_is_bounded_and_inert():
    def body(text: str, gold: str) -> None:
        assert cpu_bounded(correctness_reward, text, gold, {}) in (0.0, 1.0)
        assert cpu_bounded(correctness_reward, text, gold, {"correct": True}) == 1.0
        assert cpu_bounded(correctness_reward, text + f"\n#### {gold}", gold, {}) == 1.0

    assert run_property(body, hostile, st.sampled_from(GOLDS)) >= EXAMPLES


def test_format_reward_is_bounded_and_inert():
    def body(text: str) -> None:
        assert cpu_bounded(format_reward, text, "1", {}) in (0.0, 1.0)
        assert cpu_bounded(format_reward, text + "\n#### 7", "1", {}) == 1.0

    assert run_property(body, hostile) >= EXAMPLES


# ---- env.step -----------------------------------------------------------------------------------

SINGLE = ArithmeticEnv(level=1, mode="single")
STEPWISE_CALC = ArithmeticEnv(level=1, mode="stepwise", sym_calc=True, max_steps=4)
INFO_KEYS = {"correct", "parsed_answer", "unparseable", "reward_components", "reward_errors", "action_truncated"}


def _checked_step(env: ArithmeticEnv, action: str) -> tuple[float, bool, bool, dict]:
    before = env.render()
    (obs, reward, terminated, truncated, info), spent = cpu_step(env, action, within=MAX_CPU_S)
    assert spent < MAX_CPU_S, f"step took {spent:.2f} s CPU on {len(action)} chars: {action[:80]!r}"
    assert INFO_KEYS <= set(info) and math.isfinite(reward) and info["reward_errors"] == {}
    assert info["action_truncated"] == (len(action) > env.max_action_chars)
    assert obs == before + action[: env.max_action_chars] + info["injected_text"]
    return reward, terminated, truncated, info


def test_single_env_step_is_bounded_and_inert():
    def body(action: str, seed: int) -> None:
        _, reset_info = SINGLE.reset(seed=seed)
        _checked_step(SINGLE, action)
        SINGLE.reset(seed=seed)
        reward, *_ = _checked_step(SINGLE, action[:1000] + f"\n#### {reset_info['gold']}")
        assert reward == 1.0

    assert run_property(body, hostile, st.integers(0, 10_000)) >= EXAMPLES
    SINGLE.reset(seed=0)
    with pytest.raises(TypeError, match="action must be a str"):
        SINGLE.step(b"bytes")  # type: ignore[arg-type]


def test_stepwise_calculator_env_step_is_bounded_and_inert():
    def body(actions: list[str], seed: int) -> None:
        STEPWISE_CALC.reset(seed=seed)
        for action in actions:
            _, terminated, truncated, _ = _checked_step(STEPWISE_CALC, action)
            if terminated or truncated:
                return

    assert run_property(body, st.lists(hostile, min_size=1, max_size=4), st.integers(0, 10_000)) >= EXAMPLES


# ---- every regex of the text modules ------------------------------------------------------------


def test_text_modules_only_use_module_level_regexes():
    """So that the ReDoS test below sees every regex these modules run."""
    inline = re.compile(r"\bre\.(?:match|search|fullmatch|findall|finditer|sub|subn|split)\(")
    module_level = re.compile(r"_[A-Z_]+ = re\.compile\(")
    for module in TEXT_MODULES:
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert not inline.search(source), f"{module.__name__} runs an inline regex; compile it at module level"
        for line in source.splitlines():
            assert "re.compile(" not in line or module_level.match(line), f"{module.__name__}: {line.strip()}"


def test_marker_file_never_appeared():
    assert not MARKER.exists()
