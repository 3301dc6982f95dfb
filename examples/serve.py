"""Serve a policy (and a PRM) over HTTP: OpenAI-compatible /v1 routes, /generate, /solve with search, /health.

    python examples/serve.py --model runs/quickstart-gpu/model --prm runs/prm/prm --port 8000
    curl -s localhost:8000/solve -H 'content-type: application/json' \\
        -d '{"question": "What is 12 + 7 * 3?", "method": "best_of_n", "budget": 8}'
    curl -s localhost:8000/v1/chat/completions -H 'content-type: application/json' \
        -d '{"model": "embedded:SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": "What is 2 + 3?"}]}'

Without --prm the server offers greedy and maj; best_of_n, beam and mcts answer 400. Each request is bounded
(--max_prompt_chars, --max_new_tokens, --max_budget, --timeout_seconds, --max_body_bytes); /v1 sampling requests
join the running batch at the next decoding step and stream token by token (--max_batch_rows rows at once,
--max_queue waiting at most, then 503); /v1 search requests arriving within --batch_window_ms share one search.

The installed command `lmgym serve` is the same program: its flags and app are lmgym/commands/serve.py's, which
this script runs.
"""
from __future__ import annotations

from lmgym.commands.serve import build_app, build_parser, main, run  # noqa: F401 - the script's parts, for tests

if __name__ == "__main__":
    main()
