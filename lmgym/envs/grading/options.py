"""The grader's two convention switches, :class:`GradingOptions` (passed as ``answers_equal(..., options=)``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GradingOptions:
    """Conventions where graders differ; the defaults favour fewer false positives.

    Attributes:
        unordered_lists: compare two bare comma lists ("1, 2, 3" vs "3, 1, 2") as sets.  Default False:
            in the written order, as MATH's ``is_equiv`` (a string comparison) and MARIO/ToRA's
            ``math_equal`` (element by element) do; Math-Verify and lighteval (which uses it) sort
            both lists, which credits "(b, a)"-style answers whose order the question asked for.
            Braces (``\\{1, 2\\}``), ``\\pm`` and "x = 1 or x = 2" are sets whatever this says.
        compare_units: when BOTH answers carry a unit after the number, the units must name the same unit
            (``5 km`` != ``5 m``; ``5 cm`` == ``5 centimeters``).  Default True.  A unit on one side only
            is dropped, as every grader does (MATH's ``_remove_right_units``, Math-Verify's unit list):
            golds often omit it.  Units are never converted (``50 mm`` != ``5 cm``).
    """

    unordered_lists: bool = False
    compare_units: bool = True

    def __post_init__(self) -> None:
        for name in ("unordered_lists", "compare_units"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"GradingOptions.{name} must be True or False; got {value!r}")


DEFAULT_OPTIONS = GradingOptions()
