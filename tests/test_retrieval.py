"""retrieval/'s parts against hand values: documents, chunking, fusion, metrics, config checks."""
from __future__ import annotations

import json

import numpy as np
import pytest

from lmgym.envs.data import MalformedRowError
from lmgym.envs.hotpotqa.data import HotpotQARecord, load_hotpotqa
from lmgym.retrieval import (
    Document,
    StoreConfig,
    chunk_documents,
    chunk_words,
    documents_from_hotpotqa,
    documents_from_jsonl,
    documents_to_jsonl,
    mean_reciprocal_rank,
    minmax_normalise,
    recall_at_k,
    reciprocal_rank,
    reciprocal_rank_fusion,
    top_k,
    weighted_fusion,
)


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert text and "\n" not in text
    return text


# ---------------------------------------------------------------- documents

def record(rid: str, paragraphs: list[tuple[str, list[str]]], support: list[str]) -> HotpotQARecord:
    return HotpotQARecord(rid, f"question {rid}", "answer", "bridge", "hard",
                          tuple((t, 0) for t in support), tuple((t, tuple(s)) for t, s in paragraphs))


def test_hotpotqa_paragraphs_pool_into_one_document_per_title():
    a = record("1", [("Paris", ["Paris is the capital.", " It is in France."]), ("Rome", ["Rome is old."])], ["Paris"])
    b = record("2", [("Rome", ["Rome is old."]), ("Oslo", ["Oslo is cold. "])], ["Oslo"])
    docs = documents_from_hotpotqa([a, b])
    assert docs == [Document("Paris", "Paris", "Paris is the capital. It is in France."),
                    Document("Rome", "Rome", "Rome is old."), Document("Oslo", "Oslo", "Oslo is cold.")]


def test_the_shared_hotpotqa_file_pools_every_paragraph(shared_data):
    path = shared_data / "hotpotqa" / "hotpot_dev_distractor_v1_first53.json"
    if not path.is_file():
        pytest.skip(f"{path} is not present")
    records = load_hotpotqa(path)
    docs = documents_from_hotpotqa(records)
    titles = {title for r in records for title, _ in r.context}
    assert {d.doc_id for d in docs} == titles and len(docs) == len(titles)
    assert all(t in titles for r in records for t in r.supporting_titles)


def test_documents_round_trip_through_jsonl(tmp_path):
    docs = [Document("a", "Title A", "text one"), Document("7", "", "text two")]
    documents_to_jsonl(docs, tmp_path / "d.jsonl")
    assert documents_from_jsonl(tmp_path / "d.jsonl") == docs


def test_jsonl_documents_take_defaults_for_id_and_title(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "alpha"}\n\n{"id": 12, "title": "T", "text": "beta"}\n')
    assert documents_from_jsonl(path) == [Document("1", "", "alpha"), Document("12", "T", "beta")]


@pytest.mark.parametrize("content, expected", [
    ('{"title": "x"}\n', "missing field 'text'"),
    ('{"text": 3}\n', "text must be a string"),
    ('{"text": "a", "title": ["x"]}\n', "title must be a string"),
    ('{"text": "a", "doc_id": 1.5}\n', "doc_id must be a string or an integer"),
    ('{"text": "a", "id": "x"}\n{"text": "b", "id": "x"}\n', "'x' appears twice"),
    ("{not json\n", ":1: not valid JSON"),
    ("\n", "no documents"),
])
def test_malformed_document_files_are_one_line_errors(tmp_path, content, expected):
    path = tmp_path / "d.jsonl"
    path.write_text(content)
    with pytest.raises((MalformedRowError, ValueError)) as err:
        documents_from_jsonl(path)
    assert expected in one_line(err)


# ---------------------------------------------------------------- chunking

def test_chunks_are_overlapping_word_windows_ending_at_the_text_end():
    assert chunk_words("a b c d e f g", 3, 1) == ["a b c", "c d e", "e f g"]
    assert chunk_words("a b c d e f g h", 3, 1) == ["a b c", "c d e", "e f g", "g h"]
    assert chunk_words("a b c d e f", 3) == ["a b c", "d e f"]
    assert chunk_words("  a \n b ", 3) == ["a b"]
    assert chunk_words("", 3) == [""]


@pytest.mark.parametrize("size, overlap", [(0, 0), (3, 3), (3, -1), (2.5, 0)])
def test_bad_chunk_sizes_are_refused(size, overlap):
    with pytest.raises(ValueError) as err:
        chunk_words("a b c", size, overlap)
    assert "chunk" in one_line(err)


