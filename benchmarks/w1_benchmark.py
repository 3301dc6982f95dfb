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

W1 on 1 vs 2 GPUs (weak scaling: every rank takes its own 16 prompts x 8 samples per step, the GSM8K
questions offset by rank, so 2 GPUs train on 32 prompts a step; one optimizer step over all of them).
Under torchrun the process group is joined by `lmgym.training.distributed.init_from_env`, TRL and the
sampling comparison are skipped, and rank 0 alone prints and writes --out, with
`aggregate_completion_tok_per_s` (the sum over ranks of completion tokens per step, divided by the
median step time, a step taking as long as its slowest rank) and each rank's step times and peak memory
under `per_rank`. Compare the 1- and 2-GPU runs by `aggregate_completion_tok_per_s` (a 1-GPU run
reports it too):

    torchrun --nproc_per_node 1 benchmarks/w1_benchmark.py --gsm8k PATH --steps 8 --out w1_1gpu.json
    torchrun --nproc_per_node 2 benchmarks/w1_benchmark.py --gsm8k PATH --steps 8 --data-parallel ddp \
        --out w1_2gpu_ddp.json
    torchrun --nproc_per_node 2 benchmarks/w1_benchmark.py --gsm8k PATH --steps 8 --data-parallel fsdp \
        --out w1_2gpu_fsdp.json

LoRA against full fine-tuning on one GPU (`--lora-r R`: `LoraSettings(r=R, alpha=2R)` on every attention
and MLP projection, the KL reference then the base with the adapter off; 0, the default, is full
fine-tuning). Everything else is W1, the learning rate included, so the rewards of the two runs are not
a comparison of methods; compare `peak_mem_gb` and `completion_tok_per_s`:

    python benchmarks/w1_benchmark.py --gsm8k PATH --steps 8 --out w1_full.json
    python benchmarks/w1_benchmark.py --gsm8k PATH --steps 8 --lora-r 16 --out w1_lora16.json

A smoke run on the CPU (a few prompts, short completions, the plain decode loop; the figures use the
defaults): `--prompts 2 --group 2 --max-new 16 --steps 2 --warmup 1 --no-fast`, alone or under
`torchrun --nproc_per_node 2` (gloo).
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

from examples.common import example_parser  # noqa: E402
from lmgym.algorithms import GRPO, GRPOConfig  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.episodes.rollout import rollout  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy, LoraSettings  # noqa: E402
from lmgym.training import distributed as dist  # noqa: E402

SYSTEM_PROMPT = "Solve the math word problem step by step. End with '#### <number>'."
PROMPTS, GROUP, MAX_NEW = 16, 8, 256
COMPILE_CHOICES = {"auto": None, "on": True, "off": False}


class InOrderGRPO(GRPO):
    """GRPO that takes GSM8K questions in file order, as the TRL baseline does; under torchrun each rank
    takes the next `prompts_per_rank` of them after the ranks before it."""

    def collect(self):
        share = self.prompts_per_rank
        first = (self.iteration * dist.world_size() + dist.rank()) * share
        starts = [{"options": {"index": first + i}} for i in range(share)]
        trajectories = rollout(self.env, self.policy, starts, self.config.samples_per_prompt,
                               self.sampling_settings(), self.generator, first_group_id=first)
        self.rank_tokens = sum(t.num_generated_tokens for t in trajectories)  # this rank's completion tokens
        return trajectories


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def peak_memory_gb() -> float | None:
    return torch.cuda.max_memory_allocated() / 1e9 if torch.cuda.is_available() else None


def build(gsm8k: str, steps: int, micro_batch: int, fast: bool, lora_r: int, data_parallel: str,
          prompts: int, group: int, max_new: int, torch_compile: bool | None = None) -> InOrderGRPO:
    """W1's algorithm: `prompts` x `group` episodes per rank and step."""
    lora = LoraSettings(r=lora_r, alpha=2 * lora_r) if lora_r else None
    policy = HFPolicy(EMBEDDED_MODEL, system_prompt=SYSTEM_PROMPT, fast_decode=fast, lora=lora)
    env = make("GSM8K-v0", data_path=gsm8k, instruction="")
    config = GRPOConfig(train_iterations=steps, prompts_per_iteration=prompts * dist.world_size(),
                        samples_per_prompt=group, max_new_tokens=max_new, temperature=1.0, kl_coeff=0.04,
                        learning_rate=1e-6, micro_batch_size=micro_batch, eval_at_start=False,
                        output_dir="/tmp/w1_toolkit", progress=False, save_every=10**9, max_grad_norm=1.0,
                        data_parallel=data_parallel, torch_compile=torch_compile)
    return InOrderGRPO(policy, env, config)


