"""Workloads W2 and W3 (user scale) through this toolkit, and TRL's GRPOTrainer beside it, on one GPU.

W2: GRPO on a Qwen2.5-1.5B-shaped model (random weights, vocabulary 151,936, tied embeddings), 16 prompts x 8
samples, 1,024 new tokens, beta = 0.04, learning rate 1e-6, full fine-tuning, bf16 weights and AdamW state on
both sides (--param-dtype fp32: float32 weights and state under bf16 autocast, on both sides).
W3: GRPO on a Llama-3.1-8B-shaped model (vocabulary 128,256), LoRA r = 16 (alpha 32) on every projection,
8 prompts x 8 samples, 512 new tokens; with --load-in-4bit, QLoRA (a 4-bit NF4 base, needs bitsandbytes).
The model folder is built in code (benchmarks/user_scale_models.py) when --model names a folder that does not
exist yet; both sides load it. Prompts: the first GSM8K train questions in file order (--prompts-file), or
fixed synthetic questions; the system prompt is W1's; the reward is the completion's distinct characters /
100 (random weights make answers irrelevant; it varies, so advantages are not all zero). Random weights
sample until the length limit, so both sides do the same work a step.

Reported per side: median seconds a step after --warmup steps, completion tokens/s, each phase's median
seconds and peak allocated GPU memory (sample, reference, update; metered by the same code on both sides,
which resets the peak counter at each phase switch), the overall peak, and a memory breakdown: weights,
gradients (the trainable parameters' size), optimizer state, reference model, this toolkit's decoder copy and
kept KV cache, and the update phase's peak beyond them (activations and the rest), each by dtype (what each
side keeps in float32). The toolkit's own run metrics whose names mention memory are passed through.

With --trl-script every side runs in its own fresh process, one after the other, so neither holds GPU memory
while the other runs; without it the toolkit runs in this process. On the GPU machine, from the repository
root: torch, transformers, peft, accelerate, pyarrow and xxhash are on its image; gymnasium, datasets and TRL
travel as wheels (`bash ../shared/tools/split-model.sh gymnasium trl==1.16.0 datasets==5.2.0 dill
multiprocess` here), and so do bitsandbytes for --load-in-4bit (0.50.2: a 43 MB manylinux_2_24 wheel with
CUDA 13 libraries) and liger-kernel for --trl-liger. No embedded model is needed: carry the wheels and a copy
of the GSM8K train file (GSM8K_TRAIN below; without --prompts-file the questions are synthetic), not the
model parts (64 MiB a call). There:

    pip install --no-index --find-links .device/wheels gymnasium trl==1.16.0 datasets
    python benchmarks/user_scale_models.py w2 /tmp/w2_model          # about a minute; reused when present
    python benchmarks/user_scale.py --workload w2 --model /tmp/w2_model \\
        --prompts-file GSM8K_TRAIN --steps 5 --warmup 2 \\
        --trl-script benchmarks/trl_user_scale_baseline.py --trl-modes static \\
        --trl-gradient-checkpointing --out w2.json
    python benchmarks/user_scale.py --workload w3 --model /tmp/w3_model \\
        --prompts-file GSM8K_TRAIN --steps 5 --warmup 2 \\
        --trl-script benchmarks/trl_user_scale_baseline.py --trl-modes static --out w3.json
    python benchmarks/user_scale.py --workload w3 --model /tmp/w3_model --load-in-4bit ... --out w3_qlora.json

Options passed to the toolkit only when given (fields other engineers add; a missing one is a one-line
error): --gradient-checkpointing, --max-tokens-per-microbatch (GRPOConfig fields when it has them, else
HFPolicy arguments). TRL's side: --trl-gradient-checkpointing, --trl-liger (use_liger_kernel, needs
liger-kernel), --trl-micro-batch (per_device_train_batch_size; default --micro-batch).

The largest group x length that fits (`--find-largest length|group`): from the workload's value, doubled
while a two-step run (one warm-up) fits, then bisected between the last fit and the first out-of-memory
(to 128 tokens or 2 samples), at most --max-tries runs per side, each in a fresh process (an OOM does not
poison the next):

    python benchmarks/user_scale.py --workload w2 --model /tmp/w2_model --find-largest length \\
        --find-sides toolkit trl --trl-script benchmarks/trl_user_scale_baseline.py --out w2_largest.json

On several GPUs (weak scaling, as W1's: every rank takes its own --prompts x --group a step, the questions
offset by rank, one optimizer step over all of them), under torchrun, the toolkit alone (no TRL, no
--find-largest), rank 0 printing and writing --out; `completion_tok_per_s` is then the sum over ranks of a
step's completion tokens over rank 0's step time, and `per_rank` holds each rank's peaks and, from one more step
run under torch.profiler after the timed ones, its seconds in collectives (benchmarks/collective_time.py). Build
the folder first (user_scale_models.py), then compare against `torchrun --nproc_per_node 1` of the same command:

    torchrun --standalone --nproc_per_node 2 benchmarks/user_scale.py --workload w2 --model /tmp/w2_model \
        --data-parallel fsdp --steps 4 --warmup 1 --out w2_fsdp2.json

A CPU smoke run: `--workload tiny-w2 --model /tmp/tiny_w2 --steps 2 --warmup 1 --no-fast --out tiny.json`
(also under `torchrun --nproc_per_node 2`, gloo).
"""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from collective_time import profiled_collectives  # noqa: E402
from user_scale_models import (  # noqa: E402
    SYSTEM_PROMPT,
    WORKLOADS,
    PhaseMeter,
    build_model_folder,
    cap_memory,
    device_name,
    folder_shape,
    load_questions,
    memory_breakdown,
    module_tensors,
    optimizer_tensors,
    steady_summary,
    text_reward,
)

