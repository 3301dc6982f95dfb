"""ReDoS shapes against every module-level regex of the text modules (extraction, calculator, rewards, base)."""

from __future__ import annotations

import re

import pytest

from tests.redos import module_regexes, pumps_for, slow_shape

LIMIT_S = 0.5
REGEXES = module_regexes()


def test_the_text_modules_hold_their_regexes():
    names = {name for name, _ in REGEXES}
    assert {"lmgym.envs.extraction._BOX_RE", "lmgym.envs.calculator._ANNOTATION_RE",
            "lmgym.envs.rewards.functions._HASH_ANSWER_RE"} <= names


@pytest.mark.parametrize(("name", "regex"), REGEXES, ids=[name for name, _ in REGEXES])
def test_regex_is_linear_on_redos_shapes(name, regex):
    assert len(pumps_for(regex.pattern, regex.flags)) >= 3
    slow = slow_shape(regex, LIMIT_S)
    assert slow is None, f"{name} ({regex.pattern}) took {slow[1]:.2f} s CPU on {slow[0]}"


@pytest.mark.parametrize(
    "pattern",
    [
        r"[A-Za-z]{2,} +[A-Za-z]{2,} +[A-Za-z]{2,}",  # the old "answer is" prose check: quadratic
        r"(a+)+b",  # exponential
        r"\s+$",  # quadratic: every start in a run of spaces rescans the run
    ],
)
def test_the_checker_catches_known_slow_regexes(pattern):
    assert slow_shape(re.compile(pattern), 0.2) is not None