def run_toolkit(gsm8k: str, steps: int, warmup: int, micro_batch: int, fast: bool, lora_r: int = 0,
                data_parallel: str = "ddp", prompts: int = PROMPTS, group: int = GROUP, max_new: int = MAX_NEW,
                torch_compile: bool | None = None) -> dict:
    """W1's steps on this process (every rank under torchrun); the report, the same on every rank."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    algo = build(gsm8k, steps, micro_batch, fast, lora_r, data_parallel, prompts, group, max_new, torch_compile)
    rows, rank_tokens = [], []
    for _ in range(steps):
        synchronize()
        t0 = time.perf_counter()
        m = algo.train_iteration()
        synchronize()
        m["step_s"] = time.perf_counter() - t0
        algo.iteration += 1
        rows.append(m)
        rank_tokens.append(algo.rank_tokens)
    steady = rows[warmup:]
    tokens = [r["completion_length"] * prompts * group * dist.world_size() for r in steady]
    report = {
        "anchor": "toolkit.GRPO", "fast_decode": fast, "device": device_name(),
        "step_s": [r["step_s"] for r in rows], "median_step_s": statistics.median(r["step_s"] for r in steady),
        "completion_tok_per_s": sum(tokens) / sum(r["step_s"] for r in steady),
        "phases_median_s": {k: statistics.median(r[k] for r in steady)
                            for k in ("time_sample", "time_prepare", "time_update")},
        "phases_s": [{k: r[k] for k in ("time_sample", "time_prepare", "time_update")} for r in rows],
        "mean_completion_len": [r["completion_length"] for r in rows],
        "reward": [r["reward_mean"] for r in rows],
        "peak_mem_gb": peak_memory_gb(),
    }
    report.update(scaling_report([r["step_s"] for r in rows], rank_tokens, warmup))
    report.update({"lora_r": lora_r, "data_parallel": algo.gradients.mode,
                   "prompts_per_rank": prompts, "samples_per_prompt": group})
    return report


def scaling_report(step_s: list[float], rank_tokens: list[int], warmup: int) -> dict:
    """Every rank's step times, completion tokens and peak memory (gathered), and the aggregate completion
    tokens/s: the sum over ranks of their mean completion tokens per steady step, divided by the median
    over steady steps of the slowest rank's step time."""
    ranks = dist.gather_lists([{"rank": dist.rank(), "device": device_name(), "step_s": step_s,
                                "completion_tokens": rank_tokens, "peak_mem_gb": peak_memory_gb()}])
    for r in ranks:
        r["median_step_s"] = statistics.median(r["step_s"][warmup:])
        r["completion_tok_per_s"] = sum(r["completion_tokens"][warmup:]) / sum(r["step_s"][warmup:])
    slowest = [max(r["step_s"][i] for r in ranks) for i in range(warmup, len(step_s))]
    per_step = sum(statistics.mean(r["completion_tokens"][warmup:]) for r in ranks)
    return {"world_size": len(ranks), "per_rank": ranks,
            "aggregate_completion_tok_per_s": per_step / statistics.median(slowest)}


def run_sampling(gsm8k: str, batches: list[int]) -> list[dict]:
    """Our fast decoder against `model.generate` (bf16, sampling, 256 new tokens) at each batch size."""
    from transformers import AutoModelForCausalLM

    from lmgym.policies.loading.models import resolve_model_path

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
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gsm8k", required=True, help="GSM8K train JSONL")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--micro-batch", type=int, default=32, help="trajectories per forward/backward")
    parser.add_argument("--no-fast", action="store_true", help="use the plain decode loop")
    parser.add_argument("--lora-r", type=int, default=0, help="LoRA rank (alpha 2r) on every projection; 0: full "
                                                              "fine-tuning")
    parser.add_argument("--data-parallel", choices=("ddp", "fsdp"), default="ddp",
                        help="how torchrun ranks average gradients (TrainerConfig.data_parallel)")
    parser.add_argument("--prompts", type=int, default=PROMPTS, help="prompts per step and rank (W1: 16)")
    parser.add_argument("--group", type=int, default=GROUP, help="samples per prompt (W1: 8)")
    parser.add_argument("--max-new", type=int, default=MAX_NEW, help="new tokens at most (W1: 256)")
    parser.add_argument("--torch-compile", choices=sorted(COMPILE_CHOICES), default="auto",
                        help="GRPOConfig.torch_compile (auto: its default, on CUDA)")
    parser.add_argument("--skip-toolkit", action="store_true")
    parser.add_argument("--trl-script", default=None)
    parser.add_argument("--trl-modes", nargs="*", default=["static"])
    parser.add_argument("--gguf", default=os.environ.get("RLGYM_EMBEDDED_GGUF", ""))
    parser.add_argument("--sampling-batches", type=int, nargs="*", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.lora_r < 0 or args.warmup < 0 or args.steps <= args.warmup:
        parser.error("--lora-r must be >= 0 and --steps greater than --warmup (>= 0)")
    dist.init_from_env()  # under torchrun: join the process group; rank 0 alone prints
    several = dist.world_size() > 1
    results: dict = {"workload": "W1", "date": time.strftime("%Y-%m-%d"), "gpu": device_name()}
    if not args.skip_toolkit:
        results["toolkit"] = run_toolkit(args.gsm8k, args.steps, args.warmup, args.micro_batch, not args.no_fast,
                                         args.lora_r, args.data_parallel, args.prompts, args.group, args.max_new,
                                         COMPILE_CHOICES[args.torch_compile])
        print("TOOLKIT", json.dumps(results["toolkit"]), flush=True)
    if several and (args.sampling_batches or args.trl_script):
        print("note: under torchrun the sampling comparison and TRL are skipped (one-GPU figures)", flush=True)
    elif args.sampling_batches:
        results["sampling"] = run_sampling(args.gsm8k, args.sampling_batches)
    for mode in args.trl_modes if args.trl_script and not several else []:
        torch.cuda.empty_cache()
        results.setdefault("trl", []).append(run_trl(args.trl_script, mode, args.steps, args.gsm8k, args.gguf))
        print("TRL", json.dumps(results["trl"][-1])[:3000], flush=True)
    if dist.is_main():
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
