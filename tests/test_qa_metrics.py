"""SQuAD v1.1 normalisation, exact match and F1, and HotpotQA's F1, against published and hand values."""

import pytest

from lmgym.envs.hotpotqa import metrics as qa_metrics
from lmgym.envs.hotpotqa.metrics import exact_match, hotpot_f1, max_over_golds, normalize_answer, squad_f1

ARTICLES = qa_metrics._ARTICLES


def squad_scores(predictions: dict[str, str], golds: dict[str, list[str]]) -> dict[str, float]:
    """What SQuAD v1.1's evaluate() returns: mean best EM and F1 over golds, in percent; unanswered score 0."""
    em = sum(max_over_golds(exact_match, predictions[i], g) for i, g in golds.items() if i in predictions)
    f1 = sum(max_over_golds(squad_f1, predictions[i], g) for i, g in golds.items() if i in predictions)
    return {"exact_match": 100.0 * em / len(golds), "f1": 100.0 * f1 / len(golds)}


# The examples of the SQuAD metric card (huggingface/evaluate metrics/squad/README.md; it wraps the official
# v1.1 script): a perfect match, no match, and 2 of 3 right ("Beyonce" shares no token with "Beyoncé ...").
CARD_GOLD = {"56e10a3be3433e1400422b22": ["1976"]}


def test_the_metric_cards_examples():
    assert squad_scores({"56e10a3be3433e1400422b22": "1976"}, CARD_GOLD) == {"exact_match": 100.0, "f1": 100.0}
    assert squad_scores({"56e10a3be3433e1400422b22": "1999"}, CARD_GOLD) == {"exact_match": 0.0, "f1": 0.0}
    partial = {"56e10a3be3433e1400422b22": "1976", "56d2051ce7d4791d0090260b": "Beyonce",
               "5733b5344776f419006610e1": "climate change"}
    golds = {**CARD_GOLD, "56d2051ce7d4791d0090260b": ["Beyoncé and Bruno Mars"],
             "5733b5344776f419006610e1": ["climate change"]}
    assert squad_scores(partial, golds) == {"exact_match": 66.66666666666667, "f1": 66.66666666666667}


def test_a_squad_dev_question_with_several_golds():
    # SQuAD v1.1 dev 56be4db0acb8001400a502ec: "Which NFL team represented the AFC at Super Bowl 50?"
    golds = ["Denver Broncos", "Denver Broncos", "Denver Broncos"]
    assert max_over_golds(exact_match, "the Denver Broncos.", golds) == 1.0
    assert max_over_golds(squad_f1, "Broncos", golds) == pytest.approx(2 / 3)
    assert max_over_golds(squad_f1, "Carolina Panthers", golds) == 0.0
    scores = squad_scores({"q": "Broncos", "unanswered": "x"}, {"q": golds, "other": ["y"]})
    assert scores["f1"] == pytest.approx(100 / 3)  # an unanswered question scores 0
    with pytest.raises(ValueError, match="^max_over_golds needs at least one gold answer$"):
        max_over_golds(exact_match, "a", [])


@pytest.mark.parametrize("text, normalised", [
    ("The Cat!", "cat"),
    ("an apple a day", "apple day"),
    ("Theatre Anthem", "theatre anthem"),      # articles only as whole words
    ("U.S.A.", "usa"),
    ("  New   York\t\n", "new york"),
    ("A-team", "ateam"),                       # punctuation goes first, so "a-" is not an article
    ("the the THE", ""),
    ("an.", ""),
    ("don't", "dont"),
    ("1990–1995", "1990–1995"),                # only ASCII punctuation is removed
    ("Beyoncé", "beyoncé"),
])
def test_normalisation_as_squad_v1_1(text, normalised):
    assert normalize_answer(text) == normalised


@pytest.mark.parametrize("prediction, gold, em, f1", [
    ("Denver Broncos", "Broncos", 0.0, 2 / 3),
    ("the cat sat", "cat sat on mat", 0.0, 2 / 3),
    ("b b c", "b c c", 0.0, 2 / 3),            # tokens are counted as multisets
    ("October 1922", "october, 1922.", 1.0, 1.0),
    ("", "", 1.0, 0.0),                        # v1.1: blank vs blank is an exact match with F1 0
    ("the", "a", 1.0, 0.0),
    ("yes it is", "yes", 0.0, 0.5),
])
def test_exact_match_and_squad_f1_by_hand(prediction, gold, em, f1):
    assert exact_match(prediction, gold) == em
    assert squad_f1(prediction, gold) == pytest.approx(f1)


@pytest.mark.parametrize("prediction, gold, f1", [
    ("no", "No.", 1.0),
    ("no", "no way", 0.0),                     # SQuAD F1 would give 2/3
    ("yes it is", "yes", 0.0),                 # SQuAD F1 would give 0.5
    ("Yes", "no", 0.0),
    ("noanswer", "no answer", 0.0),
    ("Denver Broncos", "Broncos", 2 / 3),      # otherwise the same as SQuAD
])
def test_hotpotqa_f1_gives_no_partial_credit_around_yes_no_noanswer(prediction, gold, f1):
    assert hotpot_f1(prediction, gold) == pytest.approx(f1)


def test_every_metric_reads_at_most_max_answer_chars_of_an_untrusted_answer(monkeypatch):
    """The work is bounded by the text the normalisation handles (its length counted), not by a clock."""
    seen = []

    class CountingArticles:  # stands in for the article regex, which sees every normalised text
        def sub(self, repl, text):
            seen.append(len(text))
            return ARTICLES.sub(repl, text)

    monkeypatch.setattr(qa_metrics, "_ARTICLES", CountingArticles())
    cap = 4_000  # qa_metrics.MAX_ANSWER_CHARS, checked below
    huge = "Denver Broncos " * 69_906  # about 1 MiB of model output
    capped = huge[:cap]
    for metric in (exact_match, squad_f1, hotpot_f1):
        assert metric(huge, "Denver Broncos") == metric(capped, "Denver Broncos")
        assert metric("Denver Broncos", huge) == metric("Denver Broncos", capped)
    assert max_over_golds(squad_f1, huge, ["Broncos", huge]) == max_over_golds(squad_f1, capped, ["Broncos", capped])
    assert normalize_answer(huge) == normalize_answer(capped)
    assert len(seen) == 3 * 2 * 4 + 8 + 2 and max(seen) == cap  # every call, each side read up to the cap
    assert getattr(qa_metrics, "MAX_ANSWER_CHARS", None) == cap
    assert squad_f1(huge, "Denver Broncos") == pytest.approx(2 / (1 + len(capped.split()) / 2))
    # past the cap the official script and this metric may differ (documented): padding then a stray word
    assert exact_match("Paris" + " " * cap + "x", "Paris") == 1.0
