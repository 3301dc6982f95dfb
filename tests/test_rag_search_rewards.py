"""The searching rewards of the RAG env against hand values: support recall, the redundant-search cost and
the strict format, on hand-built infos and on scripted episodes of the env over the toy store."""

import pytest

from lmgym.envs import RAGHotpotQAEnv
from lmgym.envs.hotpotqa.rewards import (
    MAX_REDUNDANT_COST,
    REDUNDANT_SEARCH_COST,
    redundant_search_reward,
    redundant_searches,
    strict_format_reward,
    support_recall_reward,
)
from tests.rag_toys import RECORDS, ToyStore

TWO = ["Eiffel Tower", "Gustave Eiffel"]


def passages(*searches: list[str]) -> list[dict]:
    """The env's `retrieved` record: search i (from 1) retrieved the titles of `searches[i - 1]`, in rank order."""
    return [{"search": number, "rank": rank, "title": title}
            for number, titles in enumerate(searches, start=1) for rank, title in enumerate(titles, start=1)]


def info(*searches: list[str], supporting=TWO) -> dict:
    return {"supporting_titles": list(supporting), "retrieved": passages(*searches)}


@pytest.mark.parametrize("searches, supporting, recall", [
    ((), TWO, 0.0),                                                    # no search
    ((["Big Ben", "Eiffel Tower"],), TWO, 0.5),                        # one search, one of two titles
    ((["Big Ben"], ["Eiffel Tower", "Eiffel Tower"]), TWO, 0.5),       # a title retrieved twice counts once
    ((["Big Ben"], ["Eiffel Tower"]), ["Big Ben", "Eiffel Tower"], 1.0),  # a comparison: both found
    ((["Big Ben"],), [], 0.0),                                         # a question naming no title
    ((["Gustave Eiffel"],), TWO + ["Gustave Eiffel"], 0.5),           # supporting titles counted once
])
def test_support_recall_is_the_share_of_supporting_titles_retrieved(searches, supporting, recall):
    assert support_recall_reward("", "x", info(*searches, supporting=supporting)) == pytest.approx(recall)


@pytest.mark.parametrize("searches, redundant", [
    ((), 0),
    ((["Big Ben", "Tower Bridge"],), 0),
    ((["Big Ben", "Tower Bridge"], ["Tower Bridge", "Big Ben"]), 1),   # the second search found nothing new
    ((["Big Ben", "Tower Bridge"], ["Big Ben"]), 1),                   # fewer passages, none new
    ((["Big Ben", "Tower Bridge"], ["Big Ben", "Dijon"]), 0),          # Dijon is new
    ((["Big Ben"], ["Big Ben"], ["Big Ben"]), 2),
])
def test_a_search_that_finds_nothing_new_is_redundant(searches, redundant):
    assert redundant_searches(passages(*searches)) == redundant
    assert redundant_search_reward("", "x", info(*searches)) == pytest.approx(-REDUNDANT_SEARCH_COST * redundant)


def test_the_redundant_search_cost_is_small_bounded_and_skips_searches_that_retrieved_nothing():
    assert (REDUNDANT_SEARCH_COST, MAX_REDUNDANT_COST) == (0.1, 0.3)
    assert redundant_search_reward("", "x", info(*[["Big Ben"]] * 10)) == pytest.approx(-0.3)  # 9 redundant, bounded
    gap = [{"search": 1, "title": "Big Ben"}, {"search": 3, "title": "Dijon"}]  # search 2 retrieved nothing
    assert redundant_searches(gap) == 0 and redundant_search_reward("", "x", {"retrieved": gap}) == 0.0
    assert redundant_search_reward("", "x", {}) == 0.0


def episode(*steps: str, searches: int | None = None, answer: str | None = "Dijon", violations=()) -> dict:
    """A finished episode's info as the env gives it: every step but the last ran a search by default."""
    ran = len(steps) - 1 if searches is None else searches
    return {"steps": list(steps), "parsed_answer": answer, "format_violations": list(violations),
            "tool_calls": {"search": ran} if ran else {}}


def test_strict_format_pays_for_well_formed_searches_then_one_answer_at_the_end():
    assert strict_format_reward("", "x", episode("Think. <search>Big Ben</search>", "<search>Dijon</search>\n",
                                                 "So: <answer>Dijon</answer>\n")) == 1.0
    assert strict_format_reward("", "x", episode("<answer>Dijon</answer>")) == 1.0  # no search: still well formed


