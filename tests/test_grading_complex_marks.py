"""The default grader's copy of Math-Verify's complex-number marks (envs/grading/complex_marks.py) is the
installed Math-Verify's pattern, so the two graders read `i` alike."""
import pytest

from lmgym.envs.grading.complex_marks import COMPLEX_MARKS, marks_complex


def test_the_copy_is_math_verifys_pattern():
    grader = pytest.importorskip("math_verify.grader", reason="Math-Verify (the [math-verify] extra) not installed")
    assert (COMPLEX_MARKS.pattern, COMPLEX_MARKS.flags) == (grader.complex_number_pattern.pattern,
                                                            grader.complex_number_pattern.flags)
    for text in (r"z \in \mathbb{C}", "3+i", r"\det(A)", r"\operatorname{Re}(z)", "x+1", r"\pi", "sin(x)"):
        assert marks_complex(text) == grader.should_treat_as_complex(text), text


@pytest.mark.parametrize("text, expected", [("2+3i", False), ("2 + 3 i", True), (r"\mathbb{C}", True),
                                            (r"\det M", True), (r"\sin x", False), (r"\frac{1}{2}", False)])
def test_marks(text, expected):
    assert marks_complex(text) is expected
