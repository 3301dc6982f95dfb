"""RAG-HotpotQA-v0: searches answered with passages, malformed calls penalised (never a crash), the
retrieval recorded in state and info, rewards by hand, the gymnasium checker, the loss mask."""

import math
import random
import sys
import warnings

import pytest
from gymnasium.utils.env_checker import check_env

from lmgym.envs import RAGHotpotQAEnv, SearchTool, Tool, ToolCall, make
from lmgym.envs.hotpotqa.rag import VIOLATION_MESSAGES, open_store
from lmgym.episodes.rollout import SamplingSettings, rollout
from lmgym.policies.decoding.generation import Generation
from tests import rag_toys
from tests.rag_toys import RECORDS, LetterEmbedder, ToyStore

DIJON = 0
ERROR = "<result>error: {}</result>"


def started(store=None, **kwargs) -> RAGHotpotQAEnv:
    env = RAGHotpotQAEnv(records=RECORDS, store=store or ToyStore(), **kwargs)
    env.reset(options={"index": DIJON})
    return env


def test_an_episode_searches_twice_then_answers_and_every_reward_has_its_hand_value():
    store = ToyStore()
    env = started(store, k=2, embedder=LetterEmbedder())
    assert env.stop_strings == ["</search>", "</answer>"] and env.max_steps == 5
    _, reward, terminated, _, info = env.step("First <search>Big Ben London</search>")
    assert (reward, terminated, info["injected_role"]) == (0.0, False, "tool")
    assert info["injected_text"] == ("<result>[1] Big Ben\nBig Ben is the great bell of the clock in London.\n\n"
                                     "[2] Tower Bridge\nTower Bridge is a bridge in London.</result>")
    env.step("<search> Gustave Eiffel born </search>")
    _, reward, terminated, _, info = env.step("So: <answer>Dijon, France</answer>")
    assert store.calls == [("Big Ben London", 2, {}), ("Gustave Eiffel born", 2, {})]
    assert [(p["search"], p["rank"], p["title"], p["score"]) for p in info["retrieved"]] == [
        (1, 1, "Big Ben", 3.0), (1, 2, "Tower Bridge", 1.0), (2, 1, "Gustave Eiffel", 3.0), (2, 2, "Eiffel Tower", 2.0)]
    assert info["retrieved"][2] == {"search": 2, "query": "Gustave Eiffel born", "rank": 1, "doc_id": "doc1",
                                    "title": "Gustave Eiffel", "score": 3.0,
                                    "text": "Gustave Eiffel was a French civil engineer, born in Dijon."}
    components = {"em": 0.0, "f1": 2 / 3, "mrr": 1 / 3, "support_recall": 1.0, "redundant_search": 0.0,
                  "format": 1.0, "strict_format": 1.0, "answer_similarity": 6 / math.sqrt(65)}
    assert info["reward_components"] == pytest.approx(components)  # mrr: the first supporting passage is 3rd
    assert terminated and reward == pytest.approx(sum(components.values()) / 8)
    assert (info["tool_calls"], info["format_violations"], info["format_penalty"]) == ({"search": 2}, [], 0.0)
    assert info["supporting_titles"] == ["Eiffel Tower", "Gustave Eiffel"]


UNCLOSED = "unclosed tag; write <search>QUERY</search> or <answer>...</answer>"
NESTED = "nested tags; write one <search>QUERY</search> with plain text inside"
EMPTY = "empty query; write <search>QUERY</search>"


@pytest.mark.parametrize("action, violation, message", [
    ("<search>Big Ben", "unclosed_tag", UNCLOSED),
    ("I think <answer>Dijon", "unclosed_tag", UNCLOSED),
    ("Big Ben</search>", "unopened_tag", "</search> without <search>; write <search>QUERY</search>"),
    ("<search>Big <search>Ben</search>", "nested_tags", NESTED),
    ("<search>Big <answer>Ben</answer></search>", "nested_tags", NESTED),
    ("<search>a</search>b</search>", "nested_tags", NESTED),
    ("<search> \n </search>", "empty_query", EMPTY),
    ("<search></search>", "empty_query", EMPTY),
    ("<search>" + "x" * 501 + "</search>", "query_too_long", "query too long; write a short <search>QUERY</search>"),
    ("<search>" + "Ben " * 25_000 + "</search>", "unclosed_tag", UNCLOSED),  # 100 KB: cut at max_action_chars first
])
def test_each_malformed_call_is_answered_with_an_error_penalised_and_runs_no_search(action, violation, message):
    store = ToyStore()
    env = started(store)
    _, reward, terminated, truncated, info = env.step(action)
    assert (info["injected_text"], info["injected_role"]) == (ERROR.format(message), "tool")
    assert (reward, terminated, truncated, store.calls, info["retrieved"]) == (0.0, False, False, [], [])
    assert (info["format_violations"], info["format_penalty"], info["tool_calls"]) == ([violation], 0.5, {})
    _, _, terminated, _, info = env.step("<answer>Dijon</answer>")
    assert terminated and info["reward_components"]["format"] == 0.5 and info["reward_components"]["em"] == 1.0


