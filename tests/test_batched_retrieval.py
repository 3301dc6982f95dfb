"""Batched retrieval returns what one query at a time returns, bit for bit: `DocumentStore.search_batch` against
`search` (BM25, dense and hybrid with the hashing embedder), BM25's one-pass scoring against bm25s's own
per-query scoring, and the partial-selection `top_k` against a full stable sort (ties, NaNs)."""
import random

import numpy as np
import pytest

from lmgym.retrieval import Document, DocumentStore, HashingEmbedder, StoreConfig, top_k
from lmgym.retrieval.bm25 import BM25Index, tokenize

WORDS = ("tower bridge paris london river bell clock engineer company iron frame city france england born "
         "designed built great lattice statue liberty island harbour").split()


def corpus(n: int = 300, seed: int = 0) -> list[Document]:
    """`n` documents of 3-12 words from a small vocabulary: many equal BM25 scores and cosines."""
    rng = random.Random(seed)
    return [Document(f"d{i}", rng.choice(WORDS).title(), " ".join(rng.choices(WORDS, k=rng.randint(3, 12))))
            for i in range(n)]


def queries(seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    made = [" ".join(rng.choices(WORDS, k=rng.randint(1, 5))) for _ in range(40)]
    return made + made[:5] + ["", "the of and", "zzz unknown", "Tower TOWER tower"]


@pytest.fixture(scope="module")
def hybrid_store() -> DocumentStore:
    return DocumentStore.build(corpus(), StoreConfig(chunk_words=None, rrf_depth=20), embedder=HashingEmbedder(64),
                               progress=False)


@pytest.mark.parametrize(("method", "fusion"), [("bm25", None), ("dense", None), ("hybrid", "rrf"),
                                                ("hybrid", "weighted")])
def test_search_batch_gives_each_query_exactly_its_own_search(hybrid_store, method, fusion):
    asked = queries()
    batch = hybrid_store.search_batch(asked, 7, method, fusion)
    alone = [hybrid_store.search(query, 7, method, fusion) for query in asked]
    assert batch == alone  # same documents, same order (ties too), same float scores
    assert any(row[0].score == row[1].score for row in batch if len(row) > 1)  # ties were there to break


def test_an_embedder_that_is_not_batch_invariant_gets_one_matrix_product_within_float_tolerance():
    class Padding(HashingEmbedder):  # what a neural embedder says: its vectors depend on the batch
        batch_invariant = False

    store = DocumentStore.build(corpus(), StoreConfig(chunk_words=None), embedder=Padding(64), progress=False)
    asked = queries()
    for batch, alone in zip(store.search_batch(asked, 7, "dense"), [store.search(q, 7, "dense") for q in asked]):
        assert [hit.score for hit in batch] == pytest.approx([hit.score for hit in alone], abs=1e-6)


@pytest.mark.parametrize("bm25_method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_bm25_scores_all_queries_in_one_pass_as_bm25s_scores_each(bm25_method):
    texts = [d.text for d in corpus(120)]
    index = BM25Index.build(texts, "en", method=bm25_method)
    token_ids = [index.retriever.get_tokens_ids(tokens) for tokens in tokenize(queries(), "en")]
    known = [ids for ids in token_ids if ids]
    assert len(known) >= 40 and any(len(ids) != len(set(ids)) for ids in known)  # repeated words too
    together = index.scores_of_ids(known)
    for row, ids in enumerate(known):
        assert np.array_equal(together[row], index.retriever.get_scores_from_ids(ids))
    scores = index.scores(queries())
    assert scores.dtype == np.float32 and not scores[len(queries()) - 3].any()  # "the of and": stop words only


def test_top_k_is_the_head_of_a_stable_sort_with_ties_and_nans():
    rng = np.random.default_rng(0)
    for trial in range(2000):
        n = int(rng.integers(1, 80))
        scores = rng.integers(-3, 4, n).astype(np.float32)
        if trial % 3 == 0:
            scores[rng.random(n) < 0.3] = np.nan
        if trial % 5 == 0:
            scores *= 0.0  # zeros of both signs
        k = int(rng.integers(1, 90))
        assert np.array_equal(top_k(scores, k), np.argsort(-scores, kind="stable")[:k]), (scores, k)
