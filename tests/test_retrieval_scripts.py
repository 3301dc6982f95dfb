"""examples/build_index.py and benchmarks/retrieval_hotpotqa.py end to end on tiny data written here
(hashing embedder: no model), called in-process."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from lmgym.retrieval import DocumentStore

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def build_index():
    return load_script(ROOT / "examples" / "build_index.py")


def hotpotqa_row(rid: str, question: str, gold: list[tuple[str, str]], other: list[tuple[str, str]]) -> dict:
    """A record in the hub's layout: two supporting paragraphs and some distractors."""
    paragraphs = gold + other
    return {"id": rid, "question": question, "answer": "x", "type": "bridge", "level": "hard",
            "supporting_facts": {"title": [t for t, _ in gold], "sent_id": [0] * len(gold)},
            "context": {"title": [t for t, _ in paragraphs], "sentences": [[s] for _, s in paragraphs]}}


@pytest.fixture
def hotpotqa_file(tmp_path) -> Path:
    rows = [
        hotpotqa_row("q1", "Which river flows through Vienna and Budapest?",
                     [("Danube", "The Danube river flows through Vienna."), ("Budapest", "Budapest lies on a river.")],
                     [("Chess", "Chess is a board game."), ("Piano", "A piano has hammers.")]),
        hotpotqa_row("q2", "Which board game has a king and a queen?",
                     [("Chess", "Chess is a board game."), ("King (chess)", "The king is a chess piece.")],
                     [("Honey bee", "Bees make honey."), ("Danube", "The Danube river flows through Vienna.")]),
    ]
    path = tmp_path / "hotpot.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_build_index_from_a_jsonl_of_documents(build_index, tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "a", "title": "Bees", "text": "Honey bees make honey."}\n'
                    '{"doc_id": "b", "title": "Rivers", "text": "The Danube flows to the Black Sea."}\n')
    build_index.main(["--jsonl", str(docs), "--out", str(tmp_path / "idx"), "--embedder", "hashing-32",
                      "--no_progress", "--query", "honey", "--fusion", "weighted"])
    out = capsys.readouterr().out
    assert "indexed 2 documents as 2 chunks" in out and "Bees: Honey bees make honey." in out
    store = DocumentStore.load(tmp_path / "idx")
    assert store.config.fusion == "weighted" and store.embedder.name == "hashing-32"
    assert store.search("Black Sea", 1)[0].doc_id == "b"


def test_build_index_from_hotpotqa_pools_paragraphs_and_can_skip_embeddings(build_index, hotpotqa_file, tmp_path):
    build_index.main(["--hotpotqa", str(hotpotqa_file), "--out", str(tmp_path / "idx"), "--no-dense",
                      "--chunk_words", "none", "--no_progress"])
    store = DocumentStore.load(tmp_path / "idx")
    assert store.embedder is None and store.config.chunk_words is None
    assert sorted(d.doc_id for d in store.documents) == ["Budapest", "Chess", "Danube", "Honey bee", "King (chess)",
                                                         "Piano"]


@pytest.mark.parametrize("argv, expected", [
    (["--jsonl", "missing.jsonl"], "error: data file not found"),
    (["--hotpotqa", "missing.json"], "error: HotpotQA file not found"),
    (["--jsonl", "docs.jsonl", "--rrf_k", "-3"], "error: StoreConfig.rrf_k must be"),
])
def test_build_index_bad_inputs_exit_with_one_line(build_index, tmp_path, monkeypatch, argv, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs.jsonl").write_text('{"text": "a"}\n')
    with pytest.raises(SystemExit) as exit_info:
        build_index.main([*argv, "--out", str(tmp_path / "idx"), "--embedder", "hashing-8", "--no_progress"])
    assert str(exit_info.value).startswith(expected) and "\n" not in str(exit_info.value)


def test_the_benchmark_writes_its_table_and_json(hotpotqa_file, tmp_path):
    bench = load_script(ROOT / "benchmarks" / "retrieval_hotpotqa.py")
    report = bench.main(["--data", str(hotpotqa_file), "--embedder", "hashing-64", "--out_dir", str(tmp_path),
                         "--name", "tiny", "--no_progress"])
    assert report["questions"] == 2 and report["documents"] == 6
    assert [r["method"] for r in report["results"]] == ["BM25", "dense", "hybrid, weighted", "hybrid, RRF"]
    bm25 = report["results"][0]
    assert bm25["recall@2"] == 1.0 and bm25["recall@5"] == 1.0 and bm25["mrr@10"] == 1.0
    assert all(0 <= r[m] <= 1 for r in report["results"] for m in ("recall@2", "recall@5", "mrr@10"))
    assert json.loads((tmp_path / "tiny.json").read_text())["results"] == report["results"]
    table = (tmp_path / "tiny.md").read_text()
    assert table.startswith("| method | recall@2 | recall@5 | MRR@10 |") and "| BM25 | 1.000 | 1.000 | 1.000 |" in table