def test_random_tag_soup_never_crashes_and_only_searches_well_formed_calls():
    pieces = ["<search>", "</search>", "<answer>", "</answer>", "<search", "answer>", "Dijon", " ", "\n", "x" * 300,
              "<search>Big Ben</search>", "<search>Eiffel</search>", "<answer>Dijon</answer>"]
    rng = random.Random(0)
    for _ in range(300):
        store = ToyStore()
        env = started(store, max_searches=2, max_steps=6)
        done, violations = False, 0
        while not done:
            action = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
            _, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            assert len(info["format_violations"]) - violations <= 1 and set(info["format_violations"]) <= set(
                VIOLATION_MESSAGES)
            violations = len(info["format_violations"])
            assert len(store.calls) == info["tool_calls"].get("search", 0) <= 2
            assert info["format_penalty"] == 0.5 * violations


def test_a_100_kb_query_that_fits_the_action_limit_is_too_long():
    env = started(max_action_chars=200_000)
    info = env.step("<search>" + "Ben " * 25_000 + "</search>")[4]
    assert info["format_violations"] == ["query_too_long"] and info["tool_log"][0]["argument"] is None


def test_a_search_after_the_cap_is_refused_and_every_violation_adds_to_the_penalty():
    store = ToyStore()
    env = started(store, max_searches=1, max_steps=5, format_penalty=0.25)
    assert env.step("<search>Dijon</search>")[4]["tool_calls"] == {"search": 1}
    assert env.stop_strings == ["</search>", "</answer>"]  # still stops there, to answer with the error
    info = env.step("<search>Gustave Eiffel</search>")[4]
    assert info["injected_text"] == ERROR.format("no searches left; give the final answer as <answer>...</answer>")
    env.step("<search></search>")
    info = env.step("<answer>Dijon</answer>")[4]
    assert len(store.calls) == 1 and info["format_violations"] == ["search_after_cap", "search_after_cap"]
    assert info["format_penalty"] == 0.5 and info["reward_components"]["format"] == 0.5
    assert [entry["argument"] for entry in info["tool_log"]] == ["Dijon", None, None]


def test_text_without_a_call_or_an_answer_is_nudged_not_penalised():
    info = started().step("Let me think about this.")[4]
    assert (info["injected_role"], info["format_violations"]) == ("user", [])
    info = started(result_role=None).step("Let me think.")[4]
    assert (info["injected_text"], info["injected_role"]) == ("\n", None)


def test_truncation_without_an_answer_scores_format_zero_and_no_answer_rewards():
    env = started(max_steps=1)
    _, reward, terminated, truncated, info = env.step("<search>Dijon</search>")
    assert (terminated, truncated, info["unparseable"]) == (False, True, True)
    assert info["reward_components"] == {"em": 0.0, "f1": 0.0, "mrr": 1.0, "support_recall": 1.0,  # Gustave Eiffel
                                         "redundant_search": 0.0, "format": 0.0, "strict_format": 0.0}  # is 1st
    assert reward == pytest.approx(2 / 7)


def test_a_failing_store_is_an_error_output_not_a_crash():
    info = started(ToyStore(fail=True)).step("<search>Dijon</search>")[4]
    assert info["injected_text"] == "<result>error: search failed (ConnectionError)</result>"
    assert info["tool_calls"] == {"search": 1} and info["retrieved"] == [] and info["format_violations"] == []


def test_state_round_trips_the_retrieved_passages_and_the_violations():
    env = started()
    env.step("<search>Big Ben London</search>")
    env.step("<search></search>")
    saved = env.get_state()
    assert [p["title"] for p in saved["retrieved"]] == ["Big Ben", "Tower Bridge", "Eiffel Tower"]
    assert saved["format_violations"] == ["empty_query"] and saved["tool_calls"] == {"search": 1}
    first = env.step("<search>Gustave Eiffel born</search>")[4]
    assert len(env.retrieved) == 6
    env.set_state(saved)
    assert env.get_state() == saved and len(env.retrieved) == 3 and env.format_violations == ["empty_query"]
    again = env.step("<search>Gustave Eiffel born</search>")[4]
    assert again == first
    saved["retrieved"].clear()  # the env holds its own copy
    assert len(env.retrieved) == 6


