"""Answer metrics of extractive QA: SQuAD's normalisation, exact match and token F1, HotpotQA's F1.

``normalize_answer``, ``exact_match`` and ``squad_f1`` behave exactly as the official SQuAD v1.1
evaluation script (``evaluate-v1.1.py``): lower case, drop ASCII punctuation, drop the articles
"a"/"an"/"the" as whole words, collapse white space; F1 over the whitespace tokens of the normalised
texts, 0.0 when they share no token (so two blank answers score F1 0.0 but EM 1.0, as in v1.1).
``hotpot_f1`` is the F1 of HotpotQA's official ``hotpot_evaluate_v1.py``: the same, except that when
either normalised answer is "yes", "no" or "noanswer" and the two differ, it scores 0.0 (no partial
credit for "no" against "no way"). ``max_over_golds`` is the script's best score over several golds.

Model output is untrusted, so every metric reads at most the first ``MAX_ANSWER_CHARS`` (4,000)
characters of the prediction and of the gold: more than ten times the longest SQuAD v1.1 or HotpotQA
answer (a few hundred characters), so real answers score exactly as the official scripts score them,
while a megabyte of output costs no more than 4,000 characters of work. Past the cap the scripts and
these metrics may differ (e.g. "Paris" followed by 5,000 spaces and "x" matches "Paris" here).

The few lines are written here rather than imported: the packages that carry them (``evaluate``,
``torchmetrics``) are not dependencies of this toolkit, and neither has HotpotQA's yes/no rule.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Iterable

__all__ = ["MAX_ANSWER_CHARS", "exact_match", "hotpot_f1", "max_over_golds", "normalize_answer", "squad_f1"]

MAX_ANSWER_CHARS = 4_000

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
HOTPOT_SPECIAL_ANSWERS = ("yes", "no", "noanswer")


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation, then the articles a/an/the, then collapse white space (SQuAD v1.1),
    of the first ``MAX_ANSWER_CHARS`` characters of ``text``."""
    return _normalize(text[:MAX_ANSWER_CHARS])


def _normalize(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 if the normalised prediction equals the normalised gold, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def squad_f1(prediction: str, gold: str) -> float:
    """Token F1 of the normalised texts, as SQuAD v1.1 computes it (0.0 when no token is shared)."""
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def hotpot_f1(prediction: str, gold: str) -> float:
    """HotpotQA's answer F1: ``squad_f1``, but 0.0 when either side normalises to yes/no/noanswer and the
    two differ."""
    predicted, expected = normalize_answer(prediction), normalize_answer(gold)
    if predicted != expected and (predicted in HOTPOT_SPECIAL_ANSWERS or expected in HOTPOT_SPECIAL_ANSWERS):
        return 0.0
    return _token_f1(predicted.split(), expected.split())


def max_over_golds(metric: Callable[[str, str], float], prediction: str, golds: Iterable[str]) -> float:
    """The best ``metric(prediction, gold)`` over ``golds`` (SQuAD's ``metric_max_over_ground_truths``)."""
    scores = [metric(prediction, gold) for gold in golds]
    if not scores:
        raise ValueError("max_over_golds needs at least one gold answer")
    return max(scores)


def _token_f1(predicted: list[str], expected: list[str]) -> float:
    shared = sum((Counter(predicted) & Counter(expected)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(expected)
    return 2 * precision * recall / (precision + recall)
