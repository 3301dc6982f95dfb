"""Streaming and continuous batching of the OpenAI-compatible server: 8 concurrent chats against the same 8 sent
one after another (issue 40, point 6).

Starts the server (examples/serve.py's app with its default limits and batching: the embedded
SmolLM2-135M-Instruct by default, timeout 60 s) with uvicorn on a free port in this process, then streams the
same chat requests ("What is a + b?", greedy, max_tokens 24) with the `openai` client: one after another, then
from `--clients` threads at once. For each request it records the time to the first chunk with text, the
whole time, the completion tokens (usage) and the status. Reports the wall times and their ratio, the first-token
times, the 504s, the engine's steps and largest batch, and the machine's load average before and after (the
figures are only comparable on an idle machine).

    python benchmarks/serve_stream.py --out statics/results/serve_stream_cpu/results.json

Targets: concurrent >= 3x faster than sequential for the same tokens; first token <= 1 s (idle machine, a request
alone); no 504 at the default timeout.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import socket
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import uvicorn  # noqa: E402
from openai import APIStatusError, OpenAI  # noqa: E402

from lmgym.policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402
from lmgym.serving import ServerLimits, create_app  # noqa: E402


def questions(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"What is {rng.randint(10, 99)} + {rng.randint(10, 99)}?" for _ in range(count)]


def ask(client: OpenAI, model: str, question: str, max_tokens: int) -> dict:
    """One streamed chat: seconds to the first chunk with text and to the end, tokens, text and status."""
    start = time.perf_counter()
    first, text, tokens = None, "", 0
    try:
        stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": question}],
                                                max_tokens=max_tokens, temperature=0, stream=True,
                                                stream_options={"include_usage": True})
        for chunk in stream:
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
            for choice in chunk.choices:
                if choice.delta.content:
                    first = time.perf_counter() - start if first is None else first
                    text += choice.delta.content
        status = 200
    except APIStatusError as error:
        status = error.status_code
    return {"first_token_s": first, "seconds": time.perf_counter() - start, "tokens": tokens, "text": text,
            "status": status}


def phase(client: OpenAI, model: str, asked: list[str], clients: int, max_tokens: int, engine) -> dict:
    steps = engine.steps if engine is not None else 0
    if engine is not None:
        engine.peak_rows = 0  # this phase's largest batch
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(lambda q: ask(client, model, q, max_tokens), asked))
    seconds = time.perf_counter() - start
    firsts = [r["first_token_s"] for r in results if r["first_token_s"] is not None]
    statuses = sorted({r["status"] for r in results})
    return {"clients": clients, "requests": len(asked), "seconds": round(seconds, 3),
            "completion_tokens": sum(r["tokens"] for r in results),
            "first_token_s": {"median": round(statistics.median(firsts), 3) if firsts else None,
                              "max": round(max(firsts), 3) if firsts else None},
            "request_s_max": round(max(r["seconds"] for r in results), 3),
            "statuses": {str(s): sum(r["status"] == s for r in results) for s in statuses},
            "engine_steps": (engine.steps - steps) if engine is not None else None,
            "engine_peak_rows": engine.peak_rows if engine is not None else None,
            "texts": [r["text"] for r in results]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--max_tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=1,
                        help="sequential/concurrent pairs, run one after the other (a loaded machine's load drifts: "
                             "the pairs' median speed-up is reported)")
    parser.add_argument("--out", default=None, help="write the results JSON here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()

    policy = HFPolicy(args.model)
    limits = ServerLimits()  # the defaults: timeout_seconds 60, as a user starts it
    app = create_app(policy, limits=limits)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    client = OpenAI(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}/v1", api_key="unused", max_retries=0,
                    timeout=600)
    model = client.models.list().data[0].id
    engine = app.state.engine
    asked = questions(args.clients, seed=0)
    ask(client, model, "What is 1 + 1?", 4)  # warm-up: first-call costs out of the timing
    pairs = []
    for _ in range(args.repeats):
        sequential = phase(client, model, asked, 1, args.max_tokens, engine)
        concurrent = phase(client, model, asked, args.clients, args.max_tokens, engine)
        pairs.append((sequential, concurrent))
    speedups = [round(s["seconds"] / c["seconds"], 2) for s, c in pairs]
    sequential, concurrent = pairs[speedups.index(sorted(speedups)[(len(speedups) - 1) // 2])]
    same = sum(a == b for a, b in zip(sequential["texts"], concurrent["texts"]))
    result = {
        "model": model, "device": "cpu", "torch_threads": args.threads,
        "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "max_tokens": args.max_tokens, "temperature": 0, "timeout_seconds": limits.timeout_seconds,
        "speedup_wall_each_pair": speedups,
        "median_pair": {"sequential": {k: v for k, v in sequential.items() if k != "texts"},
                        "concurrent": {k: v for k, v in concurrent.items() if k != "texts"}},
        "speedup_wall": round(sequential["seconds"] / concurrent["seconds"], 2),
        "speedup_tokens_per_s": round((concurrent["completion_tokens"] / concurrent["seconds"])
                                      / (sequential["completion_tokens"] / sequential["seconds"]), 2),
        "first_token_s_alone_max": max(s["first_token_s"]["max"] for s, _ in pairs),
        "statuses_all": {k: sum(p[i]["statuses"].get(k, 0) for p in pairs for i in (0, 1))
                         for k in sorted({k for p in pairs for i in (0, 1) for k in p[i]["statuses"]})},
        "same_texts": f"{same}/{len(asked)}", "example_texts": sequential["texts"][:2],
        "command": "python " + " ".join(sys.argv),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    server.should_exit = True
    thread.join(timeout=30)


if __name__ == "__main__":
    main()