from examples.common import example_parser  # noqa: E402
from lmgym.training import distributed as dist  # noqa: E402

COMPILE_CHOICES = {"auto": None, "on": True, "off": False}
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
OOM_MARKERS = ("out of memory", "OutOfMemoryError")
PASSED_WHEN_GIVEN = ("gradient_checkpointing", "max_tokens_per_microbatch", "fsdp_reshard_after_forward")


# ---------------------------------------------------------------- this toolkit's side


def toolkit_kwargs(args: argparse.Namespace) -> tuple[dict, dict]:
    """(GRPOConfig, HFPolicy) keyword arguments for the options given: a GRPOConfig field of the option's name
    when there is one, else an HFPolicy argument; neither is a one-line SystemExit. LoRA (--lora-r, alpha 2r,
    --load-in-4bit) goes to HFPolicy as `lora`."""
    from lmgym.algorithms import GRPOConfig
    from lmgym.policies import HFPolicy, LoraSettings

    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    params = set(inspect.signature(HFPolicy.__init__).parameters)
    config, policy = {}, {}
    for name in PASSED_WHEN_GIVEN:
        value = getattr(args, name)
        if value is None:
            continue
        if name in fields:
            config[name] = value
        elif name in params:
            policy[name] = value
        else:
            raise SystemExit(f"--{name.replace('_', '-')}: this toolkit has no {name!r} setting yet (neither a "
                             f"GRPOConfig field nor an HFPolicy argument)")
    if args.load_in_4bit and not args.lora_r:
        raise SystemExit("--load-in-4bit is QLoRA: give --lora-r too")
    if args.lora_r:
        lora = {"r": args.lora_r, "alpha": 2 * args.lora_r}
        if args.load_in_4bit:
            if "load_in_4bit" not in {f.name for f in dataclasses.fields(LoraSettings)}:
                raise SystemExit("--load-in-4bit: this toolkit's LoraSettings has no 'load_in_4bit' field")
            lora["load_in_4bit"] = True
        policy["lora"] = LoraSettings(**lora)
    return config, policy


