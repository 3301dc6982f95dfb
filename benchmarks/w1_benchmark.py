"""Workload W1 through this toolkit, and TRL's GRPOTrainer beside it, on the same GPU in one invocation.

W1: GRPO, the embedded SmolLM2-135M-Instruct, GSM8K train questions (in file order, the same
prompts TRL sees) with a system prompt asking for '#### <number>', 16 prompts x 8 samples per step,
up to 256 new tokens, temperature 1.0, beta = 0.04 (reference model on), learning rate 1e-6, bf16,
one optimizer step per batch.

    python benchmarks/w1_benchmark.py --gsm8k PATH --steps 8 --out results.json \
        [--trl-script ../shared/tools/trl_w1_baseline.py --trl-modes static default paged] \
        [--sampling-batches 128 512]

Reports median seconds per step after warm-up, completion tokens/s, seconds per phase and peak GPU
memory; with --sampling-batches, sampling alone against `model.generate` at those batch sizes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from algorithms import GRPO, GRPOConfig  # noqa: E402
from episodes.rollout import rollout  # noqa: E402
from envs import make  # noqa: E402
from policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402

SYSTEM_PROMPT = "Solve the math word problem step by step. End with '#### <number>'."
PROMPTS, GROUP, MAX_NEW = 16, 8, 256


class InOrderGRPO(GRPO):
    """GRPO that takes GSM8K questions in file order, as the TRL baseline does."""

    def collect(self):
        first = self.iteration * self.config.prompts_per_iteration
        starts = [{"options": {"index": first + i}} for i in range(self.config.prompts_per_iteration)]
        return rollout(self.env, self.policy, starts, self.config.samples_per_prompt, self.sampling_settings(),
                       self.generator, first_group_id=first)


def run_toolkit(gsm8k: str, steps: int, warmup: int, micro_batch: int, fast: bool) -> dict:
    torch.cuda.reset_peak_memory_stats()
    policy = HFPolicy(EMBEDDED_MODEL, system_prompt=SYSTEM_PROMPT, fast_decode=fast)
    env = make("GSM8K-v0", data_path=gsm8k, instruction="")
    config = GRPOConfig(train_iterations=steps, prompts_per_iteration=PROMPTS, samples_per_prompt=GROUP,
                        max_new_tokens=MAX_NEW, temperature=1.0, kl_coeff=0.04, learning_rate=1e-6,
                        micro_batch_size=micro_batch, eval_at_start=False, output_dir="/tmp/w1_toolkit",
                        progress=False, save_every=10**9, max_grad_norm=1.0)
    algo = InOrderGRPO(policy, env, config)
    rows = []
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        m = algo.train_iteration()
        torch.cuda.synchronize()
        m["step_s"] = time.perf_counter() - t0
        algo.iteration += 1
        rows.append(m)
    steady = rows[warmup:]
    tokens = [r["completion_length"] * PROMPTS * GROUP for r in steady]
    return {
        "anchor": "toolkit.GRPO", "fast_decode": fast, "device": torch.cuda.get_device_name(),
        "step_s": [r["step_s"] for r in rows], "median_step_s": statistics.median(r["step_s"] for r in steady),
        "completion_tok_per_s": sum(tokens) / sum(r["step_s"] for r in steady),
        "phases_median_s": {k: statistics.median(r[k] for r in steady)
                            for k in ("time_sample", "time_prepare", "time_update")},
        "mean_completion_len": [r["completion_length"] for r in rows],
        "reward": [r["reward_mean"] for r in rows],
        "peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9,
    }


def run_sampling(gsm8k: str, batches: list[int]) -> list[dict]:
    """Our fast decoder against `model.generate` (bf16, sampling, 256 new tokens) at each batch size."""
    from transformers import AutoModelForCausalLM

    from policies.models import resolve_model_path

    policy = HFPolicy(EMBEDDED_MODEL, system_prompt=SYSTEM_PROMPT, fast_decode=True)
    env = make("GSM8K-v0", data_path=gsm8k, instruction="")
    hf = AutoModelForCausalLM.from_pretrained(resolve_model_path(EMBEDDED_MODEL), dtype=torch.bfloat16).cuda().eval()
    tok = policy.tokenizer
    results = []
    for batch in batches:
        prompts = [policy.format_prompt(env.reset(options={"index": i})[0]) for i in range(batch)]
        row = {"batch": batch}
        for name in ("toolkit", "generate"):
            times, tokens = [], []
            for rep in range(3):  # first is warm-up (graph capture, allocator)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                if name == "toolkit":
                    gens = policy.sample(prompts, 1, MAX_NEW, 1.0)
                    n_tok = sum(len(g[0].completion_ids) for g in gens)
                else:
                    enc = tok.pad([{"input_ids": p} for p in prompts], return_tensors="pt").to("cuda")
                    out = hf.generate(**enc, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                                      max_new_tokens=MAX_NEW, pad_token_id=tok.pad_token_id)
                    new = out[:, enc["input_ids"].shape[1]:]
                    n_tok = int(sum(_length_to_eos(r, tok.eos_token_id) for r in new.tolist()))
                torch.cuda.synchronize()
                if rep:
                    times.append(time.perf_counter() - t0)
                    tokens.append(n_tok)
            row[name] = {"s": statistics.median(times), "tok_per_s": sum(tokens) / sum(times)}
        row["speedup"] = row["toolkit"]["tok_per_s"] / row["generate"]["tok_per_s"]
        results.append(row)
        print("SAMPLING", json.dumps(row), flush=True)
    return results


def _length_to_eos(ids: list[int], eos: int) -> int:
    return ids.index(eos) + 1 if eos in ids else len(ids)


def run_trl(script: str, mode: str, steps: int, gsm8k: str, gguf: str) -> dict:
    env = dict(os.environ, MODE=mode)
    proc = subprocess.run([sys.executable, script, str(Path(gguf).parent), Path(gguf).name, gsm8k, str(steps)],
                          env=env, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"anchor": "trl.GRPOTrainer", "mode": mode, "error": proc.stderr[-3000:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gsm8k", required=True, help="GSM8K train JSONL")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--micro-batch", type=int, default=32, help="trajectories per forward/backward")
    parser.add_argument("--no-fast", action="store_true", help="use the plain decode loop")
    parser.add_argument("--skip-toolkit", action="store_true")
    parser.add_argument("--trl-script", default=None)
    parser.add_argument("--trl-modes", nargs="*", default=["static"])
    parser.add_argument("--gguf", default=os.environ.get("RLGYM_EMBEDDED_GGUF", ""))
    parser.add_argument("--sampling-batches", type=int, nargs="*", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    results: dict = {"workload": "W1", "date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name()}
    if not args.skip_toolkit:
        results["toolkit"] = run_toolkit(args.gsm8k, args.steps, args.warmup, args.micro_batch, not args.no_fast)
        print("TOOLKIT", json.dumps(results["toolkit"]), flush=True)
    if args.sampling_batches:
        results["sampling"] = run_sampling(args.gsm8k, args.sampling_batches)
    for mode in args.trl_modes if args.trl_script else []:
        torch.cuda.empty_cache()
        results.setdefault("trl", []).append(run_trl(args.trl_script, mode, args.steps, args.gsm8k, args.gguf))
        print("TRL", json.dumps(results["trl"][-1])[:3000], flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
