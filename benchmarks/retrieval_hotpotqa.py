"""Retrieval quality and speed on HotpotQA: every context paragraph of the files pooled into one corpus,
every question searched against it, scored by its supporting paragraphs' titles.

    python benchmarks/retrieval_hotpotqa.py                          # ../shared/data/hotpotqa, embedded MiniLM, CPU
    python benchmarks/retrieval_hotpotqa.py --data FILE --embedder hashing-256 --name hotpotqa_hashing

For BM25, dense, hybrid with weighted fusion and hybrid with reciprocal-rank fusion: recall@2 and
recall@5 (fraction of a question's supporting titles in the top 2 / 5, averaged over questions), MRR@10
(reciprocal rank of the first supporting title in the top 10), and queries per second, once with all
questions in one `search_batch` call and once one `search` call at a time (as an agent's tool calls
come). Index build time is measured for BM25 alone and for BM25 + embeddings; load time for the saved
index. Writes benchmarks/results/<name>.json and <name>.md (the table in benchmarks/RESULTS.md).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.common import example_parser  # noqa: E402
from lmgym.envs.hotpotqa.data import load_hotpotqa  # noqa: E402
from lmgym.retrieval import (  # noqa: E402
    EMBEDDED_EMBEDDER,
    DocumentStore,
    StoreConfig,
    documents_from_hotpotqa,
    embedder_from_name,
    mean_reciprocal_rank,
    recall_at_k,
)
from lmgym.training.cli import run_with_clear_errors  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUNS = (("BM25", "bm25", None), ("dense", "dense", None), ("hybrid, weighted", "hybrid", "weighted"),
        ("hybrid, RRF", "hybrid", "rrf"))
DEPTH = 10  # hits retrieved per question: MRR@10


def timed(fn, *args, **kwargs):
    """(fn's result, seconds it took)."""
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def ids(hits: list) -> list[str]:
    """The doc ids of a hit list, in rank order."""
    return [h.doc_id for h in hits]


def evaluate(store: DocumentStore, questions: list[str], relevant: list[tuple[str, ...]], method: str,
             fusion: str | None) -> dict:
    """Recall@2, recall@5, MRR@10 and queries/s (batched and one at a time) of one search setting."""
    hits, batch_s = timed(store.search_batch, questions, DEPTH, method, fusion)
    singles, single_s = timed(lambda: [store.search(q, DEPTH, method, fusion) for q in questions])
    titles = [[h.title for h in row] for row in hits]
    return {
        "recall@2": sum(map(lambda t, r: recall_at_k(t, r, 2), titles, relevant)) / len(titles),
        "recall@5": sum(map(lambda t, r: recall_at_k(t, r, 5), titles, relevant)) / len(titles),
        "mrr@10": mean_reciprocal_rank(titles, relevant),
        "queries_per_s_batch": len(questions) / batch_s,
        "queries_per_s_single": len(questions) / single_s,
        # one-at-a-time and batched scores differ in the last float bits (BLAS), so compare the rankings
        "same_ranking_single_and_batch": sum(ids(a) == ids(b) for a, b in zip(singles, hits)) / len(hits),
    }


def markdown(report: dict) -> str:
    """The results as RESULTS.md's markdown table, with the build and load times under it."""
    lines = ["| method | recall@2 | recall@5 | MRR@10 | queries/s (batch) | queries/s (one at a time) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in report["results"]:
        lines.append(f"| {row['method']} | {row['recall@2']:.3f} | {row['recall@5']:.3f} | {row['mrr@10']:.3f} | "
                     f"{row['queries_per_s_batch']:,.0f} | {row['queries_per_s_single']:,.0f} |")
    build = report["build_s"]
    lines.append("")
    lines.append(f"{report['questions']} questions, {report['documents']} paragraphs ({report['chunks']} chunks) "
                 f"from {report['data']}; embedder {report['embedder']} on {report['device']} "
                 f"({report['cpu_count']} CPU cores, {report['torch_threads']} torch thread(s), "
                 f"load average {report['load_average'][0]:.1f} at the start, "
                 f"{report['load_average'][1]:.1f} at the end). Index build: BM25 {build['bm25']:.1f} s, "
                 f"BM25 + embeddings "
                 f"{build['bm25_and_dense']:.1f} s; loading the saved index: {report['load_s']:.2f} s.")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> dict:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    records = load_hotpotqa(args.data)
    documents = documents_from_hotpotqa(records)
    embedder = embedder_from_name(args.embedder, device=args.device, batch_size=args.batch_size)
    config = StoreConfig()
    _, bm25_s = timed(DocumentStore.build, documents, StoreConfig(dense=False), progress=False)
    store, build_s = timed(DocumentStore.build, documents, config, embedder=embedder, progress=not args.no_progress)
    with tempfile.TemporaryDirectory() as tmp:
        store.save(tmp)
        _, load_s = timed(DocumentStore.load, tmp, embedder=embedder)
    questions = [r.question for r in records]
    relevant = [r.supporting_titles for r in records]
    store.search_batch(questions[:2], DEPTH, "dense")  # warm-up: the embedding model's first call is slower
    results = []
    for label, method, fusion in RUNS:
        row = {"method": label, **evaluate(store, questions, relevant, method, fusion)}
        print(json.dumps(row), flush=True)
        results.append(row)
    report = {
        "data": os.path.relpath(Path(args.data).absolute(), ROOT), "questions": len(records),
        "documents": len(documents), "chunks": len(store), "embedder": embedder.name, "device": args.device,
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        # other processes on the machine slow every timing: the 1-minute load average before and after
        "load_average": [load_before, os.getloadavg()[0]],
        "store_config": asdict(config),
        "build_s": {"bm25": bm25_s, "bm25_and_dense": build_s}, "load_s": load_s, "results": results,
        "command": "python benchmarks/retrieval_hotpotqa.py " + " ".join(sys.argv[1:] if args.argv is None
                                                                        else args.argv),
    }
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / f"{args.name}.md").write_text(markdown(report))
    print(markdown(report))
    print(f"wrote {out / args.name}.json and .md")
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "hotpotqa"),
                        help="HotpotQA file or folder (default ../shared/data/hotpotqa: every file in it, pooled)")
    parser.add_argument("--embedder", default=EMBEDDED_EMBEDDER,
                        help=f"dense embedder: {EMBEDDED_EMBEDDER} (default), hashing-<dim>, "
                             "or a sentence-transformers folder or hub name")
    parser.add_argument("--device", default="cpu", help="embedding device (default cpu)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch CPU threads (default 0: torch's own choice); on a busy machine 1 avoids threads "
                             "waiting on each other, which slows one-query-at-a-time encoding most")
    parser.add_argument("--batch_size", type=int, default=64, help="texts per embedding batch (default 64)")
    parser.add_argument("--out_dir", default=str(ROOT / "benchmarks" / "results"),
                        help="folder for <name>.json and <name>.md (default benchmarks/results)")
    parser.add_argument("--name", default="retrieval_hotpotqa", help="file name stem (default retrieval_hotpotqa)")
    parser.add_argument("--no_progress", action="store_true", help="no progress bars")
    return parser


def main(argv: list[str] | None = None) -> dict:
    parser = build_parser()

    def go() -> dict:
        args = parser.parse_args(argv)
        args.argv = argv
        return run(args)
    return run_with_clear_errors(go)


if __name__ == "__main__":
    main()