def build_toolkit(args: argparse.Namespace):
    """The toolkit's GRPO on the workload (the class is made here: `algorithms` is imported only by this side)."""
    from lmgym.algorithms import GRPO, GRPOConfig
    from lmgym.envs.base import LanguageEnv, Problem
    from lmgym.episodes.rollout import rollout
    from lmgym.policies import HFPolicy

    class QuestionsEnv(LanguageEnv):
        """Single-turn episodes over a fixed list of questions, scored by `text_reward`."""

        modes = ("single",)

        def __init__(self, questions: list[str]):
            super().__init__(mode="single", reward_fns={"distinct_characters": lambda c, gold, info: text_reward(c)})
            self.questions = questions

        @property
        def num_problems(self) -> int:
            return len(self.questions)

        def get_problem(self, index: int) -> Problem:
            return Problem(question=self.questions[index], gold="", problem_id=str(index))

    world, rank = dist.world_size(), dist.rank()

    class MeteredGRPO(GRPO):
        """GRPO over the questions in file order (as TRL takes them; under torchrun each rank takes the next
        `prompts_per_rank` after the ranks before it), each phase metered by `meter`."""

        meter: PhaseMeter

        def collect(self):
            self.meter.switch("sample")
            first = (self.iteration * world + rank) * self.prompts_per_rank
            starts = [{"options": {"index": first + i}} for i in range(self.prompts_per_rank)]
            trajectories = rollout(self.env, self.policy, starts, self.config.samples_per_prompt,
                                   self.sampling_settings(), self.generator, first_group_id=first,
                                   timings=self._times)
            self.step_tokens = sum(t.num_generated_tokens for t in trajectories)
            return trajectories

        def prepare(self, trajectories):
            self.meter.switch("reference")
            super().prepare(trajectories)

        def update(self, trajectories):
            self.meter.switch("update")
            stats = super().update(trajectories)
            self.meter.switch("other")
            return stats

    config_kwargs, policy_kwargs = toolkit_kwargs(args)
    policy = HFPolicy(args.model, system_prompt=SYSTEM_PROMPT, fast_decode=False if args.no_fast else None,
                      dtype=DTYPES[args.param_dtype], **policy_kwargs)
    env = QuestionsEnv(load_questions(args.prompts_file, args.prompts * (args.steps + 2) * world))
    config = GRPOConfig(train_iterations=args.steps, prompts_per_iteration=args.prompts * world,
                        data_parallel=args.data_parallel,
                        samples_per_prompt=args.group, max_new_tokens=args.max_new, temperature=1.0,
                        kl_coeff=args.beta, learning_rate=args.lr, micro_batch_size=args.micro_batch,
                        eval_at_start=False, output_dir=args.output_dir, progress=False, save_every=10**9,
                        max_grad_norm=1.0, seed=args.seed, torch_compile=COMPILE_CHOICES[args.torch_compile],
                        **config_kwargs)
    algo = MeteredGRPO(policy, env, config)
    algo.meter = PhaseMeter()
    return algo, sorted(config_kwargs), sorted(policy_kwargs)


def decoder_tensors(policy) -> tuple[list, list]:
    """(the fast decoder's own weight copy, its kept KV-cache buffers); empty without the fast decoder."""
    decoder = getattr(policy, "fast_decoder", None)
    weights = getattr(decoder, "weights", None)
    copies = []
    if weights is not None:
        names = ("qkv", "qkv_bias", "o", "o_bias", "gate_up", "down")  # norms are the model's own
        copies = [getattr(layer, n) for layer in weights.layers for n in names] + [weights.lm_head]
    buckets = getattr(decoder, "_buckets", {}) if decoder is not None else {}
    return copies, [t for b in buckets.values() for t in (*b.keys, *b.values)]


