"""Tool-use transcripts for SFT from a HotpotQA file: each training question played through RAG-HotpotQA-v0
with scripted actions (search the question; then the bridge entity, or each compared entity, not yet
retrieved; then the gold answer), the tool turns being the store's real passages. One JSONL row per question
(`messages`, which `lmgym.traindata.load_sft_examples` and examples/sft.py read, plus the queries and titles).

    python examples/rag_transcripts.py --data_path ../shared/data/hotpotqa/dev_distractor_sample_seed1_n500.jsonl \\
        --out runs/rag_sft/transcripts.jsonl
    python examples/rag_transcripts.py --data_path FILE --index indexes/hotpotqa --search_method hybrid --out OUT

Held out: the last --hold_out questions of the file (`lmgym.envs.hotpotqa.data.held_out_ranges`, the rule
examples/rag_grpo.py uses) get no transcript; their ids are written one a line to --held_out_ids (default
OUT with the suffix .held_out_ids.txt), for evaluation on them. Their paragraphs stay in the corpus.
System turn: --system_prompt_path (default lmgym/prompts/rag_sys.txt, the prompt examples/rag_grpo.py
gives the policy; `none`: no system turn, the SFT policy's own system prompt then comes first).
Store: --index (a folder examples/build_index.py wrote), else a BM25-only store of every paragraph of
the file, held-out questions' included, built in memory. --k, --max_searches and the search method
should be those of the GRPO env, as the prompt names them and the passages depend on them.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from common import example_parser  # noqa: E402

from lmgym.envs.hotpotqa.data import held_out_ranges, load_hotpotqa  # noqa: E402
from lmgym.envs.hotpotqa.rag import RAGHotpotQAEnv  # noqa: E402
from lmgym.policies.few_shot import PROMPTS_DIR, read_system_prompt  # noqa: E402
from lmgym.traindata.tool_transcripts import tool_transcripts  # noqa: E402
from lmgym.training.cli import run_with_clear_errors  # noqa: E402

DEFAULT_HOLD_OUT = 150


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--data_path", required=True, help="HotpotQA file (either layout) or a folder of them")
    parser.add_argument("--out", required=True, help="JSONL file of transcripts to write")
    parser.add_argument("--hold_out", "--hold-out", type=int, default=DEFAULT_HOLD_OUT,
                        help=f"last questions of the file left out of the transcripts (default {DEFAULT_HOLD_OUT})")
    parser.add_argument("--held_out_ids", default=None,
                        help="file of the held-out question ids, one a line (default OUT.held_out_ids.txt)")
    parser.add_argument("--system_prompt_path", default=str(PROMPTS_DIR / "rag_sys.txt"),
                        help="system turn of every transcript, as GRPO prompts with it ('none': no system turn; "
                             "default lmgym/prompts/rag_sys.txt)")
    parser.add_argument("--index", default=None,
                        help="saved index folder (examples/build_index.py); default: a BM25-only store of the "
                             "file's paragraphs, built in memory")
    parser.add_argument("--search_method", choices=("hybrid", "bm25", "dense"), default=None,
                        help="how the queries are searched (default: the index's own default)")
    parser.add_argument("--k", type=int, default=3, help="passages per search (default 3)")
    parser.add_argument("--max_searches", type=int, default=3,
                        help="searches per episode (default 3: a comparison question's two entities fit)")
    return parser


def open_store(index: str | None, records: list) -> Any:
    """The saved index in `index`, or a BM25-only DocumentStore of every paragraph of `records`."""
    from lmgym.retrieval import DocumentStore, StoreConfig, documents_from_hotpotqa

    if index is not None:
        return DocumentStore.load(index)
    return DocumentStore.build(documents_from_hotpotqa(records), StoreConfig(dense=False), progress=False)


def run(args: argparse.Namespace) -> dict[str, Any]:
    system_prompt = None if args.system_prompt_path.lower() == "none" else read_system_prompt(args.system_prompt_path)
    records = load_hotpotqa(args.data_path)
    (start, stop), (held_start, held_stop) = held_out_ranges(len(records), args.hold_out)
    store = open_store(args.index, records)
    search_kwargs = {"method": args.search_method} if args.search_method else None
    env = RAGHotpotQAEnv(records=records[start:stop], store=store, k=args.k, max_searches=args.max_searches,
                         search_kwargs=search_kwargs)
    out = Path(args.out).expanduser()
    ids_path = Path(args.held_out_ids).expanduser() if args.held_out_ids else out.with_suffix(".held_out_ids.txt")
    out.parent.mkdir(parents=True, exist_ok=True)
    ids_path.parent.mkdir(parents=True, exist_ok=True)
    written = searches = found = 0
    with out.open("w", encoding="utf-8") as handle:
        for transcript in tool_transcripts(env, system_prompt=system_prompt):
            handle.write(json.dumps(transcript.to_row(), ensure_ascii=False) + "\n")
            written, searches, found = written + 1, searches + len(transcript.queries), found + transcript.found_all
    held_ids = [record.id for record in records[held_start:held_stop]]
    ids_path.write_text("".join(f"{rid}\n" for rid in held_ids), encoding="utf-8")
    print(f"wrote {written} transcripts to {out} ({searches / written:.2f} searches each; every supporting "
          f"paragraph retrieved in {found / written:.1%}); held out the last {len(held_ids)} questions, ids in "
          f"{ids_path}")
    return {"written": written, "searches": searches, "found_all": found, "held_out": len(held_ids)}


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    run_with_clear_errors(lambda: run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
