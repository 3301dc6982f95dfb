"""lmgym.envs.grading.code_screen: code-looking text is refused before Math-Verify sees it; math and prose are not."""

from __future__ import annotations

import pytest

from lmgym.envs.grading import code_screen
from lmgym.envs.grading.code_screen import looks_like_code
from tests.cpu_timing import cpu_call
from tests.redos import slow_shape
from tests.tiers import slow

CODE = [
    "__import__('os').system('x') or 0",
    "os.system('ls') or 0",
    "getattr(os, 'system')('x') or 0",
    "{}.get(1) or 0",
    "foo() or 0",
    "().__class__",
    "print(0)",
    "exit(0)",
    "eval('0')",
    "`5`",
    "```python\nprint(5)\n```",
    "x == 0",
    "n := 0",
    "lambda: 0",
    "lambda x, y: 0",
    "True and 0",
    "'a' and 0",
    "[1, 2][0]",
    "import os; 0",
    "from os import system\n0",
    "def f(): return 0",
    "return 0",
    "0 if x else 1",
    "value = a if ok else 3",
]

MATH = [
    r"\boxed{\frac{1}{2}}",
    r"\left(1, 2\right)",
    "f(x) = 2x+3",
    r"\sin(x)",
    r"\{1,2\}",
    r"x \in [1,2]",
    r"\lambda = 3",
    r"\lambda: 3",
    r"\int(x)\,dx",
    r"x = 1 \text{ or } x = 2",
    "x = 1 or x = 2",
    "(0,1) and (2,3)",
    "So she has 5 apples, so the answer is \\boxed{5}.",
    "The answer is 5 or 6.",
    "gcd(12, 18) = 6",
    "max(3, 4)",
    r"\operatorname{len}(v) = 3",
    "f'(x) = 2x",
    "If x > 2 then y = 1, else y = 0.",
    "We import 5 crates every day.",
    "x = 2 + 3",
    r"\begin{pmatrix}1&2\\3&4\end{pmatrix}",
    "Die Antwort ist 42 Äpfel.",
    "$x$ so 3*4+1",
]


@pytest.mark.parametrize("text", CODE)
def test_code_is_recognised(text):
    assert looks_like_code(text) is True


@pytest.mark.parametrize("text", MATH)
def test_math_and_prose_are_not_code(text):
    assert looks_like_code(text) is False


@slow
@pytest.mark.parametrize(("name", "regex"), [(n, v) for n, v in vars(code_screen).items() if hasattr(v, "pattern")])
def test_screen_regexes_are_linear_on_redos_shapes(name, regex):
    slow = slow_shape(regex, 0.5)
    assert slow is None, f"{name} took {slow[1]:.2f} s CPU on {slow[0]}"


@pytest.mark.parametrize(
    "text",
    ["a" * 20_000, "a." * 10_000, "lambda " * 2_800, "x if " * 4_000, "x if y " * 2_800 + "\n" * 100, ")" * 20_000,
     "__" * 10_000, "import " * 2_800, "(" * 20_000 + "'"],
)
def test_screen_is_linear_on_the_largest_math_verify_input(text):
    assert cpu_call(looks_like_code, text)[1] < 0.2