def test_search_tool_follows_the_tool_protocol():
    tool = SearchTool(ToyStore(), k=1, max_passage_chars=10)
    assert isinstance(tool, Tool) and (tool.name, tool.syntax, tool.stop_string) == (
        "search", "<search>QUERY</search>", "</search>")
    assert tool.parse("go <search> Dijon </search>\n") == ToolCall("search", "Dijon")
    assert tool.parse("<search>a <search>b</search>") is None and tool.parse("<search> </search>") is None
    assert tool.execute(ToolCall("search", "Dijon city")) == "[1] Dijon\nDijon is a"
    assert tool.execute(ToolCall("calc", "1")) == "error: not a call of search"


def test_the_store_may_be_an_index_folder_opened_lazily_and_bad_stores_are_one_line_errors(monkeypatch, tmp_path):
    loaded = []
    fake = type("DocumentStore", (), {"load": staticmethod(lambda path: loaded.append(path) or ToyStore())})
    monkeypatch.setattr(sys.modules[open_store.__module__], "DocumentStore", fake)
    assert isinstance(open_store(tmp_path), ToyStore) and loaded == [tmp_path]
    with pytest.raises(ValueError, match="^store must be a document store .*; got None$"):
        RAGHotpotQAEnv(records=RECORDS)
    with pytest.raises(ValueError, match="^store must be a document store .*; got 42$"):
        RAGHotpotQAEnv(records=RECORDS, store=42)
    with pytest.raises(ValueError, match="^format_penalty must be a finite number >= 0; got -1$"):
        RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), format_penalty=-1)
    with pytest.raises(ValueError, match="^max_searches must be an int >= 1; got 0$"):
        RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), max_searches=0)
    with pytest.raises(ValueError, match="^k must be an int >= 1; got 0$"):
        RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), k=0)
    with pytest.raises(ValueError, match="^max_query_chars must be an int >= 1; got 0$"):
        RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), max_query_chars=0)
    with pytest.raises(ValueError, match="^max_steps must be an int >= 1; got 0$"):
        RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), max_steps=0)


def test_default_rewards_take_the_stores_embedder_and_weigh_the_components_equally():
    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(embedder=LetterEmbedder()))
    names = ["em", "f1", "mrr", "support_recall", "redundant_search", "format", "strict_format"]
    assert list(env.reward_fns) == names + ["answer_similarity"]
    assert set(env.reward_weights.values()) == {1 / 8}
    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore())  # no embedder: no answer similarity
    assert list(env.reward_fns) == names and set(env.reward_weights.values()) == {1 / 7}


@pytest.mark.parametrize("result_role", ["tool", None])
def test_rag_env_is_registered_and_passes_the_gymnasium_checker(result_role):
    for env_id in ("RAG-HotpotQA-v0", "rlgym/RAG-HotpotQA-v0"):
        env = make(env_id, records=RECORDS, store=ToyStore(), result_role=result_role)
        assert isinstance(env, RAGHotpotQAEnv) and env.mode == "multi_turn"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)


def test_both_data_layouts_load_into_the_rag_env(shared_data):
    folder = shared_data / "hotpotqa"
    for name, count in (("hotpot_dev_distractor_v1_first53.json", 53),
                        ("dev_distractor_sample_seed1_n500.jsonl", 500)):
        env = RAGHotpotQAEnv(folder / name, store=ToyStore())
        obs, info = env.reset(seed=1)
        assert env.num_problems == count and obs.startswith(info["question"])
        info = env.step(f"<search>{info['question']}</search>")[4]
        assert len(info["retrieved"]) == 3 and len(info["supporting_titles"]) == 2


# ---- the loss mask -----------------------------------------------------------------------------------


class ScriptedPolicy:
    """The tiny policy, except that its actions are given: each `sample` call plays the next one."""

    def __init__(self, policy, actions):
        self.policy, self.actions = policy, list(actions)

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def sample(self, prompts, n, max_new_tokens, temperature, top_p, stop, generator):
        text = self.actions.pop(0)
        ids = self.policy.encode_text(text)
        return [[Generation(list(prompt), ids, [-1.0] * len(ids), text, "stop")] for prompt in prompts]


