"""Equivalence table: (predicted, gold, expected verdict) across the groups of issue 7.

Written for this project from the groups in the issue (no other project's cases are copied), then
extended with the classes an outside measurement found wrong: division by zero, clock times, comma-space
lists vs grouped thousands, units, words after a number in other scripts, and text that reads as code.
Each row is graded with CPU time measured (this process + the grading worker).
"""

from __future__ import annotations

import os

import pytest

from lmgym.envs.answers import GradingOptions, answers_equal
from tests.cpu_timing import VERDICT_BUDGET_S, cpu_call_within
from tests.tiers import fast_rows, slow

PWNED = "/tmp/rlgym_equiv_table_pwned"

T, F = True, False
TABLE: list[tuple[str | None, str, bool]] = [
    # --- plain integers: exact (no tolerance for integer golds) ---
    ("1000001", "1000000", F),
    ("192000150", "192000000", F),
    ("1000000", "1000000", T),
    ("1,000,000", "1000000", T),
    ("999999999999999999", "1000000000000000000", F),
    ("72", "72.0", T),
    ("18", "18.00", T),
    ("17", "18", F),
    ("0", "-0", T),
    ("007", "7", T),
    ("2e5", "200000", T),
    ("2e5", "200001", F),
    ("(42)", "42", T),
    ("$1,600.00", "1600", T),
    ("1,600", "16,000", F),
    # --- exact rationals / fractions ---
    ("0.5", "1/2", T),
    ("1/2", "0.5", T),
    (r"\frac{1}{2}", "1/2", T),
    (r"\dfrac{6}{8}", r"\frac34", T),
    ("0.75", r"\tfrac{3}{4}", T),
    ("2/4", "1/2", T),
    ("0.5000001", "1/2", F),
    ("0.3333333", "1/3", T),  # 1/3 correctly rounded to the places written (4+ significant digits)
    ("0.3334", "1/3", F),  # not a rounding of 1/3
    ("0.33", "1/3", F),  # too few digits to be a rounding
    ("1/3", "0.333333", T),  # the gold is an inexact decimal: relative 1e-6
    ("0.33", "0.333333", F),
    ("1/7", "0.142857", T),
    ("2.5", "2.50001", F),
    ("5/0", "5", F),
    # --- mixed numbers ---
    ("918.5", r"918\frac{1}{2}", T),
    ("459", r"918\frac{1}{2}", F),
    (r"918\frac{1}{2}", "918.5", T),
    (r"918\frac{1}{2}", "459", F),
    (r"-3\frac14", "-3.25", T),
    (r"-3\frac14", "-0.75", F),
    (r"2 \tfrac{1}{3}", "7/3", T),
    (r"2\frac{1}{3}", r"\frac{7}{3}", T),
    ("7/3", r"2 \tfrac{1}{3}", T),
    (r"1\frac{1}{2}", "1/2", F),
    # --- percent ---
    ("50%", "50", T),
    ("50%", "0.5", T),
    ("33.5 percent", "0.335", T),
    ("0.335", r"33.5\%", T),
    ("33.5", r"33.5\%", T),
    (r"33.5\%", "33.5%", T),
    ("3.35", r"33.5\%", F),
    (r"12\text{ percent}", "0.12", T),
    ("12%", "0.13", F),
    # --- negatives ---
    ("-7", "-7", T),
    ("−7", "-7", T),
    ("7", "-7", F),
    ("-0.25", r"-\frac{1}{4}", T),
    (r"\frac{-1}{4}", "-0.25", T),
    (r"\left(-5\right)", "-5", T),
    ("--5", "5", F),
    # --- units and words ---
    ("10 weeks", "10", T),
    (r"10\text{ weeks}", "10", T),
    ("5 apples", "5", T),
    ("12 cm", "12", T),
    (r"5\text{cm}^2", "5", T),
    (r"24\text{ m}^2", "24", T),
    (r"\$18", "18", T),
    ("18 dollars", "19", F),
    (r"45^\circ", "45", T),
    (r"\text{Tuesday}", "Tuesday", T),
    (r"\text{Tuesday}", "Monday", F),
    # --- decimal commas and thousands separators ---
    ("3,5", "3.5", T),
    ("3,5", "35", F),
    ("0,125", "0.125", T),
    ("1,234", "1234", T),
    ("1,234", "1.234", F),
    ("12,50", "12.5", T),
    ("1 000 000", "1000000", T),
    # --- hacks: a number gold needs a written-out number ---
    ("10+11", "21", F),
    ("10 + 11", "21", F),
    ("#### 10 + 11", "21", F),
    (r"\frac{42}{2}", "21", T),
    ("7*3", "21", F),
    (r"\sqrt{441}", "21", F),
    ("__import__('os').system('touch " + PWNED + "') or 0", "0", F),
    ("().__class__.__bases__[0].__subclasses__()", "0", F),
    ("1e1000000", "1", F),
    ("9^9^9^9", "1", F),
    ("9^{9^{9^{9}}}", "x", F),
    (r"\frac{" * 30 + "1" + "}{2}" * 30, "x", F),
    ("(" * 60 + "1" + ")" * 60, "1", T),  # parentheses around a number are still the number
    ("(" * 60 + "x" + ")" * 60, "x", F),  # too deep for the LaTeX parser: unequal, quickly
    ("1" * 600, "1", F),
    ("lambda: 21", "21", F),
    ("(10+11, 5)", "(21, 5)", F),  # the same rule inside tuples and sets
    (r"\{10+11, 1\}", r"\{1, 21\}", F),
    (r"(\frac{42}{2}, 5)", "(21, 5)", T),
    # --- symbolic expressions ---
    ("(x+1)^2", "x^2+2x+1", T),
    ("x^2+2x+1", "(x+1)^2", T),
    ("(x-1)(x+1)", "x^2-1", T),
    ("(x+1)^2", "x^2+1", F),
    ("x+1", "1+x", T),
    ("2x", "x+x", T),
    ("x/2", r"\frac{x}{2}", T),
    ("0.5x", r"\frac{x}{2}", T),
    ("x", "y", F),
    (r"2\sqrt{2}", r"\sqrt{8}", T),
    (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}", T),
    (r"\sqrt{3}", r"\sqrt{2}", F),
    (r"\frac{\pi}{2}", r"\pi/2", T),
    ("3.14159265", r"\pi", T),
    ("3.14", r"\pi", F),
    ("1.41421356", r"\sqrt{2}", T),
    ("1.414", r"\sqrt{2}", F),
    (r"2\pi r", r"2 r \pi", T),
    (r"\pi r^2", r"r^2\pi", T),
    (r"\frac{a+b}{2}", r"\frac{b+a}{2}", T),
    # --- functions and constants ---
    (r"\sec^2 y", r"\tan^2 y + 1", T),
    (r"\sin^2 x + \cos^2 x", "1", F),  # a number gold needs a written-out number
    (r"\sin^2 x", r"1-\cos^2 x", T),
    (r"\sin(2x)", r"2\sin x\cos x", T),
    (r"\sin x", r"\cos x", F),
    (r"\ln(xy)", r"\ln x + \ln y", F),  # not an identity for all x, y
    (r"\ln 8", r"3\ln 2", T),
    (r"\log_2 8", r"3", F),
    (r"\log_2 x", r"\frac{\ln x}{\ln 2}", T),
    (r"\log_b a", r"\frac{\ln a}{\ln b}", T),
    ("e^{2}", r"e \cdot e", T),
    ("2e", "e+e", T),
    (r"e^{i\pi}", r"\cos\pi", T),
    ("(1+i)^2", "2i", T),
    ("3+2i", "2i+3", T),
    ("3-2i", "3+2i", F),
    (r"\frac{1}{i}", "-i", T),
    (r"\pi", r"\frac{22}{7}", F),
    (r"e^{\ln 5}", r"\sqrt{25}", T),
    # --- several answers: sets in any order ---
    ("{3, 2, 1}", "{1,2,3}", T),
    (r"\{3, 2, 1\}", r"\{1,2,3\}", T),
    ("3, 1, 2", "1, 2, 3", F),  # bare lists in written order (GradingOptions.unordered_lists; see OPTION_TABLE)
    ("1, 2, 3", "1, 2, 3", T),
    ("1, 2", r"\{1, 2\}", T),
    ("1, 2, 4", "1, 2, 3", F),
    ("1, 2", "1, 2, 3", F),
    ("x = 1 or x = 2", "1, 2", T),
    ("x = 2 or x = 1", "1, 2", T),
    ("x = 1 or x = 3", "1, 2", F),
    (r"x = 1 \text{ and } x = 2", r"\{1,2\}", T),
    ("(2, 2), (6, 2)", "(6,2),(2,2)", F),
    ("(6, 2), (2, 2)", "(6,2),(2,2)", T),
    ("(2, 2), (6, 2)", r"\{(6,2),(2,2)\}", T),  # a set in braces: any order
    (r"\boxed{1}, \boxed{2}", "1, 2", T),
    (r"\boxed{2} and \boxed{1}", r"\{1, 2\}", T),
    (r"\boxed{(6, 2)}, \boxed{(2, 2)}", "(6,2),(2,2)", T),
    (r"\boxed{2}, \boxed{3}", "1, 2", F),
    ("(2, 2), (2, 6)", "(6,2),(2,2)", F),
    (r"-\sqrt{2}, \sqrt{2}", r"\pm\sqrt{2}", T),  # \pm is read as the set of both
    (r"\sqrt{2}", r"\pm\sqrt{2}", F),
    (r"\sqrt{2}, -\sqrt{2}", r"-\sqrt{2}, \sqrt{2}", F),
    (r"\sqrt{2}, -\sqrt{2}", r"\{-\sqrt{2}, \sqrt{2}\}", T),
    # --- tuples keep their order; intervals keep their brackets ---
    ("(1,2)", "(1, 2)", T),
    ("(1,2)", "(2,1)", F),
    ("(1,2,3)", "(1,2,3)", T),
    ("(1,2,3)", "(3,2,1)", F),
    ("(0.5, 3)", r"\left(\frac{1}{2}, 3\right)", T),
    ("(1,2)", "[1,2]", F),
    ("[1,2)", "[1,2)", T),
    ("[1,2)", "[1,2]", F),
    ("1, 2", "(1,2)", T),  # a bare pair against a tuple: compared in order (as Math-Verify)
    ("2, 1", "(1,2)", F),
    ("(-\\infty, 3]", "(-\\infty, 3)", F),
    (r"[0, \infty)", r"[0,\infty)", T),
    (r"(-\infty, 1) \cup (2, \infty)", r"(-\infty,1)\cup(2,\infty)", T),
    # --- equations and assignments ---
    ("x=2", "2", T),
    ("2", "x=2", T),
    ("2=x", "x=2", T),
    ("x=3", "x=2", F),
    ("y = 2x+3", "2x+3", T),
    ("f(x)=2x+3", "2x+3", T),
    ("f(x) = 2x+4", "2x+3", F),
    ("y=2x+3", "y = 3 + 2x", T),
    ("x+y=5", "y+x=5", T),
    ("x+y=5", "5=x+y", T),
    ("x+y=5", "x-y=5", F),
    ("3:4", "3/4", T),
    ("3:4", "0.75", T),
    ("4:3", "3/4", F),
    ("3/4", "3:4", T),
    # --- inequalities, intervals, membership ---
    (r"x\leq 5", r"5\geq x", T),
    (r"x < 5", r"5 > x", T),
    (r"x\leq 5", r"x < 5", F),
    (r"x \ge 2", r"2 \le x", T),
    (r"(-\infty, 3]", r"x \le 3", T),
    (r"x \le 3", r"(-\infty, 3]", T),
    (r"(-\infty, 3)", r"x \le 3", F),
    (r"[2, \infty)", r"x \geq 2", T),
    (r"x \in [1,2]", "[1,2]", T),
    (r"x \in [1,2]", "[1,2)", F),
    (r"1 \le x \le 2", r"1 \le x \le 2", T),
    (r"2x \le 10", r"x \le 5", T),
    (r"2x \le 10", r"x < 5", F),
    (r"x \ge 5", r"x \le 5", F),
    ("2x=4", "x+1=3", T),
    ("2x=6", "x+1=3", F),
    ("2x=4", "x=2", F),  # the gold "x = 2" states a number: the answer must state one too
    (r"1 < x < 2", r"1 < x \le 2", F),
    # --- matrices and environments ---
    (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\begin{bmatrix}1&2\\3&4\end{bmatrix}", T),
    (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\begin{pmatrix}1&2\\4&3\end{pmatrix}", F),
    (r"\begin{pmatrix}\frac12\\2\end{pmatrix}", r"\begin{pmatrix}0.5\\2\end{pmatrix}", T),
    (r"\begin{pmatrix}1&2\end{pmatrix}", r"\begin{pmatrix}1\\2\end{pmatrix}", F),
    # --- double-escaped LaTeX ---
    (r"\\frac{1}{2}", "0.5", T),
    (r"\\frac{1}{3}", r"\frac{1}{3}", T),
    (r"\\sqrt{2}", r"\sqrt{2}", T),
    (r"2\\pi", r"2\pi", T),
    (r"\\frac{1}{4}", "0.5", F),
    # --- division by zero: an undefined value equals nothing, not even itself ---
    ("1/0", "2/0", F),
    ("1/0", "1/0", F),
    ("0/0", "0/0", F),
    (r"\frac{3}{0}", r"\frac{8}{0}", F),
    (r"\frac{2}{1-1}", r"\frac{7}{3-3}", F),  # the zero appears only once the denominator is evaluated
    (r"\frac{x}{0}", r"\frac{x}{0}", F),
    (r"\frac{1}{\sin \pi}", r"\frac{1}{0}", F),
    (r"\infty - \infty", r"\infty - \infty", F),
    ("4/0", r"\infty", F),
    (r"\{1/0, 2\}", r"\{2, 5/0\}", F),
    (r"\cot 0", r"\frac{1}{0}", F),
    (r"\infty", r"\infty", T),  # infinity itself is a value
    (r"\frac{0}{4}", "0", T),  # zero over a number is fine
    ("0/7", "0", T),
    ("3/0.5", "6", T),
    ("1/05", "0.2", T),
    # --- clock times: compared as times when both sides are H:MM ---
    ("9:00", "12:00", F),
    ("7:00", "5:00", F),
    ("9:00", "9:00", T),
    ("09:00", "9:00", T),
    ("10:45", "10:45", T),
    ("10:45", "10:15", F),
    ("3:00", "15:00", F),
    ("8:30 pm", "8:30 p.m.", T),
    ("8:30 am", "8:30 pm", F),
    ("9:00", "9", F),
    ("11:00", "11", F),
    ("6:8", "3:4", T),  # single-digit parts stay a ratio
    # --- a comma and a space separate list items; a bare comma groups thousands ---
    ("1, 234", "1234", F),
    ("12, 345", "12345", F),
    ("2, 500", "2500", F),
    ("1, 000, 000", "1000000", F),
    ("3, 5", "3.5", F),
    ("1,234", "1, 234", F),
    ("12,345", "12345", T),
    ("2,500", "2500", T),
    ("1, 234", "1, 234", T),
    ("1, 234", "234, 1", F),
    ("1, 234", r"\{1, 234\}", T),
    # --- units: dropped on both sides (golds often omit them); not compared, not converted ---
    ("5", "5 cm", T),
    ("5", r"5\text{ cm}", T),
    (r"5\text{ cm}", "5", T),
    ("5 m", "5", T),
    ("5", r"5\text{ m}", T),
    ("8 in", "8", T),
    (r"7\,\mathrm{mm}", "7", T),
    ("12 feet", "12", T),
    (r"5\text{ km}", r"5\text{ m}", F),  # both name a unit: it must be the same (GradingOptions.compare_units)
    ("5 cm", "5 centimeters", T),
    (r"5\text{ meters}", "5 m", T),
    ("5 hours", "5 minutes", F),
    ("60 miles per hour", r"60\text{ mph}", T),
    ("60 km/h", "60 kilometers per hour", T),
    ("60 km/h", "60 mph", F),
    (r"5\text{ cm}^2", "5 square centimeters", T),
    ("5 cm", "6 cm", F),
    ("5", "6 cm", F),
    ("50 mm", "5 cm", F),  # nor converted
    ("12 feet", "13", F),
    ("5m", "5", F),  # a letter glued to the number may be a variable
    # --- words after the number, in any script ---
    ("42 Äpfel", "42", T),
    ("15 яблок", "15", T),
    ("42 个", "42", T),
    ("42个", "42", T),
    ("12 सेब", "12", T),
    ("12 تفاحة", "12", T),
    ("7 manzanas", "8", F),
    ("42 Äpfel", "43", F),
    ("15 яблок", "51", F),
    ("2π", "2", F),  # a Greek letter is math, not a unit
    # --- text that reads as code gets no credit ---
    ("os.system('x') or 0", "0", F),
    ("foo(3)", "3", F),
    ("x = 2 + 3", "5", F),
    ("[1, 2][0]", "1", F),
    ("print(0)", "0", F),
    ("0 if x else 1", "0", F),
    ("`7`", "7", F),
    ("x == 0", "0", F),
    ("x = 3 or x = 4", "4, 3", T),  # "or" between equations is math, not code
    (r"f(x) = \sin(x)", r"\sin x", T),
    # --- round four: LaTeX thousands marks, assignments to named variables, time ranges ---
    (r"11,\! 111,\! 111,\! 100", "11111111100", T),  # ",\!" is a thousands mark, not a list comma
    (r"11,\!111,\!111,\!100", "11111111100", T),
    (r"11,\! 111,\! 111,\! 100", "1111111110", F),
    ("1{,}234", "1234", T),
    ("1{,}234", "1{,}234", T),
    ("1{,}234", "1235", F),
    ("3{,}5", "3.5", T),  # a decimal comma in braces
    (r"\lambda = 3", "3", T),
    (r"\lambda = 3", "4", F),
    ("x_1 = 2", "2", T),
    ("a_{n} = 7", "7", T),
    (r"\alpha = 2, \beta = 3", "2", F),
    ("9:00-10:00", "9:00-10:00", T),  # a range of clock times, not 9/0 - 10/0
    ("9:00–10:00", "9:00-10:00", T),
    ("9:00-10:00", "9:00-11:00", F),
    ("9:00-10:00", "9:00", F),
    # --- a number gold: the one number of a short text of words, units or money ---
    ("1,000.99€", "1000.99", T),
    ("€1,000.99", "1000.99", T),
    ("The cost is $1,000.99", "1000.99", T),
    (r"\text{1,000.99 euros}", "1000.99", T),
    ("USD 5", "5", T),
    ("5 USD", "5", T),
    ("Rs. 500", "500", T),
    ("₹500", "500", T),
    ("£5.50", "5.5", T),
    ("2,50 €", "2.5", T),
    ("She has 12 apples left", "12", T),
    ("€1,000.99", "1000.9", F),
    ("5 or 6", "5", F),  # a hedge
    ("at least 5", "5", F),
    ("not 5", "5", F),
    ("between 5 and 6", "5", F),
    ("5 x", "5", F),  # a variable
    ("2 pi", "2", F),
    ("5 apples and 3 pears", "5", F),  # two numbers
    ("return 5", "5", F),
    # --- units after the number: "/" units and spelled-out units ---
    ("60 km/h", "60", T),
    (r"\textit{Tuesday}", "Tuesday", T),
    (r"\textnormal{even}", "even", T),
    ("60 m/s", "60 km/h", F),
    (r"12\text{ cm}^2", r"12\text{ cm}^2", T),
    (r"5~\text{cm}", "5", T),
    # --- matrices and other environments ---
    (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\begin{bmatrix} 1 \\ 2 \end{bmatrix}", T),  # "\\ " is a row break
    (r"\begin{array}{c} 1 \\ 2 \end{array}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", T),
    (r"\begin{smallmatrix} 1 & 2 \end{smallmatrix}", r"\begin{pmatrix} 1 & 2 \end{pmatrix}", T),
    (r"\left(\begin{matrix} 1 \\ 2 \end{matrix}\right)", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", T),
    ("(1, 2)", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", T),  # a vector written as a tuple
    ("(2, 1)", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", F),
    ("(1, 2, 3)", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", F),
    (r"\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", T),  # double-escaped
    (r"\\begin{pmatrix} 2 \\\\ 1 \\end{pmatrix}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", F),
    (r"\begin{cases} x = 1 \\ y = 2 \end{cases}", "(1, 2)", T),
    (r"\begin{aligned} x &= 1 \\ y &= 2 \end{aligned}", "(1, 2)", T),
    (r"\begin{cases} x = 2 \\ y = 1 \end{cases}", "(1, 2)", F),
    # --- inequalities joined by "or" against a union of intervals ---
    (r"x < 3 \text{ or } x > 5", r"(-\infty, 3) \cup (5, \infty)", T),
    (r"x < 3 \text{ or } x > 6", r"(-\infty, 3) \cup (5, \infty)", F),
    # --- rounding: one side is the other rounded ---
    ("0.3333", "1/3", T),
    ("1/3", "0.333", T),  # the gold is 1/3 rounded
    ("3.14159", "3.14", T),
    ("3.144", "3.14", F),  # not finer by two places: a different claim
    ("3.15", "3.14", F),
    ("0.5000001", "1/2", F),
    # --- mixed numbers with a space ---
    ("918 1/2", "918.5", T),
    ("918 1/2", "9181/2", F),
    ("-918 1/2", "-918.5", T),
    # --- empty / None ---
    (None, "5", F),
    ("", "5", F),
    ("   ", "0", F),
    ("five", "5", F),
]


# (predicted, gold, options, expected): the two convention switches, both ways.
UNORDERED, NO_UNITS = GradingOptions(unordered_lists=True), GradingOptions(compare_units=False)
OPTION_TABLE: list[tuple[str, str, GradingOptions, bool]] = [
    ("3, 1, 2", "1, 2, 3", UNORDERED, T),
    ("1, 2, 4", "1, 2, 3", UNORDERED, F),
    ("(2, 2), (6, 2)", "(6,2),(2,2)", UNORDERED, T),
    (r"\sqrt{2}, -\sqrt{2}", r"-\sqrt{2}, \sqrt{2}", UNORDERED, T),
    ("(2, 1)", "(1, 2)", UNORDERED, F),  # a tuple keeps its order whatever the option says
    (r"5\text{ km}", r"5\text{ m}", NO_UNITS, T),
    ("5 hours", "5 minutes", NO_UNITS, T),
    ("5 hours", "6 hours", NO_UNITS, F),
    ("3, 1, 2", "1, 2, 3", NO_UNITS, F),
]


@pytest.mark.parametrize(("predicted", "gold", "options", "expected"),
                         fast_rows(OPTION_TABLE, every=4, ids=[f"{i}" for i in range(len(OPTION_TABLE))]))
def test_option_table(predicted, gold, options, expected):
    assert answers_equal(predicted, gold, options=options) is expected, f"{predicted!r} vs gold {gold!r}"


def test_options_are_checked():
    with pytest.raises(ValueError, match="unordered_lists"):
        GradingOptions(unordered_lists="no")
    with pytest.raises(ValueError, match="options must be a GradingOptions"):
        answers_equal("1", "1", options={"unordered_lists": True})


@pytest.fixture(scope="module", autouse=True)
def _no_marker():
    if os.path.exists(PWNED):
        os.remove(PWNED)
    yield
    assert not os.path.exists(PWNED), "a payload in the table was executed"


@pytest.mark.parametrize(("predicted", "gold", "expected"), fast_rows(TABLE, ids=[f"{i}" for i in range(len(TABLE))]))
def test_equivalence_table(predicted, gold, expected):
    # the verdict under a generous budget (tests/cpu_timing.py); its cost: about the default 1 s on its fastest run
    verdict, cpu = cpu_call_within(1.2, answers_equal, predicted, gold, timeout=VERDICT_BUDGET_S)
    assert verdict is expected, f"{predicted!r} vs gold {gold!r}"
    assert cpu < 1.2


@slow
def test_table_size_and_pass_rate(capsys):
    assert len(TABLE) >= 150
    assert {e for *_, e in TABLE} == {True, False}
    passed = sum(answers_equal(p, g, timeout=VERDICT_BUDGET_S) is e for p, g, e in TABLE)
    with capsys.disabled():
        print(f"\nequivalence table: {passed}/{len(TABLE)} pass ({100 * passed / len(TABLE):.1f}%)")
    assert passed == len(TABLE)
