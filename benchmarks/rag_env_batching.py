"""Host seconds of one RAG advance: 128 branches each search once, stepped with the env's batched retrieval
(`prepare_steps`: every branch's query in one `DocumentStore.search_batch` call) and without it (one search
per branch), on a store built from every HotpotQA paragraph of the data folder; and the seconds spent
tokenising the passages' tool turns, in one `encode_turns` call and one call per branch.

    python benchmarks/rag_env_batching.py                                   # BM25, ../shared/data/hotpotqa
    python benchmarks/rag_env_batching.py --embedder hashing-256            # hybrid (RRF) with the hashing embedder
    python benchmarks/rag_env_batching.py --embedder embedded:all-MiniLM-L6-v2 --device cuda
    python benchmarks/rag_env_batching.py --tokenizer FOLDER                # a real tokenizer (default: the tiny one)

A scripted policy (no model) writes each branch's action: `<search>QUERY</search>`, the query being the
question with one word left out (the word's index is the branch's member number), so the branches of one
question search different strings. Each run starts fresh branches and times one `advance`:
`EpisodeEngine.env_seconds` (state restores and saves, the env's steps, the batched searches) and
`tokenize_seconds`, best of `--repeats`. Prints one JSON line, with whether both ways gave the same episodes.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformers import AutoTokenizer  # noqa: E402

from lmgym.envs.hotpotqa.data import load_hotpotqa  # noqa: E402
from lmgym.envs.hotpotqa.rag import RAGHotpotQAEnv  # noqa: E402
from lmgym.episodes import EpisodeEngine, SamplingSettings  # noqa: E402
from lmgym.policies import Generation, Policy, build_tiny_tokenizer  # noqa: E402
from lmgym.retrieval import DocumentStore, StoreConfig, documents_from_hotpotqa, embedder_from_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class SearchingPolicy(Policy):
    """Writes `<search>QUERY</search>` for every row: the row's question less the word at its member index.
    The passages come back as "tool" chat turns of `tokenizer`'s template."""

    use_chat_template = True

    def __init__(self, queries: list[str], tokenizer):
        self.tokenizer = tokenizer
        self.queries = queries  # one per row of the next sample call, in order

    def format_prompt(self, observation: str) -> list[int]:
        return self.encode_text(observation)

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        out = []
        for prompt, query in zip(prompts, self.queries):
            text = f"<search>{query}</search>"
            out.append([Generation(list(prompt), self.encode_text(text), [0.0] * len(text), text, "stop")])
        return out

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0):
        raise NotImplementedError("a scripted policy only samples")


def one_word_less(question: str, member: int) -> str:
    """`question` without its word number `member` (modulo the word count)."""
    words = question.split()
    del words[member % len(words)]
    return " ".join(words)


def advance_once(env, records, tokenizer, groups: int, group_size: int, batched: bool) -> tuple[float, float, list]:
    """(env seconds, tokenise seconds, the branches) of one advance of groups x group_size fresh branches;
    unbatched: no `prepare_steps` (every step searches on its own) and one tokenizer call per injected turn."""
    queries = [one_word_less(records[g].question, m) for g in range(groups) for m in range(group_size)]
    policy = SearchingPolicy(queries, tokenizer)
    if not batched:
        env.prepare_steps = lambda actions: None
        policy.encode_turns = lambda turns: [policy.encode_turn(text, role, after) for text, role, after in turns]
    engine = EpisodeEngine(env, policy, SamplingSettings(max_new_tokens=512))
    branches = engine.start([{"options": {"index": g}} for g in range(groups)], group_size)
    engine.env_seconds = 0.0
    engine.advance(branches, sample_key=0)
    if not batched:
        del env.prepare_steps
    return engine.env_seconds, engine.tokenize_seconds, branches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "hotpotqa"))
    parser.add_argument("--embedder", default=None, help="None: a BM25-only store; else hashing-256, or "
                        "embedded:all-MiniLM-L6-v2 (hybrid, RRF)")
    parser.add_argument("--device", default="cpu", help="where the embedder runs")
    parser.add_argument("--tokenizer", default=None, help="a tokenizer folder with a chat template (default: the "
                        "tiny character-level one)")
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    records = load_hotpotqa(args.data)
    documents = documents_from_hotpotqa(records)
    clock = time.perf_counter()
    if args.embedder is None:
        store = DocumentStore.build(documents, StoreConfig(dense=False), progress=False)
    else:
        store = DocumentStore.build(documents, StoreConfig(), progress=False,
                                    embedder=embedder_from_name(args.embedder, args.device))
    build_s = time.perf_counter() - clock
    env = RAGHotpotQAEnv(records=records, store=store)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer) if args.tokenizer else build_tiny_tokenizer()
    store.search_batch(["warm up"], 3)  # an embedder's first call loads it
    runs = {}
    for _ in range(args.repeats):
        for batched in (False, True):
            env_s, tokenize_s, branches = advance_once(env, records, tokenizer, args.groups, args.group_size, batched)
            best = runs.get(batched)
            runs[batched] = (min(env_s, best[0]) if best else env_s, min(tokenize_s, best[1]) if best else tokenize_s,
                             branches)
    same = all(a.ids == b.ids and a.info == b.info and a.step_rewards == b.step_rewards
               for a, b in zip(runs[False][2], runs[True][2]))
    report = {"documents": len(store), "store": args.embedder or "bm25", "build_s": round(build_s, 2),
              "tokenizer": args.tokenizer or "tiny",
              "branches": args.groups * args.group_size,
              "env_s_unbatched": round(runs[False][0], 4), "env_s_batched": round(runs[True][0], 4),
              "tokenize_s_unbatched": round(runs[False][1], 4), "tokenize_s_batched": round(runs[True][1], 4),
              "same_episodes": same}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
