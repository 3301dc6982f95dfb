"""GPU check of the fast sampling path against the plain loop, on the embedded model.

    python benchmarks/check_fast_decode.py [--prompts 64] [--max-new 64]

Greedy: fraction of prompts whose completions are token-identical (bf16 kernels differ slightly
between the two paths, so a near-tie can flip late in a long completion) and the largest difference
of the shared prefix's log-probs. Sampling: log-probs recorded by the fast path against the
trainer's recomputation (the quantity the importance ratio uses).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from examples.common import example_parser  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.policies import HFPolicy  # noqa: E402
from lmgym.policies.decoding.generation import decode  # noqa: E402


def main() -> None:
    parser = example_parser()
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-new", type=int, default=64)
    parser.add_argument("--gsm8k", default=None, help="use GSM8K questions (a JSONL path) instead of sums")
    parser.add_argument("--no-graphs", action="store_true", help="static cache without CUDA graphs")
    args = parser.parse_args()
    policy = HFPolicy(fast_decode=True)
    policy.fast_decoder.use_graphs = not args.no_graphs
    env = make("GSM8K-v0", data_path=args.gsm8k, instruction="") if args.gsm8k else make("Arithmetic-v0", split="test")
    prompts = [policy.format_prompt(env.reset(options={"index": i})[0]) for i in range(args.prompts)]
    with policy.autocast():
        plain = decode(policy.model, policy.tokenizer, prompts, args.max_new, temperature=0.0)
    fast = [g[0] for g in policy.sample(prompts, 1, args.max_new, temperature=0.0)]
    same = sum(a.completion_ids == b.completion_ids for a, b in zip(plain, fast))
    prefix_diff = 0.0
    for a, b in zip(plain, fast):
        n = next((i for i, (x, y) in enumerate(zip(a.completion_ids, b.completion_ids)) if x != y),
                 min(len(a.completion_ids), len(b.completion_ids)))
        if n:
            prefix_diff = max(prefix_diff, max(abs(x - y) for x, y in zip(a.logprobs[:n], b.logprobs[:n])))
    sampled = [g[0] for g in policy.sample(prompts, 1, args.max_new, temperature=1.0,
                                           generator=torch.Generator("cuda").manual_seed(0))]
    diffs = []
    for g in sampled[:16]:
        ids = torch.tensor([g.prompt_ids + g.completion_ids], device="cuda")
        with torch.no_grad():
            lp, _ = policy.token_logprobs(ids, torch.ones_like(ids), len(g.prompt_ids))
        diffs.append(float((lp[0].float().cpu() - torch.tensor(g.logprobs)).abs().mean()))
    print("CHECK " + json.dumps({"prompts": args.prompts, "max_new": args.max_new, "graphs": not args.no_graphs,
                                 "greedy_identical": same / len(prompts), "prefix_logprob_max_diff": prefix_diff,
                                 "sampled_logprob_mean_abs_diff": sum(diffs) / len(diffs)}))


if __name__ == "__main__":
    main()
