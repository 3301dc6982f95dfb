"""Throughput of the OpenAI-compatible server: 16 concurrent clients against one, the same prompts.

Starts the server (examples/serve.py's app: the embedded SmolLM2-135M-Instruct by default) with uvicorn on a
free port in this process, then sends the same chat requests ("What is a + b?", greedy, max_tokens 32) with the
`openai` client: first from one client, one request after another, then from `--clients` threads at once.
Reports completion tokens/s, requests/s, the engine (generation) calls each phase took, and how many answers
the two phases share (greedy; a batch pads prompts, which may move a near-tie).

    python benchmarks/server_throughput.py --out statics/results/server_throughput_cpu/results.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import uvicorn  # noqa: E402
from openai import OpenAI  # noqa: E402

from lmgym.policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402
from lmgym.serving import BatchSettings, ServerLimits, create_app  # noqa: E402


def prompts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"What is {rng.randint(10, 99)} + {rng.randint(10, 99)}?" for _ in range(count)]


def phase(client: OpenAI, model: str, questions: list[str], clients: int, max_tokens: int, batcher) -> dict:
    """Every question once, from `clients` threads; wall time, tokens, engine calls and the answers."""

    def ask(question: str) -> tuple[str, int]:
        reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": question}],
                                               max_tokens=max_tokens, temperature=0)
        return reply.choices[0].message.content, reply.usage.completion_tokens

    calls = batcher.calls
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(ask, questions))
    seconds = time.perf_counter() - start
    tokens = sum(t for _, t in results)
    return {"clients": clients, "requests": len(questions), "seconds": round(seconds, 3),
            "completion_tokens": tokens, "completion_tokens_per_s": round(tokens / seconds, 2),
            "requests_per_s": round(len(questions) / seconds, 3), "engine_calls": batcher.calls - calls,
            "answers": [a for a, _ in results]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--max_tokens", type=int, default=32)
    parser.add_argument("--window_ms", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--out", default=None, help="write the results JSON here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    policy = HFPolicy(args.model)
    app = create_app(policy, limits=ServerLimits(max_budget=64, timeout_seconds=600),
                     batching=BatchSettings(window_ms=args.window_ms, max_batch_rows=64))
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
    questions = prompts(args.prompts, seed=0)
    batcher = app.state.batcher
    phase(client, model, questions[:2], 1, 4, batcher)  # warm-up: first-call costs out of the timing
    one = phase(client, model, questions, 1, args.max_tokens, batcher)
    many = phase(client, model, questions, args.clients, args.max_tokens, batcher)
    same = sum(a == b for a, b in zip(one["answers"], many["answers"]))
    result = {
        "model": model, "device": "cpu", "torch_threads": args.threads,
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "prompts": args.prompts, "max_tokens": args.max_tokens, "temperature": 0,
        "window_ms": args.window_ms, "one_client": {k: v for k, v in one.items() if k != "answers"},
        "concurrent": {k: v for k, v in many.items() if k != "answers"},
        "speedup_tokens_per_s": round(many["completion_tokens_per_s"] / one["completion_tokens_per_s"], 2),
        "speedup_requests_per_s": round(many["requests_per_s"] / one["requests_per_s"], 2),
        "same_answers": f"{same}/{len(questions)}", "example_answers": one["answers"][:3],
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
