"""`DocumentStore`: BM25 and dense retrieval over one corpus, fused by reciprocal rank or by weights,
saved to a folder and loaded back without embedding anything again.

Dense scores are exact cosine similarities (a matrix product with the stored unit vectors). faiss's
`IndexFlatIP` computes the same product but returns only the top k, and weighted fusion needs every
document's score; at the corpus sizes this toolkit trains on (about 10^4 paragraphs) the product takes
about a millisecond.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lmgym.core.extras import MissingExtraError
from lmgym.retrieval.bm25 import BM25Index
from lmgym.retrieval.chunking import chunk_documents
from lmgym.retrieval.config import FUSIONS, METHODS, StoreConfig
from lmgym.retrieval.documents import Document, documents_from_jsonl, documents_to_jsonl
from lmgym.retrieval.embedders import Embedder, SentenceTransformerEmbedder, embedder_from_name
from lmgym.retrieval.fusion import reciprocal_rank_fusion, top_k, weighted_fusion
from lmgym.retrieval.index_files import IndexLoadError, read_manifest, write_index_folder

DOCUMENTS, EMBEDDINGS, BM25_FOLDER = "documents.jsonl", "embeddings.npy", "bm25"


@dataclass(frozen=True)
class Hit:
    """One retrieved document and its score under the method that ranked it (higher is better)."""

    doc_id: str
    title: str
    text: str
    score: float


class DocumentStore:
    """Searchable documents. Make one with `DocumentStore.build(documents)` or `DocumentStore.load(folder)`."""

    def __init__(self, documents: list[Document], bm25: BM25Index, embeddings: np.ndarray | None,
                 config: StoreConfig, embedder: Embedder | None) -> None:
        self.documents = documents
        self.config = config
        self.embedder = embedder
        self._bm25 = bm25
        self._embeddings = embeddings

    @classmethod
    def build(cls, documents: Iterable[Document], config: StoreConfig | None = None, *,
              embedder: Embedder | None = None, progress: bool = True) -> DocumentStore:
        """Chunk `documents`, index them with BM25 and (when `config.dense`) embed them with `embedder`
        (default: the embedded MiniLM); `progress` shows tqdm bars for tokenizing, indexing and embedding."""
        config = config or StoreConfig()
        chunks = chunk_documents(documents, config.chunk_words, config.chunk_overlap)
        if not chunks:
            raise ValueError("no documents to index")
        texts = [f"{d.title}\n{d.text}" if config.index_title and d.title else d.text for d in chunks]
        bm25 = BM25Index.build(texts, config.stopwords, config.bm25_k1, config.bm25_b, config.bm25_method, progress)
        embeddings = None
        if config.dense:
            embedder = embedder or SentenceTransformerEmbedder()
            if not isinstance(embedder, Embedder):
                raise TypeError(f"embedder must have a `name` and an `embed(texts, progress)` method (the Embedder "
                                f"protocol), got {type(embedder).__name__}")
            embeddings = _check_vectors(embedder.embed(texts, progress=progress), len(texts), embedder.name)
        return cls(chunks, bm25, embeddings, config, embedder if config.dense else None)

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, query: str, k: int = 5, method: str | None = None, fusion: str | None = None) -> list[Hit]:
        """The `k` best documents for `query`, best first. `method`: bm25 | dense | hybrid; `fusion` (hybrid
        only): rrf | weighted; None takes the config's defaults."""
        return self.search_batch([query], k, method, fusion)[0]

    def search_batch(self, queries: Sequence[str], k: int = 5, method: str | None = None,
                     fusion: str | None = None) -> list[list[Hit]]:
        """`search` of each query, in order, with the work batched: BM25 tokenizes and scores every query in
        one pass (the scores `search` gives each, bit for bit) and the embedder encodes them in one call.

        With a `batch_invariant` embedder (one whose vector for a text does not depend on the other texts of
        the call: the hashing embedder), each query's cosines are its own vector-matrix product, as `search`
        computes them, so every query gets exactly `search`'s hits, scores and ties. Otherwise (MiniLM pads a
        batch, so its vectors move in the last bits anyway) the cosines are one matrix product: the same
        scores within float tolerance, at a fraction of the memory traffic."""
        method, fusion = self._check_search(queries, k, method, fusion)
        if not queries:
            return []
        bm25 = self._bm25.scores(queries) if method != "dense" else None
        dense = None
        if method != "bm25":
            vectors = _check_vectors(self.embedder.embed(queries), len(queries), self.embedder.name)
            if getattr(self.embedder, "batch_invariant", False):
                dense = np.concatenate([vectors[row : row + 1] @ self._embeddings.T for row in range(len(queries))])
            else:
                dense = vectors @ self._embeddings.T
        results = []
        for row in range(len(queries)):
            if method == "bm25":
                scores = bm25[row]
            elif method == "dense":
                scores = dense[row]
            elif fusion == "weighted":
                scores = weighted_fusion([bm25[row], dense[row]], self.config.weights)
            else:
                scores = self._rrf(bm25[row], dense[row])
            results.append([self._hit(i, scores[i]) for i in top_k(scores, k)])
        return results

    def _rrf(self, bm25: np.ndarray, dense: np.ndarray) -> np.ndarray:
        """RRF of each method's top `rrf_depth` (BM25: only documents sharing a word with the query)."""
        depth = self.config.rrf_depth
        lexical = top_k(bm25, depth)
        rankings = [lexical[bm25[lexical] > 0], top_k(dense, depth)]
        return reciprocal_rank_fusion(rankings, len(self), self.config.rrf_k)

    def _check_search(self, queries: Sequence[str], k: int, method: str | None, fusion: str | None
                      ) -> tuple[str, str]:
        if isinstance(queries, str) or not all(isinstance(q, str) for q in queries):
            raise TypeError("search queries must be strings (search_batch takes a list of them)")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"search k must be a positive integer, got {k!r}")
        method, fusion = method or self.config.default_method, fusion or self.config.fusion
        if method not in METHODS:
            raise ValueError(f"unknown search method {method!r}; choose one of {', '.join(METHODS)}")
        if fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {fusion!r}; choose one of {', '.join(FUSIONS)}")
        if method not in self.methods:
            raise ValueError(f"search method {method!r} needs dense embeddings, and this store has none (built with "
                             f"dense=False): it can search with {', '.join(self.methods)} only; use method='bm25' "
                             "or rebuild the index with dense embeddings")
        return method, fusion

    @property
    def methods(self) -> tuple[str, ...]:
        """The search methods this store can run: bm25, and dense and hybrid when it holds embeddings."""
        return METHODS if self._embeddings is not None else ("bm25",)

    def check_search(self, k: int = 5, method: str | None = None, fusion: str | None = None) -> None:
        """A one-line ValueError unless `search(query, k, method, fusion)` can run on this store (a known method
        it has the index for, a known fusion, a positive k); searches nothing: callers check their settings
        once, up front."""
        self._check_search([], k, method, fusion)

    def _hit(self, index: int, score: float) -> Hit:
        doc = self.documents[index]
        return Hit(doc.doc_id, doc.title, doc.text, float(score))

    def save(self, folder: str | Path) -> Path:
        """Write the index to `folder` (replacing an index there; written whole or not at all)."""
        def write(tmp: Path) -> None:
            documents_to_jsonl(self.documents, tmp / DOCUMENTS)
            self._bm25.save(tmp / BM25_FOLDER)
            if self._embeddings is not None:
                np.save(tmp / EMBEDDINGS, self._embeddings, allow_pickle=False)

        manifest = {"config": asdict(self.config), "num_documents": len(self),
                    "embedder": self.embedder.name if self.embedder else None,
                    "dim": int(self._embeddings.shape[1]) if self._embeddings is not None else None}
        return write_index_folder(folder, write, manifest)

    @classmethod
    def load(cls, folder: str | Path, embedder: Embedder | None = None, device: str = "cpu") -> DocumentStore:
        """The index saved in `folder`, its files checked against the manifest's sha256 sums. Queries are
        embedded by `embedder` (it must be the one the index was built with) or, when None, by the one the
        manifest names (loaded on the first dense search, on `device`)."""
        folder = Path(folder).expanduser()
        manifest = read_manifest(folder)
        try:
            config = StoreConfig(**manifest["config"])
            count, name, dim = int(manifest["num_documents"]), manifest["embedder"], manifest["dim"]
        except (KeyError, TypeError, ValueError) as err:
            raise IndexLoadError(
                f"{folder}/manifest.json: unreadable settings ({' '.join(str(err).split())})") from None
        try:
            documents = documents_from_jsonl(folder / DOCUMENTS)
            bm25 = BM25Index.load(folder / BM25_FOLDER, config.stopwords)
            embeddings = np.load(folder / EMBEDDINGS, allow_pickle=False) if config.dense else None
        except MissingExtraError:
            raise  # bm25s is not installed: the index may be fine
        except Exception as err:  # noqa: BLE001 - any failure to parse a checked file means the same: unreadable
            raise IndexLoadError(f"{folder}: cannot read the index ({type(err).__name__}: "
                                 f"{' '.join(str(err).split())[:200]}); rebuild the index") from None
        if len(documents) != count or len(bm25) != count:
            raise IndexLoadError(f"{folder}: the manifest says {count} documents, the files hold {len(documents)} "
                                 f"documents and {len(bm25)} BM25 rows; rebuild the index")
        if config.dense:
            if embeddings.shape != (count, dim) or embeddings.dtype != np.float32:
                raise IndexLoadError(f"{folder / EMBEDDINGS}: expected float32 [{count}, {dim}], got "
                                     f"{embeddings.dtype} {list(embeddings.shape)}; rebuild the index")
            if embedder is not None and embedder.name != name:
                raise IndexLoadError(f"{folder}: the index was embedded with {name!r}, not {embedder.name!r}; "
                                     "pass that embedder (or none) or rebuild the index")
            embedder = embedder or embedder_from_name(name, device)
        return cls(documents, bm25, embeddings, config, embedder if config.dense else None)


def _check_vectors(vectors: np.ndarray, rows: int, name: str) -> np.ndarray:
    """The embedder's output as float32 [rows, dim]; a one-line error if it is not that."""
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or vectors.shape[0] != rows or not np.isfinite(vectors).all():
        raise ValueError(f"embedder {name!r} returned {vectors.dtype} {list(vectors.shape)} for {rows} texts; "
                         "expected finite vectors [texts, dim]")
    return vectors.astype(np.float32, copy=False)
