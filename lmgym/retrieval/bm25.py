"""BM25 over a fixed corpus with `bm25s` (sparse precomputed scores; its own save/load format).

bm25s's tokenizer lower-cases, keeps words of two or more characters and drops English stop words;
no stemmer (PyStemmer would be one more compiled dependency). Scores come back for every document, as
fusion needs them all; bm25s's `retrieve` only gives the top k. bm25s comes with the [rag] extra and is
imported on first use, so `retrieval` imports without it.

bm25s is imported with JAX hidden (`HIDDEN_FROM_BM25S`): when `import jax.lax` works, bm25s/selection.py runs
`jax.lax.top_k` at import time to warm JAX up, whatever backend is chosen later, and JAX's GPU backend then
takes 75% of the GPU's memory. Hidden, bm25s finds no JAX and selects with numpy (`retrieve`'s "auto"
backend; the scores this module reads never go through it). A JAX the user's own code imported is left
as it was, in sys.modules too; bm25s just does not see it. A bm25s imported before the toolkit's first use
of it is the user's, taken as it is.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lmgym.core.extras import import_extra

if TYPE_CHECKING:
    import bm25s

FEATURE = "BM25 retrieval"
HIDDEN_FROM_BM25S = ("jax", "jaxlib")  # bm25s warms JAX up on import when it can import it (see above)


def _bm25s() -> Any:
    """The bm25s module; a one-line MissingExtraError naming the [rag] extra when it is not installed."""
    return import_extra("bm25s", FEATURE, hide=HIDDEN_FROM_BM25S)


def tokenize(texts: Sequence[str], stopwords: str | None, progress: bool = False) -> list[list[str]]:
    """bm25s's tokenization of each text (lower case, words of 2+ characters, stop words removed)."""
    return _bm25s().tokenize(list(texts), stopwords=stopwords or [], return_ids=False, show_progress=progress)


class BM25Index:
    """A bm25s index over texts numbered 0..n-1, tokenized with `stopwords` ("en" or None)."""

    def __init__(self, retriever: bm25s.BM25, stopwords: str | None) -> None:
        self.retriever = retriever
        self.stopwords = stopwords

    @classmethod
    def build(cls, texts: Sequence[str], stopwords: str | None = "en", k1: float = 1.5, b: float = 0.75,
              method: str = "lucene", progress: bool = False) -> BM25Index:
        """Tokenize and index `texts` (bm25s's progress bars when `progress`)."""
        retriever = _bm25s().BM25(k1=k1, b=b, method=method)
        retriever.index(tokenize(texts, stopwords, progress), show_progress=progress)
        return cls(retriever, stopwords)

    def __len__(self) -> int:
        return int(self.retriever.scores["num_docs"])

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """BM25 score of every document for each query: float32 [len(queries), n]; a query without a known
        word scores 0 everywhere. All queries are tokenized in one bm25s call and scored in one scatter-add."""
        out = np.zeros((len(queries), len(self)), dtype=np.float32)
        token_ids = [self.retriever.get_tokens_ids(tokens) for tokens in tokenize(queries, self.stopwords)]
        rows = [row for row, ids in enumerate(token_ids) if ids]
        if rows:
            out[rows] = self.scores_of_ids([token_ids[row] for row in rows])
        return out

    def scores_of_ids(self, queries_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """bm25s's `get_scores_from_ids` of each query's token ids (each non-empty), bit for bit, in one pass:
        [len(queries_ids), n] in the retriever's dtype. Each document's score adds its precomputed per-token
        scores in the query's token order, as bm25s does, then the query's non-occurrence sum (bm25l, bm25+)."""
        retriever, n = self.retriever, len(self)
        data, indices, indptr = (retriever.scores[key] for key in ("data", "indices", "indptr"))
        cells, values = [], []  # (flat cell, score) of every posting of every query token, in token order
        for row, ids in enumerate(queries_ids):
            ids = np.asarray(ids, dtype=np.int64)
            for start, end in zip(indptr[ids].tolist(), indptr[ids + 1].tolist()):
                cells.append(indices[start:end].astype(np.int64) + row * n)
                values.append(data[start:end])
        scores = np.zeros(len(queries_ids) * n, dtype=np.dtype(retriever.dtype))
        if cells:
            np.add.at(scores, np.concatenate(cells), np.concatenate(values))
        scores = scores.reshape(len(queries_ids), n)
        nonoccurrence = getattr(retriever, "nonoccurrence_array", None)
        if nonoccurrence is not None:
            for row, ids in enumerate(queries_ids):
                scores[row] += nonoccurrence[np.asarray(ids, dtype=np.int64)].sum()
        return scores

    def save(self, folder: str | Path) -> None:
        """bm25s's own files (score matrix, vocabulary, parameters) in `folder`."""
        self.retriever.save(str(folder), show_progress=False)

    @classmethod
    def load(cls, folder: str | Path, stopwords: str | None) -> BM25Index:
        """An index saved by `save`; bm25s's errors pass through (the store turns them into one line)."""
        return cls(_bm25s().BM25.load(str(folder), show_progress=False), stopwords)
