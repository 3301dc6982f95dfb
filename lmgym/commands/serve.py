"""Serve a policy (and a PRM) over HTTP: OpenAI-compatible /v1 routes, /generate, /solve with search, /health.

    lmgym serve --model runs/quickstart-gpu/model --prm runs/prm/prm --port 8000
    curl -s localhost:8000/solve -H 'content-type: application/json' \\
        -d '{"question": "What is 12 + 7 * 3?", "method": "best_of_n", "budget": 8}'
    curl -s localhost:8000/v1/chat/completions -H 'content-type: application/json' \
        -d '{"model": "embedded:SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": "What is 2 + 3?"}]}'

Without --prm the server offers greedy and maj; best_of_n, beam and mcts answer 400. Each request is bounded
(--max_prompt_chars, --max_new_tokens, --max_budget, --timeout_seconds, --max_body_bytes); /v1 sampling requests
join the running batch at the next decoding step and stream token by token (--max_batch_rows rows at once,
--max_queue waiting at most, then 503); /v1 search requests arriving within --batch_window_ms share one search.
"""
from __future__ import annotations

import argparse
import dataclasses

from lmgym.core.extras import import_extra
from lmgym.policies import EMBEDDED_MODEL
from lmgym.policies.prm import AGGREGATIONS
from lmgym.search import SearchSettings
from lmgym.search.mcts import MCTSConfig
from lmgym.serving.batcher import BatchSettings
from lmgym.serving.limits import ServerLimits
from lmgym.training.cli import run_with_clear_errors
from lmgym.training.flag_parser import SuggestingParser


def build_parser() -> argparse.ArgumentParser:
    """The flags of `lmgym serve`: the model, the address, each request's limits and the batching."""
    parser = SuggestingParser(prog="lmgym serve", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=EMBEDDED_MODEL,
                        help="policy: hub name, local folder, or the embedded default")
    parser.add_argument("--prm", default=None,
                        help="a PRM folder (ProcessRewardModel.save) for best_of_n, beam and mcts")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on")
    limits = ServerLimits()
    parser.add_argument("--max_prompt_chars", type=int, default=limits.max_prompt_chars,
                        help="longest prompt or question")
    parser.add_argument("--max_new_tokens", type=int, default=limits.max_new_tokens, help="most tokens /generate gives")
    parser.add_argument("--max_budget", type=int, default=limits.max_budget, help="largest /solve budget")
    parser.add_argument("--timeout_seconds", type=float, default=limits.timeout_seconds,
                        help="compute time per request")
    parser.add_argument("--max_body_bytes", type=int, default=limits.max_body_bytes,
                        help="largest request body (checked before it is parsed)")
    batching = BatchSettings()
    parser.add_argument("--batch_window_ms", type=float, default=batching.window_ms,
                        help="/v1 search: milliseconds the queue collects requests into one search call")
    parser.add_argument("--max_queue", type=int, default=batching.max_queue, help="/v1: requests waiting at most")
    parser.add_argument("--max_batch_rows", type=int, default=batching.max_batch_rows,
                        help="/v1: sequences decoded together at most")
    parser.add_argument("--temperature", type=float, default=0.8,
                        help="/solve's sampling temperature (maj, best_of_n, beam, mcts)")
    parser.add_argument("--step_tokens", type=int, default=64, help="/solve's tokens per step")
    parser.add_argument("--max_steps", type=int, default=8, help="/solve's steps per solution at most")
    parser.add_argument("--expand_k", type=int, default=4, help="/solve's candidate steps per MCTS expansion")
    parser.add_argument("--aggregation", choices=AGGREGATIONS, default=None,
                        help="solution score from step scores (default: the PRM's own)")
    return parser


def build_app(args: argparse.Namespace):
    """The app the arguments describe (limits and settings checked before any model loads)."""
    from lmgym.policies import HFPolicy
    from lmgym.serving.app import create_app

    limits = ServerLimits(args.max_prompt_chars, args.max_new_tokens, args.max_budget, args.timeout_seconds,
                          args.max_body_bytes)
    batching = BatchSettings(args.batch_window_ms, args.max_queue, args.max_batch_rows)
    search = SearchSettings(temperature=args.temperature, max_new_tokens=args.step_tokens,
                            aggregation=args.aggregation or "min", mcts=MCTSConfig(expand_k=args.expand_k))
    policy = HFPolicy(args.model)
    scorer = None
    if args.prm:
        from lmgym.policies.prm import ProcessRewardModel

        scorer = ProcessRewardModel.from_pretrained(args.prm, device=policy.device)
        if args.aggregation is None:
            search = dataclasses.replace(search, aggregation=scorer.aggregation)
    return create_app(policy, scorer, limits, search, max_steps=args.max_steps, batching=batching)


def run(args: argparse.Namespace) -> None:
    """Build the app and serve it with uvicorn until interrupted."""
    uvicorn = import_extra("uvicorn", "The HTTP server")  # before the model loads: one line if [serve] is missing
    app = build_app(args)
    print(f"serving {args.model} (prm: {args.prm}) on http://{args.host}:{args.port}")
    uvicorn.run(app, host=args.host, port=args.port)


def main(argv: list[str] | None = None, command: str = "serve") -> None:
    """`lmgym serve ...` (and examples/serve.py); bad input exits with one line."""
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))

