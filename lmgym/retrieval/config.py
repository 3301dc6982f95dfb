"""`StoreConfig`: how a DocumentStore chunks, indexes and searches (saved in the index's manifest)."""
from __future__ import annotations

from dataclasses import dataclass

from lmgym.core.checked_config import CheckedConfig, setting

METHODS = ("bm25", "dense", "hybrid")
FUSIONS = ("rrf", "weighted")


@dataclass(frozen=True)
class StoreConfig(CheckedConfig):
    """Chunking, BM25 and dense indexing, and the default search. Bad values are one-line ConfigErrors
    (ValueErrors)."""

    chunk_words: int | None = setting(200, "split documents longer than this many words into chunks (None: never)")
    chunk_overlap: int = setting(40, "words shared by consecutive chunks, in [0, chunk_words)")
    index_title: bool = setting(True, "BM25 and the embedder see 'title\\ntext' (hits return the text alone)")
    dense: bool = setting(True, "embed the documents (False: a BM25-only store that needs no model)")
    stopwords: str | None = setting("en", "stop words BM25 drops: 'en' (bm25s's English list) or None")
    bm25_k1: float = setting(1.5, "BM25 term-frequency saturation k1, > 0")
    bm25_b: float = setting(0.75, "BM25 length normalisation b, in [0, 1]")
    bm25_method: str = setting("lucene", "bm25s scoring variant: lucene | robertson | atire | bm25l | bm25+")
    method: str | None = setting(None, "default search method: bm25 | dense | hybrid (None: hybrid when dense, "
                                       "else bm25)")
    fusion: str = setting("rrf", "default hybrid fusion: rrf (reciprocal rank) | weighted (min-max scores)")
    weights: tuple[float, float] = setting((0.5, 0.5), "weighted fusion: (bm25, dense) weights, each >= 0")
    rrf_k: int = setting(60, "RRF constant k in 1 / (k + rank), >= 0")
    rrf_depth: int = setting(100, "RRF fuses each method's top rrf_depth documents, >= 1")

    def __post_init__(self) -> None:
        super().__post_init__()
        require = self.require
        require("chunk_words", self.chunk_words is None or self.chunk_words >= 1, "a positive integer or None")
        below_chunk = self.chunk_words is None or self.chunk_overlap < self.chunk_words
        require("chunk_overlap", self.chunk_overlap >= 0 and below_chunk, "an integer in [0, chunk_words)")
        require("stopwords", self.stopwords in ("en", None), "'en' or None")
        require("bm25_k1", self.bm25_k1 > 0, "> 0")
        require("bm25_b", 0 <= self.bm25_b <= 1, "in [0, 1]")
        require("bm25_method", self.bm25_method in ("lucene", "robertson", "atire", "bm25l", "bm25+"),
                "lucene | robertson | atire | bm25l | bm25+")
        require("method", self.method is None or self.method in METHODS, "bm25 | dense | hybrid | None")
        require("method", self.dense or self.method in (None, "bm25"), "bm25 or None when dense is False")
        require("fusion", self.fusion in FUSIONS, "rrf | weighted")
        require("weights", all(w >= 0 for w in self.weights) and sum(self.weights) > 0, "two numbers >= 0, not both 0")
        require("rrf_k", self.rrf_k >= 0, "an integer >= 0")
        require("rrf_depth", self.rrf_depth >= 1, "a positive integer")

    @property
    def default_method(self) -> str:
        """The search method used when `search` is not told one."""
        return self.method or ("hybrid" if self.dense else "bm25")
