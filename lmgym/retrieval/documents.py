"""Documents: what a store indexes, read from a JSONL file or pooled from HotpotQA's context paragraphs."""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from lmgym.core.jsonl import MalformedRowError, read_jsonl


class ContextRecord(Protocol):
    """A record with HotpotQA-style context paragraphs (lmgym.envs.hotpotqa.data.HotpotQARecord is one):
    (title, sentences) pairs."""

    context: Sequence[tuple[str, Sequence[str]]]


@dataclass(frozen=True)
class Document:
    """One retrievable passage: a unique id, the title it belongs to ("" when none) and its text."""

    doc_id: str
    title: str
    text: str


def check_unique_ids(documents: Iterable[Document], where: str = "documents") -> list[Document]:
    """`documents` as a list; a one-line ValueError naming the first repeated doc_id."""
    documents, seen = list(documents), set()
    for doc in documents:
        if not isinstance(doc, Document):
            raise TypeError(f"{where}: expected Document objects, got {type(doc).__name__}")
        if doc.doc_id in seen:
            raise ValueError(f"{where}: doc_id {doc.doc_id!r} appears twice; ids must be unique")
        seen.add(doc.doc_id)
    return documents


def documents_from_jsonl(path: str | Path) -> list[Document]:
    """One Document per line of a JSONL file: `text` (required), `title` (optional) and `doc_id` or `id`
    (optional; the 1-based row number when absent). Malformed rows are one-line errors naming the line."""
    path = Path(path).expanduser()
    documents = []
    for number, row in enumerate(read_jsonl(path, required_fields=("text",), what="documents in the file"), start=1):
        doc_id = row.get("doc_id", row.get("id", str(number)))
        fields = {"text": row["text"], "title": row.get("title", "")}
        for name, value in fields.items():
            if not isinstance(value, str):
                raise MalformedRowError(f"{path} row {number}: {name} must be a string, got {type(value).__name__}")
        if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
            raise MalformedRowError(f"{path} row {number}: doc_id must be a string or an integer")
        documents.append(Document(str(doc_id), row.get("title", ""), row["text"]))
    if not documents:
        raise MalformedRowError(f"{path}: no documents in the file")
    return check_unique_ids(documents, str(path))


def documents_to_jsonl(documents: Iterable[Document], path: str | Path) -> None:
    """Write documents as JSONL (`doc_id`, `title`, `text`), readable by `documents_from_jsonl`."""
    with Path(path).open("w", encoding="utf-8") as handle:
        for doc in documents:
            handle.write(json.dumps(asdict(doc), ensure_ascii=False) + "\n")


def documents_from_hotpotqa(records: Iterable[ContextRecord]) -> list[Document]:
    """Every context paragraph of `records` pooled into one corpus: one Document per distinct title
    (doc_id = title, text = its sentences joined), in order of first appearance. HotpotQA's paragraphs
    are Wikipedia intros keyed by title, so a title seen again in another record is the same paragraph."""
    documents: dict[str, Document] = {}
    for record in records:
        for title, sentences in record.context:
            if title not in documents:
                documents[title] = Document(title, title, "".join(sentences).strip())
    return list(documents.values())
