"""The engine's batched env work: `prepare_steps` (the RAG env searches every branch's query in one
`search_batch` call) and batched tokenisation of the injected turns give exactly the episodes of the
unbatched path (one search and one tokenizer call per branch), on a tiny in-memory store, BM25 and hybrid."""
import pytest

from lmgym.envs import RAGHotpotQAEnv, make
from lmgym.episodes import EpisodeEngine, SamplingSettings, prepared_steps
from lmgym.policies import Generation, Policy, build_tiny_tokenizer
from lmgym.retrieval import Document, DocumentStore, HashingEmbedder, StoreConfig
from tests.rag_toys import CORPUS, RECORDS, ToyStore

ACTIONS = [  # what a branch may write; its sampling key picks one
    "<search>Eiffel Tower designer</search>",
    "Let me look. <search>Gustave Eiffel birthplace</search>",
    "<search>Big Ben London</search>",
    "<search>Eiffel Tower designer</search>",  # the same query as another branch's
    "<search>zzzz qqqq</search>",  # no known word: every document ties at 0
    "<search>  </search>",  # empty query
    "</search>",  # unopened tag
    "<search>a <search>b</search>",  # nested tags
    "<search>tower</search>",
    "<search>Eiffel company statue</search>",
    "thinking",  # no call, no answer: the nudge
    "<answer>Dijon</answer>",
    "So <answer>London</answer>",
]


class KeyedPolicy(Policy):
    """Writes ACTIONS[key % len(ACTIONS)] for each row, the key being the row's sampling key (so a branch
    writes the same in any batch); the env's results come back as chat turns of the tiny template."""

    use_chat_template = True

    def __init__(self):
        self.tokenizer = build_tiny_tokenizer()

    def format_prompt(self, observation):
        return self.encode_text(observation if isinstance(observation, str) else observation[-1]["content"])

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        texts = [ACTIONS[key % len(ACTIONS)] for key in generator.keys]
        return [[Generation(list(p), self.encode_text(t), [-0.5] * len(self.encode_text(t)), t, "stop")]
                for p, t in zip(prompts, texts)]

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0):
        raise NotImplementedError


class Unbatched(KeyedPolicy):
    """KeyedPolicy whose injected turns are tokenised one at a time."""

    def encode_turns(self, turns):
        self.turn_calls = getattr(self, "turn_calls", 0) + len(turns)
        return [self.encode_text(t) if role is None else self.encode_turn(t, role, after) for t, role, after in turns]


class CountingStore:
    """A DocumentStore's searches, counted: each `search` query and each `search_batch` call's queries."""

    def __init__(self, store):
        self.store, self.singles, self.batches = store, [], []

    def search(self, query, k=5, **kwargs):
        self.singles.append(query)
        return self.store.search(query, k, **kwargs)

    def search_batch(self, queries, k=5, **kwargs):
        self.batches.append(list(queries))
        return self.store.search_batch(queries, k, **kwargs)

    def check_search(self, k=5, **kwargs):
        self.store.check_search(k, **kwargs)


def tiny_store(dense: bool) -> DocumentStore:
    documents = [Document(f"doc{i}", title, text) for i, (title, text) in enumerate(CORPUS.items())]
    embedder = HashingEmbedder(32) if dense else None
    return DocumentStore.build(documents, StoreConfig(dense=dense, chunk_words=8, chunk_overlap=2),
                               embedder=embedder, progress=False)


def play(env, policy, batched: bool):
    """Every episode of 3 questions x 4 branches to its end; the engine's branches."""
    if not batched:
        env.prepare_steps = lambda actions: None  # the unbatched path: each step searches on its own
    engine = EpisodeEngine(env, policy, SamplingSettings(max_new_tokens=64))
    branches = engine.start([{"options": {"index": i}} for i in range(len(RECORDS))], 4)
    for step in range(engine.step_limit):
        engine.advance(branches, sample_key=step * 31 + 5)
    assert not engine.live(branches)
    return branches


def facts(branch):
    return (branch.ids, branch.logprobs, branch.mask, branch.roles, branch.text, branch.step_rewards,
            branch.step_ends, branch.info, branch.actions, branch.state,
            [p["title"] for p in branch.info.get("retrieved", [])])


@pytest.mark.parametrize("search_kwargs", [{"method": "bm25"}, {"method": "hybrid", "fusion": "rrf"},
                                           {"method": "hybrid", "fusion": "weighted"}, {"method": "dense"}])
