"""Retrieval: documents, chunking, BM25 (bm25s) and dense (sentence-transformers) search, their fusion,
an index saved to disk, and retrieval metrics. See `DocumentStore`. The search backends come with the [rag]
extra; this package imports without it, and a backend used without it says so in one line."""
from lmgym.retrieval.chunking import chunk_documents, chunk_words
from lmgym.retrieval.config import StoreConfig
from lmgym.retrieval.documents import Document, documents_from_hotpotqa, documents_from_jsonl, documents_to_jsonl
from lmgym.retrieval.embedders import (
    EMBEDDED_EMBEDDER,
    Embedder,
    EmbedderNotFoundError,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    embedder_from_name,
    minilm_path,
)
from lmgym.retrieval.fusion import (
    mean_reciprocal_rank,
    minmax_normalise,
    recall_at_k,
    reciprocal_rank,
    reciprocal_rank_fusion,
    top_k,
    weighted_fusion,
)
from lmgym.retrieval.index_files import IndexLoadError, IndexNotFoundError
from lmgym.retrieval.store import DocumentStore, Hit

__all__ = [
    "Document", "documents_from_jsonl", "documents_from_hotpotqa", "documents_to_jsonl", "chunk_words",
    "chunk_documents", "StoreConfig", "DocumentStore", "Hit", "Embedder", "SentenceTransformerEmbedder",
    "HashingEmbedder", "EMBEDDED_EMBEDDER", "EmbedderNotFoundError", "embedder_from_name", "minilm_path",
    "minmax_normalise", "weighted_fusion", "reciprocal_rank_fusion", "top_k", "IndexNotFoundError",
    "IndexLoadError", "recall_at_k", "reciprocal_rank", "mean_reciprocal_rank",
]