def run_toolkit(args: argparse.Namespace) -> dict:
    """The workload's steps through this toolkit in this process; the report."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    algo, config_options, policy_options = build_toolkit(args)
    step_s, tokens, rows = [], [], []
    for _ in range(args.steps):
        algo.meter.switch("other")
        t0 = time.perf_counter()
        metrics = algo.train_iteration()
        algo.meter.end_step()
        step_s.append(time.perf_counter() - t0)
        algo.iteration += 1
        rows.append(metrics)
        tokens.append(dist.all_reduce_sum(algo.step_tokens))  # every rank's completion tokens
    summary = steady_summary(step_s, tokens, algo.meter, args.warmup)
    collectives = None
    if dist.world_size() > 1:  # one more step, profiled apart from the timed ones: its time in collectives
        collectives = profiled_collectives(algo.train_iteration)
        algo.iteration += 1
    ref = algo.ref_policy
    own_reference = ref is not None and ref.model is not algo.policy.model
    copies, kv_cache = decoder_tensors(algo.policy)
    parts = {"weights": module_tensors(algo.policy.model), "gradients": algo.trainable_parameters(),
             "optimizer_state": optimizer_tensors(algo.optimizer),
             "reference": module_tensors(ref.model) if own_reference else [],
             "decoder_weights": copies, "kv_cache_kept": kv_cache}
    update_peak = (summary["phase_peak_gb"] or {}).get("update")
    steady = rows[args.warmup:]
    memory_metrics = {k: max(r[k] for r in steady) for k in rows[-1]
                      if "mem" in k.lower() and isinstance(rows[-1][k], (int, float))}
    return {"anchor": "toolkit.GRPO", "device": device_name(), **summary,
            "run_phases_median_s": {k: statistics.median(r[k] for r in steady)
                                    for k in ("time_sample", "time_score", "time_prepare", "time_update")},
            "run_memory_metrics": memory_metrics,
            "memory": memory_breakdown(parts, update_peak),
            "mean_completion_len": [r["completion_length"] for r in rows],
            "reward": [r["reward_mean"] for r in rows],
            "settings": settings(args), "config_options": config_options, "policy_options": policy_options,
            "fast_decode": algo.policy.fast_decoder is not None,
            "world_size": dist.world_size(), "data_parallel": args.data_parallel if dist.world_size() > 1 else None,
            "per_rank": dist.gather_lists([{"rank": dist.rank(), "peak_mem_gb": summary["peak_mem_gb"],
                                            "phase_peak_gb": summary["phase_peak_gb"],
                                            "median_step_s": summary["median_step_s"],
                                            "collectives": collectives}])}


def settings(args: argparse.Namespace) -> dict:
    keys = ("workload", "prompts", "group", "max_new", "steps", "warmup", "micro_batch", "lora_r", "load_in_4bit",
            "param_dtype", "beta", "lr", "gradient_checkpointing", "max_tokens_per_microbatch", "torch_compile",
            "prompts_file", "data_parallel", "fsdp_reshard_after_forward", "memory_cap_gb")
    return {k: getattr(args, k) for k in keys}


# ---------------------------------------------------------------- child processes


def toolkit_command(args: argparse.Namespace, **override) -> list[str]:
    """This script running the toolkit side alone (`--child`: prints `RESULT {json}`), with `override`."""
    a = {**vars(args), **override}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--out", "-"]
    for key in ("workload", "model", "prompts", "group", "max_new", "steps", "warmup", "micro_batch", "lora_r",
                "param_dtype", "beta", "lr", "seed", "torch_compile", "output_dir", "prompts_file",
                "max_tokens_per_microbatch", "data_parallel", "memory_cap_gb"):
        if a[key] is not None:
            cmd += [f"--{key.replace('_', '-')}", str(a[key])]
    cmd += [f"--{flag.replace('_', '-')}" for flag in ("gradient_checkpointing", "load_in_4bit", "no_fast") if a[flag]]
    return cmd


def trl_command(args: argparse.Namespace, mode: str, **override) -> list[str]:
    """The TRL script on the same folder and settings, in generation mode `mode`."""
    a = {**vars(args), **override}
    micro = a["trl_micro_batch"] or a["micro_batch"]
    cmd = [sys.executable, a["trl_script"], "--mode", mode, "--micro-batch", str(micro)]
    for key in ("model", "prompts", "group", "max_new", "steps", "warmup", "lora_r", "param_dtype", "beta", "lr",
                "seed", "prompts_file", "memory_cap_gb"):
        if a[key] is not None:
            cmd += [f"--{key.replace('_', '-')}", str(a[key])]
    flags = {"trl_gradient_checkpointing": "--gradient-checkpointing", "trl_liger": "--liger",
             "load_in_4bit": "--load-in-4bit"}
    return cmd + [flag for key, flag in flags.items() if a[key]]


def run_child(cmd: list[str], timeout: float | None) -> dict:
    """Run a side in a fresh process; its `RESULT` (status "fits"), or status "oom" / "error" / "timeout" with
    the end of its output."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        return {"status": "timeout", "error": f"no result after {err.timeout} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return {"status": "fits", **json.loads(line[len("RESULT "):])}
    tail = (proc.stdout + proc.stderr)[-3000:]
    return {"status": "oom" if any(m in tail for m in OOM_MARKERS) else "error", "rc": proc.returncode, "error": tail}