@pytest.mark.parametrize("result_role", ["tool", None])
def test_batched_searches_and_tokenisation_give_the_unbatched_episodes(search_kwargs, result_role):
    store = tiny_store(dense=search_kwargs["method"] != "bm25")
    runs = {}
    for batched in (True, False):
        counting = CountingStore(store)
        env = RAGHotpotQAEnv(records=RECORDS, store=counting, k=2, max_searches=2, result_role=result_role,
                             search_kwargs=search_kwargs)
        policy = KeyedPolicy() if batched else Unbatched()
        runs[batched] = (play(env, policy, batched), counting, policy)
    (batched, counted, _), (unbatched, counted_alone, policy) = runs[True], runs[False]
    assert [facts(b) for b in batched] == [facts(b) for b in unbatched]
    searched = [e["argument"] for b in unbatched for e in b.info["tool_log"] if not e["output"].startswith("error")]
    assert len(searched) >= 12 and any(len(b.info["retrieved"]) == 4 for b in batched)  # two searches each
    assert counted_alone.batches == [] and sorted(counted_alone.singles) == sorted(searched)
    assert counted.singles == []  # every search of the batched run came from its advance's one batch
    assert all(len(queries) == len(set(queries)) for queries in counted.batches)  # each distinct query once
    assert set(searched) <= {q for queries in counted.batches for q in queries}
    assert policy.turn_calls > 0


def test_a_store_without_search_batch_searches_as_before_and_a_failing_batch_fails_each_step_alone():
    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), k=2, max_searches=2)
    env_alone = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), k=2, max_searches=2)
    assert [facts(b) for b in play(env, KeyedPolicy(), True)] == [facts(b) for b in play(env_alone, Unbatched(),
                                                                                          False)]
    assert len(env.search_tool.store.calls) == len(env_alone.search_tool.store.calls)  # no batch: same searches

    class FailingBatch(CountingStore):
        def search_batch(self, queries, k=5, **kwargs):
            self.batches.append(list(queries))
            raise ConnectionError("batch endpoint down")

    failing = FailingBatch(tiny_store(dense=False))
    env = RAGHotpotQAEnv(records=RECORDS, store=failing, k=2, max_searches=2, search_kwargs={"method": "bm25"})
    reference = RAGHotpotQAEnv(records=RECORDS, store=tiny_store(dense=False), k=2, max_searches=2,
                               search_kwargs={"method": "bm25"})
    assert [facts(b) for b in play(env, KeyedPolicy(), True)] == [facts(b) for b in play(reference, Unbatched(),
                                                                                           False)]
    assert failing.batches and failing.singles  # the batch failed, so each step searched on its own


def test_the_engine_hands_the_env_each_advance_s_live_actions_then_clears_them():
    env = RAGHotpotQAEnv(records=RECORDS, store=tiny_store(dense=False), k=2, max_searches=2)
    handed, prepare = [], env.prepare_steps
    env.prepare_steps = lambda actions: (handed.append(list(actions)), prepare(actions))[-1]
    engine = EpisodeEngine(env, KeyedPolicy(), SamplingSettings(max_new_tokens=64))
    branches = engine.start([{"options": {"index": 0}}], 3)
    engine.advance(branches, sample_key=5)
    assert handed == [[b.actions[-1].text for b in branches], []]
    assert env.search_tool._prepared == {}  # nothing kept past the advance


def test_tool_env_prepares_each_batching_tool_with_its_well_formed_calls_and_an_env_without_the_hook_is_untouched():
    env = RAGHotpotQAEnv(records=RECORDS, store=tiny_store(dense=False), k=2, max_searches=2)
    env.prepare_steps(["<search>Big Ben</search>", "</search>", "<answer>x</answer>", "<search>Big Ben</search>  ",
                       "<search>Dijon</search>", "x" * 30_000 + "<search>cut off</search>"])
    assert sorted(query for query, _, _ in env.search_tool._prepared) == ["Big Ben", "Dijon"]
    env.prepare_steps([])
    assert env.search_tool._prepared == {}

    class NoHook:
        def __init__(self):
            self.calls = []

    plain = NoHook()
    with prepared_steps(plain, ["a"]) as hooked:
        assert hooked is False and plain.calls == []
    arithmetic = make("Arithmetic-v0")
    with prepared_steps(arithmetic, ["1+1"]) as hooked:  # the base hook: nothing to prepare
        assert hooked is True
