"""The suite's two tiers.

The fast tier is what CI and the README's test command run (`pytest`: pytest.ini's `-m "not slow"`). It is cut for
the CI machine kind, 2 cores on which one `import torch` costs ~25 CPU s and CPU time swings up to 100x
(benchmarks/RESULTS.md, "The CI machine kind"), to fit 15 minutes there. Each worker first collects the whole
suite (imports included: 3-5 minutes on that kind), so the tests themselves have about 10 minutes of two workers.

The rule for a new test: one that takes 5 s or more on that kind under `-n 2` (a whole training run, a resume
compared with an uninterrupted run, a process, a model trained to learn) is marked `@slow`, unless it is one of the
few end-to-end checks kept fast on purpose (the golden traces of every trainer; `test_algorithms`' resume). A
parametrized test whose cases are quick on average stays fast even if its first case pays a worker's warm-up.

The slow tier (`-m slow`; `-m ""` runs both) holds what costs whole processes, compilation, thousands of generated
inputs or seconds of training: every test that launches the two-rank job set (tests/conftest.py marks them), the
examples, kill and resume, torchrun, the wheel install, compiled training, the property tests, CPU-budget timing of
the grading worker, the learning tests, the resume-equals-uninterrupted runs, and most rows of the grading tables
(`fast_rows` keeps every `n`-th in the fast tier, so each kind of row is still checked there). Run it before a
release and after touching those paths: `.venv/bin/python -m pytest -q -n 2 -m slow`.
"""
from collections.abc import Sequence

import pytest

slow = pytest.mark.slow


def fast_rows(rows: Sequence[tuple], every: int = 8, ids: Sequence[str] | None = None) -> list:
    """`rows` as pytest params: every `every`-th row (from the first) in the fast tier, the others marked slow."""
    return [pytest.param(*row, marks=() if i % every == 0 else slow, id=None if ids is None else ids[i])
            for i, row in enumerate(rows)]