def largest_fitting(start: int, fits, max_tries: int, granularity: int) -> tuple[int | None, list[dict]]:
    """The largest value that `fits(value)` accepts (status "fits"), from `start`: doubled while it fits, then
    bisected between the last fit and the first "oom" down to `granularity`, at most `max_tries` calls; a
    status other than fits/oom ends the search. Returns (largest fitting value or None, every try)."""
    fit, failed, value, tries = None, None, start, []
    while len(tries) < max_tries:
        result = fits(value)
        tries.append({"value": value, **result})
        if result["status"] == "fits":
            fit = value
        elif result["status"] == "oom":
            failed = value
        else:
            break
        if failed is None:
            value *= 2
        elif fit is None or failed - fit <= granularity:
            break
        else:
            value = (fit + failed) // 2 // granularity * granularity
            if value <= fit:
                break
    return fit, tries


def find_largest(args: argparse.Namespace) -> dict:
    """The largest length (or group) that fits on each side, the other held at the workload's value."""
    axis = {"length": "max_new", "group": "group"}[args.find_largest]
    granularity = 128 if axis == "max_new" else 2
    out = {}
    for side in args.find_sides:
        def fits(value: int, side=side) -> dict:
            override = {axis: value, "steps": 2, "warmup": 1}
            cmd = (toolkit_command(args, **override) if side == "toolkit"
                   else trl_command(args, args.trl_modes[0], **override))
            result = run_child(cmd, args.timeout)
            keep = ("status", "median_step_s", "completion_tok_per_s", "peak_mem_gb", "phase_peak_gb", "error")
            print(f"TRY {side} {axis}={value}: {result['status']} peak {result.get('peak_mem_gb')}", flush=True)
            return {k: result[k] for k in keep if k in result}

        largest, tries = largest_fitting(getattr(args, axis), fits, args.max_tries, granularity)
        out[side] = {"axis": axis, "largest": largest, "bounded": any(t["status"] == "oom" for t in tries),
                     "held": {"group": args.group, "max_new": args.max_new, "prompts": args.prompts}, "tries": tries}
    return out


