"""Reward functions and ways to combine several reward components into one.

A reward function is a plain function ``(completion, gold, info) -> float``.
``combine_rewards`` turns an ``[N, K]`` matrix of K reward components for N
completions into one reward per completion.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from envs.answers import answers_equal
from envs.extraction import MAX_SCAN_CHARS, extract_answer, find_boxes

RewardFn = Callable[[str, str, dict], float]

COMBINE_METHODS = ("uniform", "std", "pca", "l2")
_HASH_ANSWER_RE = re.compile(r"####[ \t]*\S")


def correctness_reward(completion: str, gold: str, info: dict | None = None) -> float:
    """1.0 if the final answer in ``completion`` equals ``gold``, else 0.0.

    Inside an env, ``info["correct"]`` holds the env's verdict for this very
    completion (graded once per step) and is used as is; called standalone
    (no such key), the answer is extracted and graded here.
    """
    verdict = info.get("correct") if isinstance(info, Mapping) else None
    if isinstance(verdict, bool):
        return 1.0 if verdict else 0.0
    return 1.0 if answers_equal(extract_answer(completion), gold) else 0.0


def format_reward(completion: str, gold: str, info: dict | None = None) -> float:
    """1.0 if ``completion`` marks a final answer with ``####`` or ``\\boxed{}`` that can be extracted.

    Linear in the completion's length (one regex pass and one brace-matching pass); reads
    the last ``MAX_SCAN_CHARS`` characters, as ``extract_answer`` does.
    """
    if not isinstance(completion, str):
        return 0.0
    if len(completion) > MAX_SCAN_CHARS:  # read like extract_answer: the end of the text
        completion = completion[-MAX_SCAN_CHARS:]
    if not (_HASH_ANSWER_RE.search(completion) or _has_boxed_answer(completion)):
        return 0.0
    return 1.0 if extract_answer(completion) is not None else 0.0


def _has_boxed_answer(text: str) -> bool:
    """True if some ``\\boxed{...}`` has balanced braces and non-blank content."""
    return any(box.braced and box.content.strip() for box in find_boxes(text))


def combine_rewards(
    components: np.ndarray | Sequence[Sequence[float]],
    method: str = "uniform",
    weights: Sequence[float] | np.ndarray | None = None,
) -> np.ndarray:
    """Combine reward components ``[N, K]`` into one reward per row ``[N]``.

    Methods:
      - ``"uniform"``: weighted mean of the columns (``weights`` default to equal).
      - ``"std"``: weighted mean with column weights ``1/std`` so each component
        contributes equally; a zero-std column gets weight 0 (all zero -> zeros).
      - ``"pca"``: projection of the standardised columns on their first principal
        component, signed to correlate positively with the column sum.
      - ``"l2"``: Euclidean norm of each row.
    ``weights`` are only used by ``"uniform"``.
    """
    if method not in COMBINE_METHODS:
        raise ValueError(f"unknown combine method {method!r}; valid methods: {', '.join(COMBINE_METHODS)}")
    matrix = np.asarray(components, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"components must be a 2-D array [N, K], got shape {matrix.shape}")
    if weights is not None and method != "uniform":
        raise ValueError(f"weights are only used by method='uniform', not method={method!r}")
    if method == "uniform":
        return _uniform(matrix, weights)
    if method == "std":
        return _inverse_std(matrix)
    if method == "pca":
        return _first_principal_component(matrix)
    return np.sqrt(np.sum(matrix**2, axis=1))


def _uniform(matrix: np.ndarray, weights: Any) -> np.ndarray:
    n_components = matrix.shape[1]
    w = np.ones(n_components) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (n_components,):
        raise ValueError(f"weights must have one entry per component ({n_components}), got shape {w.shape}")
    if w.sum() == 0:
        raise ValueError("weights must not sum to zero")
    return matrix @ w / w.sum()


def _inverse_std(matrix: np.ndarray) -> np.ndarray:
    std = matrix.std(axis=0)
    w = np.zeros_like(std)
    np.divide(1.0, std, out=w, where=std > 0)
    if w.sum() == 0:
        return np.zeros(matrix.shape[0])
    return matrix @ w / w.sum()


def _first_principal_component(matrix: np.ndarray) -> np.ndarray:
    mean = matrix.mean(axis=0)
    std = matrix.std(axis=0)
    standardised = np.zeros_like(matrix)
    np.divide(matrix - mean, std, out=standardised, where=std > 0)
    if not np.any(standardised):
        return np.zeros(matrix.shape[0])
    _, _, vt = np.linalg.svd(standardised, full_matrices=False)
    projection = standardised @ vt[0]
    row_sum = matrix.sum(axis=1)
    alignment = float(np.dot(projection - projection.mean(), row_sum - row_sum.mean()))
    if alignment < 0 or (alignment == 0 and vt[0].sum() < 0):
        projection = -projection
    return projection
