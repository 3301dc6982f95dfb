"""Methods compared at one method's budget: "at maj@8's budget: weighted maj@8 / best-of-8 vs maj@8".

maj@n, weighted_maj@n and best_of_n run by `evaluate_search` with one seed sample the same n episodes per
problem (they differ only in how one answer is chosen), so they spend the same tokens: the comparison is
at equal tokens by construction, and the line states the tokens of each.
"""
from __future__ import annotations

from collections.abc import Sequence


def _row(rows: Sequence[dict], method: str) -> dict:
    for row in rows:
        if row["method"] == method:
            return row
    raise ValueError(f"budget comparison: no row for {method!r} (rows: {', '.join(r['method'] for r in rows)})")


def versus_line(rows: Sequence[dict], base: str, others: Sequence[str]) -> str:
    """One line: each of `others` (accuracy, points over `base`, tokens/problem) against `base`, from rows of
    `evaluate_search` (method, accuracy, tokens_per_problem)."""
    reference = _row(rows, base)
    parts = []
    for name in others:
        row = _row(rows, name)
        points = 100 * (row["accuracy"] - reference["accuracy"])
        parts.append(f"{name} {100 * row['accuracy']:.1f}% ({points:+.1f} points, {row['tokens_per_problem']:.1f} "
                     f"tokens/problem)")
    return (f"at {base}'s budget ({reference['tokens_per_problem']:.1f} tokens/problem): " + ", ".join(parts)
            + f" vs {base} {100 * reference['accuracy']:.1f}%")