@pytest.mark.parametrize("steps, overrides", [
    (["<search>Big Ben</search>"], {"answer": None}),                                  # truncated: no answer
    (["<search></search>", "<answer>Dijon</answer>"], {"searches": 0, "violations": ["empty_query"]}),
    (["<search>a</search>", "<search>b</search>", "<answer>Dijon</answer>"],
     {"searches": 1, "violations": ["search_after_cap"]}),                             # refused after the cap
    (["<answer>Dijon</answer> and <answer>Dijon</answer>"], {}),                       # two answers
    (["<answer>Paris</answer><answer>Dijon</answer>"], {}),
    (["<answer>Dijon</answer> I am sure."], {}),                                       # text after the answer
    (["<search>Dijon</search> <answer>Dijon</answer>"], {}),                           # a search tag in the answer
    (["<answer>Paris</answer> <search>Dijon</search>", "<answer>Dijon</answer>"], {}),  # an answer in a search
    (["<search>a</search> <search>b</search>", "<answer>Dijon</answer>"], {}),         # two searches in one action
    (["Let me think.", "<answer>Dijon</answer>"], {"searches": 0}),                    # a step with no call
    (["<search>Big Ben</search>", "<answer>Dijon</answer>"], {"searches": 0}),         # a search the env never ran
    (["</answer>Dijon<answer>"], {}),
    ([], {}),
])
def test_strict_format_is_zero_for_any_malformed_structure(steps, overrides):
    assert strict_format_reward("", "x", episode(*steps, **overrides)) == 0.0


def test_strict_format_reads_only_what_the_env_recorded():
    assert strict_format_reward("<answer>Dijon</answer>", "Dijon", {"parsed_answer": "Dijon"}) == 0.0  # no steps
    assert strict_format_reward("", "x", {**episode("<answer>Dijon</answer>"), "steps": [None]}) == 0.0


# ---- the env feeds them ------------------------------------------------------------------------------


def play(index: int, actions: list[str], **kwargs) -> dict:
    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), **kwargs)
    env.reset(options={"index": index})
    for action in actions:
        _, _, terminated, truncated, step_info = env.step(action)
        if terminated or truncated:
            return step_info
    raise AssertionError("the episode did not end")


SEARCHING = ("support_recall", "redundant_search", "strict_format")


def test_a_scripted_episode_with_a_redundant_search_scores_each_new_component_by_hand():
    # Dijon (supporting: Eiffel Tower, Gustave Eiffel), k=2. The toy store ranks by shared words:
    # "Big Ben London" -> Big Ben, Tower Bridge; "London bell" -> Big Ben, Tower Bridge again (redundant);
    # "Gustave Eiffel born" -> Gustave Eiffel, Eiffel Tower: both supporting titles, first at place 5.
    info = play(0, ["<search>Big Ben London</search>", "<search>London bell</search>",
                    "<search>Gustave Eiffel born</search>", "<answer>Dijon</answer>"], k=2)
    assert [(p["search"], p["title"]) for p in info["retrieved"]] == [
        (1, "Big Ben"), (1, "Tower Bridge"), (2, "Big Ben"), (2, "Tower Bridge"), (3, "Gustave Eiffel"),
        (3, "Eiffel Tower")]
    components = info["reward_components"]
    assert {name: components[name] for name in SEARCHING} == pytest.approx(
        {"support_recall": 1.0, "redundant_search": -0.1, "strict_format": 1.0})
    assert (components["mrr"], components["em"], components["format"]) == pytest.approx((1 / 5, 1.0, 1.0))


def test_one_search_finding_one_of_two_titles_then_two_answers():
    # "Dijon city" -> Dijon (2 shared words), Gustave Eiffel (1): one supporting title of two. The last action
    # holds two answers: the env grades the last, the lenient format pays, the strict one does not.
    info = play(0, ["<search>Dijon city</search>", "<answer>Paris</answer> or <answer>Dijon</answer>"], k=2)
    assert [p["title"] for p in info["retrieved"]] == ["Dijon", "Gustave Eiffel"]
    components = info["reward_components"]
    assert {name: components[name] for name in SEARCHING} == pytest.approx(
        {"support_recall": 0.5, "redundant_search": 0.0, "strict_format": 0.0})
    assert (components["em"], components["format"]) == (1.0, 1.0)


def test_a_comparison_finds_both_titles_with_two_searches_and_no_search_finds_none():
    # same-city (supporting: Big Ben, Eiffel Tower), k=1: "Big Ben" -> Big Ben; "Eiffel Tower Paris" -> Eiffel Tower
    info = play(2, ["<search>Big Ben</search>", "<search>Eiffel Tower Paris</search>", "<answer>no</answer>"], k=1)
    assert [p["title"] for p in info["retrieved"]] == ["Big Ben", "Eiffel Tower"]
    assert {name: info["reward_components"][name] for name in SEARCHING} == pytest.approx(
        {"support_recall": 1.0, "redundant_search": 0.0, "strict_format": 1.0})
    closed_book = play(2, ["<answer>no</answer>"])["reward_components"]
    assert {name: closed_book[name] for name in SEARCHING} == {"support_recall": 0.0, "redundant_search": 0.0,
                                                                "strict_format": 1.0}


def test_a_malformed_call_or_a_truncated_episode_gets_no_strict_format():
    malformed = play(0, ["<search></search>", "<search>Gustave Eiffel born</search>", "<answer>Dijon</answer>"])
    assert malformed["format_violations"] == ["empty_query"]
    assert (malformed["reward_components"]["strict_format"], malformed["reward_components"]["format"]) == (0.0, 0.5)
    truncated = play(0, ["<search>Gustave Eiffel born</search>"], max_steps=1)
    assert truncated["reward_components"]["strict_format"] == 0.0
    assert truncated["reward_components"]["support_recall"] == 1.0  # retrieval pays even without an answer