@pytest.mark.parametrize("result_role", ["tool", None])
def test_the_loss_mask_covers_exactly_the_injected_passage_tokens(tiny_policy, result_role):
    actions = ["<search>Big Ben London</search>", "<search></search>", "<search>Gustave Eiffel born</search>",
               "<answer>Dijon</answer>"]
    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), k=2, result_role=result_role)
    (trajectory,) = rollout(env, ScriptedPolicy(tiny_policy, actions), [{"options": {"index": DIJON}}], 1,
                            SamplingSettings(max_new_tokens=64))
    ids, mask = trajectory.completion_ids, trajectory.completion_mask
    replay = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), k=2, result_role=result_role)
    replay.reset(options={"index": DIJON})
    expected_ids, expected_mask = [], []
    for action in actions:
        injected = replay.step(action)[4]["injected_text"]
        expected_ids += tiny_policy.encode_text(action)
        expected_mask += [1] * len(tiny_policy.encode_text(action))
        if injected:
            turn = (tiny_policy.encode_turn(injected, result_role, after=expected_ids) if result_role
                    else tiny_policy.encode_text(injected))
            expected_ids += turn
            expected_mask += [0] * len(turn)
    assert (ids, mask) == (expected_ids, expected_mask)
    masked = tiny_policy.tokenizer.decode([t for t, m in zip(ids, mask) if m == 0])
    trained = tiny_policy.tokenizer.decode([t for t, m in zip(ids, mask) if m == 1])
    assert trained == "".join(actions)
    assert "Big Ben is the great bell" in masked and "Gustave Eiffel was a French" in masked
    assert "error: empty query" in masked and "Big Ben is" not in trained
    assert trajectory.info["reward_components"]["mrr"] == pytest.approx(1 / 3)


def test_a_failing_search_is_recorded_in_the_episodes_tool_errors():
    env = started(ToyStore(fail=True))
    info = env.step("<search>Dijon</search>")[4]
    assert info["tool_errors"] == [{"tool": "search", "error": "ConnectionError: index is gone"}]
    info = env.step("<search>Paris</search>")[4]
    assert [e["error"] for e in info["tool_errors"]] == ["ConnectionError: index is gone"] * 2
    assert env.get_state()["tool_errors"] == info["tool_errors"]
    assert started().step("<search>Dijon</search>")[4]["tool_errors"] == []  # a search that works: none


def bm25_only_store():
    from lmgym.retrieval import Document, DocumentStore, StoreConfig

    documents = [Document(f"doc{i}", title, text) for i, (title, text) in enumerate(rag_toys.CORPUS.items())]
    return DocumentStore.build(documents, StoreConfig(dense=False), progress=False)


@pytest.mark.parametrize("method", ["dense", "hybrid"])
def test_a_search_method_the_store_cannot_run_is_refused_when_the_env_is_made(tmp_path, method):
    store = bm25_only_store()
    folder = store.save(tmp_path / "index")
    for given in (store, str(folder)):
        with pytest.raises(ValueError) as info:
            RAGHotpotQAEnv(records=RECORDS, store=given, search_kwargs={"method": method})
        message = str(info.value)
        assert message == (f"search_kwargs {{'method': {method!r}}} do not fit the store: search method {method!r} "
                           f"needs dense embeddings, and this store has none (built with dense=False): it can "
                           f"search with bm25 only; use method='bm25' or rebuild the index with dense embeddings")
    assert store.methods == ("bm25",)
    with pytest.raises(ValueError, match=r"do not fit the store: unknown fusion 'max'"):
        RAGHotpotQAEnv(records=RECORDS, store=store, search_kwargs={"fusion": "max"})
    env = RAGHotpotQAEnv(records=RECORDS, store=store, search_kwargs={"method": "bm25"})
    env.reset(options={"index": DIJON})
    assert env.step("<search>Gustave Eiffel born</search>")[4]["tool_errors"] == []

    class StrictStore:  # takes no search keyword arguments at all
        def search(self, query, k):
            return []

    with pytest.raises(ValueError, match=r"^search_kwargs \{'method': 'bm25'\} do not fit StrictStore.search: got an "
                                         r"unexpected keyword argument 'method'$"):
        RAGHotpotQAEnv(records=RECORDS, store=StrictStore(), search_kwargs={"method": "bm25"})


def test_a_rounds_finished_episodes_score_answer_similarity_with_one_embed_call(tiny_policy):
    """Rollouts score answer_similarity over every episode a round finished at once (one embed call, not one an
    episode: a GPU embedder's launches and sync once), each episode's value as env.step alone gives it."""
    calls = []

    class Counting(LetterEmbedder):
        def embed(self, texts):
            calls.append(len(texts))
            return super().embed(texts)

    actions = ["<search>Gustave Eiffel born</search>", "<answer>Dijon, France</answer>"]
    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), k=2, embedder=Counting())
    trajectories = rollout(env, ScriptedPolicy(tiny_policy, actions), [{"options": {"index": DIJON}}], 4,
                           SamplingSettings(max_new_tokens=64))
    assert calls == [8]  # 4 answers and their 4 golds
    assert [t.info["reward_components"]["answer_similarity"] for t in trajectories] == pytest.approx(
        [6 / math.sqrt(65)] * 4)
