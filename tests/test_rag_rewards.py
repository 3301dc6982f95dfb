"""The QA reward functions against hand values: EM, F1, reciprocal rank / MRR, answer similarity, format."""

import math

import numpy as np
import pytest

from lmgym.envs.hotpotqa.rewards import (
    answer_similarity_reward,
    cosine_similarity,
    exact_match_reward,
    f1_reward,
    format_reward,
    mrr_reward,
    reciprocal_rank,
)
from tests.rag_toys import LetterEmbedder


def test_em_and_f1_read_the_parsed_answer_and_give_nothing_without_one():
    assert exact_match_reward("ignored", "The Dijon", {"parsed_answer": "dijon!"}) == 1.0
    assert f1_reward("ignored", "Dijon", {"parsed_answer": "Dijon, France"}) == pytest.approx(2 / 3)
    assert f1_reward("", "no", {"parsed_answer": "no way"}) == 0.0  # HotpotQA's yes/no rule
    assert exact_match_reward("<answer>Dijon</answer>", "Dijon", {"parsed_answer": None}) == 0.0
    assert f1_reward("<answer>Dijon</answer>", "Dijon", {}) == 0.0


@pytest.mark.parametrize("retrieved, relevant, value", [
    (["A", "B", "C"], ["A"], 1.0),
    (["X", "Y", "B", "A"], ["A", "B"], 1 / 3),  # the first relevant one counts
    (["X", "X", "A"], ["A"], 1 / 3),            # a passage retrieved twice takes two places
    (["X", "Y"], ["A"], 0.0),
    ([], ["A"], 0.0),
    (["A"], [], 0.0),
])
def test_reciprocal_rank_by_hand(retrieved, relevant, value):
    assert reciprocal_rank(retrieved, relevant) == pytest.approx(value)


def test_mrr_reward_ranks_everything_the_episode_retrieved_in_order():
    info = {"supporting_titles": ["Gustave Eiffel", "Eiffel Tower"],
            "retrieved": [{"search": 1, "rank": 1, "title": "Big Ben"}, {"search": 1, "rank": 2, "title": "Dijon"},
                          {"search": 2, "rank": 1, "title": "Eiffel Tower"}]}
    assert mrr_reward("", "Dijon", info) == pytest.approx(1 / 3)
    assert mrr_reward("", "Dijon", {"supporting_titles": ["Dijon"], "retrieved": []}) == 0.0


def test_format_reward_is_one_for_an_answer_minus_the_episodes_penalty():
    assert format_reward("", "x", {"parsed_answer": "x", "format_penalty": 0.0}) == 1.0
    assert format_reward("", "x", {"parsed_answer": "x", "format_penalty": 1.5}) == -0.5
    assert format_reward("", "x", {"parsed_answer": None, "format_penalty": 0.5}) == -0.5
    assert format_reward("", "x", {"parsed_answer": None}) == 0.0


def _one(similarity, answer, gold):
    """Score one episode as env.step alone does (the reward reads the fields the env passes)."""
    return similarity("", gold, {"fields": {"parsed_answer": answer, "gold": gold}})


def test_answer_similarity_is_the_clipped_cosine_of_the_embeddings():
    similarity = answer_similarity_reward(LetterEmbedder())
    assert _one(similarity, "dijon", "Dijon") == pytest.approx(1.0)
    assert _one(similarity, "Dijon", "Paris") == pytest.approx(1 / 5)  # one shared letter, i
    assert _one(similarity, "Dijon, France", "Dijon") == pytest.approx(6 / math.sqrt(13 * 5))
    assert _one(similarity, None, "Dijon") == 0.0
    assert _one(similarity, "42", "Dijon") == 0.0  # no letters: a zero vector

    class Opposite:
        def embed(self, texts):
            return np.array([[1.0, 0.0], [-1.0, 0.0]])

    assert _one(answer_similarity_reward(Opposite()), "b", "a") == 0.0  # clipped at 0
    assert cosine_similarity(np.array([3.0, 4.0]), np.array([4.0, 3.0])) == pytest.approx(24 / 25)


def test_a_batch_of_episodes_is_embedded_in_one_call_with_the_same_scores():
    """The episode engine scores a round's finished episodes together: one embed call for all of them (a GPU
    embedder's launches and sync once, not once an episode), each score as when scored alone."""
    calls = []

    class Counting(LetterEmbedder):
        def embed(self, texts):
            calls.append(list(texts))
            return super().embed(texts)

    similarity = answer_similarity_reward(Counting())
    pairs = [("dijon", "Dijon"), (None, "Paris"), ("Dijon, France", "Dijon"), ("Dijon", "Paris")]
    alone = [_one(similarity, answer, gold) for answer, gold in pairs]
    calls.clear()
    batch = similarity.batch([("", {"fields": {"parsed_answer": a, "gold": g}}) for a, g in pairs])
    assert batch == pytest.approx(alone) and alone == pytest.approx([1.0, 0.0, 6 / math.sqrt(13 * 5), 1 / 5])
    assert calls == [["dijon", "Dijon, France", "Dijon", "Dijon", "Dijon", "Paris"]]  # answers, then their golds


def test_a_bad_embedder_is_a_one_line_error():
    with pytest.raises(ValueError, match="^embedder must have an embed\\(texts\\) -> array method; got str$"):
        answer_similarity_reward("minilm")

    class Flat:
        def embed(self, texts):
            return np.ones(3)

    with pytest.raises(ValueError, match="^embedder.embed returned shape \\(3,\\) for 2 texts; expected \\(2, dim\\)$"):
        _one(answer_similarity_reward(Flat()), "b", "a")
