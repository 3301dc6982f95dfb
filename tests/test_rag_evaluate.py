"""The RAG table's evaluation (evaluation/rag_evaluate.py) against hand values, the question-search reference env
(envs/hotpotqa/retrieved.py) over the toy store, and the default reward weights both RAG examples use."""
from types import SimpleNamespace

import pytest

from lmgym.envs.hotpotqa.rag import RAGHotpotQAEnv, rag_reward_weights
from lmgym.envs.hotpotqa.retrieved import QuestionSearchHotpotQAEnv
from lmgym.envs.hotpotqa.rewards import DEFAULT_WEIGHTS
from lmgym.evaluation.rag_evaluate import (
    REPLY_CHARS,
    episode_metrics,
    evaluate_rag,
    mean_metrics,
    reply_answer,
    search_queries,
)
from tests.rag_toys import RECORDS, LetterEmbedder, ToyStore


def episode(info: dict, answer: str | None, tokens: int = 5, text: str = "") -> SimpleNamespace:
    """What episode_metrics reads of a Trajectory."""
    return SimpleNamespace(info=info, num_generated_tokens=tokens, text=text,
                           outcome=SimpleNamespace(parsed_answer=answer, problem_id="dijon"))


def retrieved(*searches: list[str]) -> list[dict]:
    return [{"search": n, "rank": r, "title": t, "query": f"q{n}"}
            for n, titles in enumerate(searches, start=1) for r, t in enumerate(titles, start=1)]


def test_episode_metrics_have_their_hand_values():
    # search 1 finds neither supporting title in its 3 passages; search 2 finds one at overall rank 5
    info = {"gold": "Dijon", "supporting_titles": ["Eiffel Tower", "Gustave Eiffel"],
            "retrieved": retrieved(["Big Ben", "Dijon", "Tower Bridge"], ["Dijon", "Gustave Eiffel", "Big Ben"]),
            "tool_calls": {"search": 2},
            "tool_log": [{"tool": "search", "argument": "q1", "output": "[1] Big Ben"},
                         {"tool": "search", "argument": "", "output": "error: empty query; write ..."},
                         {"tool": "search", "argument": "q2", "output": "[1] Dijon"}]}
    metrics = episode_metrics(episode(info, "the city of Dijon", tokens=17))
    assert metrics["mrr"] == pytest.approx(1 / 5)
    assert metrics["recall@3"] == 0.0 and metrics["recall"] == 0.5  # the second search found one of two
    assert metrics["em"] == 0.0 and metrics["f1"] == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))  # "city of dijon"
    assert metrics["searches"] == 2.0 and metrics["tokens"] == 17.0
    assert metrics["queries"] == ["q1", "q2"] == search_queries(info)  # the refused call is not a search
    unanswered = episode_metrics(episode({**info, "retrieved": retrieved(["Gustave Eiffel", "Eiffel Tower"])}, None))
    assert (unanswered["mrr"], unanswered["recall@3"], unanswered["em"], unanswered["f1"]) == (1.0, 1.0, 0.0, 0.0)


def test_an_untagged_reply_is_read_leniently_in_its_own_columns_only():
    info = {"gold": "Dijon", "supporting_titles": ["Eiffel Tower"]}
    untagged = episode_metrics(episode(info, None, text="\n  Dijon.\nIt is in Burgundy, France."))
    assert (untagged["em"], untagged["f1"]) == (0.0, 0.0)  # the strict columns need the tags
    assert untagged["reply_answer"] == "Dijon." and (untagged["em_reply"], untagged["f1_reply"]) == (1.0, 1.0)
    partly = episode_metrics(episode(info, None, text="It is the city of Dijon"))
    # "it is city of dijon"
    assert partly["em_reply"] == 0.0 and partly["f1_reply"] == pytest.approx(2 * (1 / 5) / (1 / 5 + 1))
    tagged = episode_metrics(episode(info, "Paris", text="Dijon <answer>Paris</answer>"))
    assert (tagged["em_reply"], tagged["f1_reply"]) == (tagged["em"], tagged["f1"]) == (0.0, 0.0)  # tags win
    assert episode_metrics(episode(info, None, text=" \n "))["f1_reply"] == 0.0
    assert len(reply_answer(None, "x" * 10 * REPLY_CHARS)) == REPLY_CHARS  # bounded


def test_rows_that_cannot_search_have_no_retrieval_numbers_and_means_skip_them():
    closed = episode_metrics(episode({"gold": "Dijon", "supporting_titles": ["Eiffel Tower"]}, "Dijon"))
    assert (closed["mrr"], closed["recall@3"], closed["recall"], closed["searches"]) == (None, None, None, 0.0)
    assert closed["em"] == 1.0 and closed["retrieved_titles"] is None and closed["queries"] == []
    means = mean_metrics([closed, {**closed, "em": 0.0, "tokens": 15.0}])
    assert means["mrr"] is None and means["em"] == 0.5 and means["tokens"] == 10.0
    searched = {**closed, "mrr": 0.5}
    assert mean_metrics([closed, searched])["mrr"] == 0.5  # over the episodes that searched


def test_the_question_search_env_answers_from_the_questions_own_top_k():
    store = ToyStore()
    env = QuestionSearchHotpotQAEnv(records=RECORDS, store=store, k=2)
    observation, _ = env.reset(options={"index": 0})  # supporting: Eiffel Tower, Gustave Eiffel
    question = RECORDS[0].question
    assert store.calls == [(question, 2, {})]
    assert observation.startswith("[1] Eiffel Tower\n") and f"\n\nQuestion: {question}\n" in observation
    assert "Big Ben" not in observation  # two passages only
    _, reward, terminated, _, info = env.step("It is <answer>Dijon</answer>")
    assert terminated and reward == 1.0 and len(store.calls) == 1  # searched once per question (cached)
    assert [(p["search"], p["query"], p["rank"], p["title"]) for p in info["retrieved"]] == [
        (1, question, 1, "Eiffel Tower"), (1, question, 2, "Gustave Eiffel")]
    assert info["tool_calls"] == {"search": 1} and search_queries(info) == [question]
    assert info["reward_components"] == {"em": 1.0, "f1": 1.0, "mrr": 1.0, "support_recall": 1.0}


def test_evaluate_rag_plays_each_question_greedily_once(tiny_policy):
    env = QuestionSearchHotpotQAEnv(records=RECORDS, store=ToyStore(), k=2)
    means, episodes = evaluate_rag(tiny_policy, env, max_new_tokens=4, batch_prompts=2)
    assert [e["id"] for e in episodes] == [r.id for r in RECORDS]
    assert means["searches"] == 1.0 and all(e["tokens"] <= 4 for e in episodes)
    assert means == mean_metrics(episodes)
    with pytest.raises(ValueError, match="batch_prompts >= 1"):
        evaluate_rag(tiny_policy, env, batch_prompts=0)


def test_default_weights_pay_answering_more_and_keep_answer_similarity_for_dense_stores():
    assert max(DEFAULT_WEIGHTS["mrr"], DEFAULT_WEIGHTS["support_recall"]) < min(DEFAULT_WEIGHTS["em"],
                                                                                DEFAULT_WEIGHTS["f1"])
    assert "answer_similarity" not in rag_reward_weights(None)
    assert rag_reward_weights(LetterEmbedder()) == DEFAULT_WEIGHTS
    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), reward_weights=rag_reward_weights(None))
    assert env.reward_weights == rag_reward_weights(None)
