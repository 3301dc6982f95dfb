"""Chunking: split long documents into overlapping word windows so each fits the embedder's input.

Word windows rather than a library splitter: sentence-transformers and bm25s have none, and LangChain's
text splitters would add a large dependency for these few lines. Whitespace inside a chunk is
normalised to single spaces.
"""
from __future__ import annotations

from collections.abc import Iterable

from lmgym.retrieval.documents import Document, check_unique_ids


def chunk_words(text: str, max_words: int, overlap: int = 0) -> list[str]:
    """`text` cut into windows of at most `max_words` words, each starting `max_words - overlap` words
    after the previous; the last window ends at the text's end. An empty text gives one empty chunk."""
    if not isinstance(max_words, int) or max_words < 1:
        raise ValueError(f"chunk size must be a positive number of words, got {max_words!r}")
    if not isinstance(overlap, int) or not 0 <= overlap < max_words:
        raise ValueError(f"chunk overlap must be an integer in [0, {max_words}), got {overlap!r}")
    words = text.split()
    if len(words) <= max_words:
        return [" ".join(words)]
    step = max_words - overlap
    starts = range(0, len(words) - overlap, step)
    return [" ".join(words[start:start + max_words]) for start in starts]


def chunk_documents(documents: Iterable[Document], max_words: int | None, overlap: int = 0) -> list[Document]:
    """Each document as is when it has at most `max_words` words (or `max_words` is None), else its
    chunks as Documents with the same title and ids `<doc_id>#<i>` (i from 0)."""
    documents = check_unique_ids(documents)
    if max_words is None:
        return documents
    chunked = []
    for doc in documents:
        pieces = chunk_words(doc.text, max_words, overlap)
        if len(pieces) == 1:
            chunked.append(doc)
        else:
            chunked.extend(Document(f"{doc.doc_id}#{i}", doc.title, piece) for i, piece in enumerate(pieces))
    return check_unique_ids(chunked, "chunked documents")