def test_only_long_documents_are_chunked_and_chunks_keep_the_title():
    short, long = Document("s", "S", "one  two"), Document("l", "L", "w1 w2 w3 w4 w5")
    assert chunk_documents([short, long], None) == [short, long]
    assert chunk_documents([short, long], 3, 1) == [short, Document("l#0", "L", "w1 w2 w3"),
                                                    Document("l#1", "L", "w3 w4 w5")]


def test_chunk_ids_that_collide_with_a_document_id_are_refused():
    with pytest.raises(ValueError) as err:
        chunk_documents([Document("l", "", "a b c d"), Document("l#0", "", "x")], 2)
    assert "'l#0' appears twice" in one_line(err)


# ---------------------------------------------------------------- fusion

def test_top_k_is_best_first_with_ties_to_the_lower_index():
    assert top_k(np.array([1.0, 3.0, 3.0, 0.0]), 3).tolist() == [1, 2, 0]
    assert top_k(np.array([0.5]), 4).tolist() == [0]


def test_minmax_normalisation():
    assert minmax_normalise(np.array([2.0, 4.0, 6.0])).tolist() == [0.0, 0.5, 1.0]
    assert minmax_normalise(np.array([3.0, 3.0])).tolist() == [0.0, 0.0]


def test_weighted_fusion_sums_weighted_normalised_scores():
    bm25, dense = np.array([0.0, 2.0, 4.0]), np.array([0.2, 0.6, 0.4])  # normalised: [0, .5, 1] and [0, 1, .5]
    assert weighted_fusion([bm25, dense], [0.5, 0.5]) == pytest.approx([0.0, 0.75, 0.75])
    assert weighted_fusion([bm25, dense], [0.25, 0.75]) == pytest.approx([0.0, 0.875, 0.625])
    with pytest.raises(ValueError) as err:
        weighted_fusion([bm25, dense], [1.0])
    assert "one weight per score list" in one_line(err)


def test_reciprocal_rank_fusion_against_hand_values():
    fused = reciprocal_rank_fusion([[2, 0], [1, 2]], num_docs=4, k=1)
    assert fused == pytest.approx([1 / 3, 1 / 2, 1 / 2 + 1 / 3, 0.0])
    fused = reciprocal_rank_fusion([[0, 1, 2], [2, 1, 0]], num_docs=3, k=60)
    assert fused == pytest.approx([1 / 61 + 1 / 63, 2 / 62, 1 / 63 + 1 / 61])


# ---------------------------------------------------------------- metrics

def test_recall_and_reciprocal_rank_against_hand_values():
    retrieved, relevant = ["A", "B", "C", "D"], {"C", "A"}
    assert [recall_at_k(retrieved, relevant, k) for k in (1, 2, 3, 10)] == [0.5, 0.5, 1.0, 1.0]
    assert reciprocal_rank(retrieved, relevant) == 1.0
    assert reciprocal_rank(["X", "C", "A"], relevant) == 0.5
    assert reciprocal_rank(["X", "Y"], relevant) == 0.0
    assert mean_reciprocal_rank([retrieved, ["X", "C", "A"], ["X"]], [relevant] * 3) == pytest.approx(0.5)


def test_metric_misuse_is_a_one_line_error():
    for call in (lambda: recall_at_k(["A"], {"A"}, 0), lambda: reciprocal_rank(["A"], set()),
                 lambda: mean_reciprocal_rank([["A"]], [])):
        with pytest.raises(ValueError) as err:
            call()
        one_line(err)


# ---------------------------------------------------------------- config

@pytest.mark.parametrize("values, field", [
    ({"chunk_words": 0}, "chunk_words"), ({"chunk_overlap": 200}, "chunk_overlap"), ({"stopwords": "fr"}, "stopwords"),
    ({"bm25_b": 2.0}, "bm25_b"), ({"method": "sparse"}, "method"), ({"dense": False, "method": "hybrid"}, "method"),
    ({"fusion": "max"}, "fusion"), ({"weights": (0, 0)}, "weights"), ({"rrf_depth": 0}, "rrf_depth"),
])
def test_bad_store_settings_name_the_field(values, field):
    with pytest.raises(ValueError) as err:
        StoreConfig(**values)
    assert f"StoreConfig.{field}" in one_line(err)


def test_store_config_survives_json_and_picks_its_default_method():
    config = StoreConfig(weights=(0.3, 0.7))
    assert StoreConfig(**json.loads(json.dumps(config.__dict__))) == config
    assert config.default_method == "hybrid" and StoreConfig(dense=False).default_method == "bm25"