# ---------------------------------------------------------------- the command line


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    parser.add_argument("--model", required=True, help="the model folder (built for the workload's shape if absent)")
    parser.add_argument("--prompts-file", default=None, help="GSM8K train JSONL (default: synthetic questions)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=None, help="prompts per step (default: the workload's)")
    parser.add_argument("--group", type=int, default=None, help="samples per prompt (default: the workload's)")
    parser.add_argument("--max-new", type=int, default=None, help="new tokens at most (default: the workload's)")
    parser.add_argument("--micro-batch", type=int, default=None, help="trajectories per forward/backward")
    parser.add_argument("--lora-r", type=int, default=None, help="LoRA rank, alpha 2r, every projection (0: full "
                                                                 "fine-tuning; default: the workload's)")
    parser.add_argument("--load-in-4bit", action="store_true", help="QLoRA: the base in 4-bit NF4 (bitsandbytes)")
    parser.add_argument("--param-dtype", choices=sorted(DTYPES), default="bf16",
                        help="the trained weights' dtype on both sides (bf16 autocast either way on CUDA)")
    parser.add_argument("--beta", type=float, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gradient-checkpointing", action="store_const", const=True, default=None)
    parser.add_argument("--max-tokens-per-microbatch", type=int, default=None)
    parser.add_argument("--torch-compile", choices=sorted(COMPILE_CHOICES), default="auto")
    parser.add_argument("--no-fast", action="store_true", help="the plain decode loop")
    parser.add_argument("--data-parallel", choices=("ddp", "fsdp"), default="ddp",
                        help="how torchrun ranks average gradients (TrainerConfig.data_parallel)")
    parser.add_argument("--fsdp-keep-gathered", dest="fsdp_reshard_after_forward", action="store_const",
                        const=False, default=None, help="fsdp_reshard_after_forward=False: one all-gather a step")
    parser.add_argument("--output-dir", default="/tmp/user_scale_toolkit")
    parser.add_argument("--skip-toolkit", action="store_true")
    parser.add_argument("--trl-script", default=None, help="benchmarks/trl_user_scale_baseline.py")
    parser.add_argument("--trl-modes", nargs="*", default=["static"], choices=["static", "default", "paged"])
    parser.add_argument("--trl-micro-batch", type=int, default=None)
    parser.add_argument("--trl-gradient-checkpointing", action="store_true")
    parser.add_argument("--trl-liger", action="store_true")
    parser.add_argument("--find-largest", choices=["length", "group"], default=None)
    parser.add_argument("--find-sides", nargs="*", choices=["toolkit", "trl"], default=["toolkit"])
    parser.add_argument("--max-tries", type=int, default=4, help="runs per side in --find-largest")
    parser.add_argument("--timeout", type=float, default=None, help="seconds a child process may take")
    parser.add_argument("--memory-cap-gb", type=float, default=None,
                        help="GiB each side may allocate on the GPU (e.g. 78: fits an 80 GB card)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", required=True, help="results JSON ('-': none)")
    args = parser.parse_args(argv)
    workload = WORKLOADS[args.workload]
    for key, value in (("prompts", workload.prompts), ("group", workload.group), ("max_new", workload.max_new),
                       ("micro_batch", workload.micro_batch), ("lora_r", workload.lora_r),
                       ("beta", workload.beta), ("lr", workload.lr)):
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.warmup < 0 or args.steps <= args.warmup:
        parser.error("--steps must be greater than --warmup (>= 0)")
    if args.find_largest and "trl" in args.find_sides and not args.trl_script:
        parser.error("--find-sides trl needs --trl-script")
    if dist.launched() and (args.trl_script or args.find_largest or args.skip_toolkit):
        parser.error("under torchrun only the toolkit runs: drop --trl-script, --find-largest and --skip-toolkit")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    shape = WORKLOADS[args.workload].shape
    held = folder_shape(args.model)
    if held not in (None, shape):
        raise SystemExit(f"--model {args.model} holds shape {held!r}; workload {args.workload} needs {shape!r}")
    dist.init_from_env()
    cap_memory(args.memory_cap_gb)
    with dist.main_first():  # under torchrun rank 0 builds a missing folder, the others then find it
        if not (Path(args.model) / "config.json").is_file():
            build_model_folder(shape, args.model, args.seed)
    if dist.launched():
        result = run_toolkit(args)
        if dist.is_main() and args.out != "-":
            Path(args.out).write_text(json.dumps({"workload": args.workload, "date": time.strftime("%Y-%m-%d"),
                                                  "gpu": device_name(), "model": args.model, "shape": shape,
                                                  "toolkit": result}, indent=2))
        print("TOOLKIT", json.dumps(result)[:3000], flush=True)  # rank 0's (init_from_env quiets the rest)
        return
    if args.child:
        print("RESULT " + json.dumps(run_toolkit(args)), flush=True)
        return
    results: dict = {"workload": args.workload, "date": time.strftime("%Y-%m-%d"), "gpu": device_name(),
                     "model": args.model, "shape": shape}
    if args.find_largest:
        results["largest"] = find_largest(args)
    else:
        if not args.skip_toolkit:
            results["toolkit"] = (run_child(toolkit_command(args), args.timeout) if args.trl_script
                                  else run_toolkit(args))
            print("TOOLKIT", json.dumps(results["toolkit"])[:3000], flush=True)
        for mode in args.trl_modes if args.trl_script else []:
            results.setdefault("trl", []).append(run_child(trl_command(args, mode), args.timeout))
            print("TRL", json.dumps(results["trl"][-1])[:3000], flush=True)
    if args.out != "-":
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
