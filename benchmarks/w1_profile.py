"""Where a W1 step's time goes: wall time against GPU kernel time per phase, kernels per decode step, and the
top kernels, from `torch.profiler`, for one or more fast-decoder variants (one GPU).

    python benchmarks/w1_profile.py --gsm8k PATH --out profile.json [--variants modules fused fused+compile]

Each variant builds W1 (benchmarks/w1_benchmark.py) with its decoder, runs `--warmup` steps, times
`--steps` more (median per phase), then profiles one further step, each phase (sample, prepare, update)
in its own profiler session. Variants: "modules" (the decoder calls the model's modules under
autocast), "fused" (the decode-dtype weight copy with q/k/v and gate/up fused), "fused+compile" (its
layer functions compiled). Kernel classes are read from kernel names (gemm, attention, elementwise,
reduction, copy/index, triton (compiled), other).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from benchmarks.w1_benchmark import COMPILE_CHOICES, build  # noqa: E402
from examples.common import example_parser  # noqa: E402
from lmgym.policies.decoding.fast import FastDecoder  # noqa: E402

VARIANTS = {"modules": {"fused_weights": False}, "fused": {"fused_weights": True},
            "fused+compile": {"fused_weights": True, "compile_layers": True}}
CLASSES = (("triton", ("triton",)), ("attention", ("fmha", "flash", "attention", "attn")),
           ("gemm", ("gemm", "xmma", "cutlass", "nvjet", "cublas", "sm90_", "splitk")),
           ("copy/index", ("catarray", "index", "gather", "scatter", "copy", "memcpy", "memset")),
           ("reduction", ("reduce", "softmax", "norm")), ("elementwise", ("elementwise",)))


def kernel_class(name: str) -> str:
    low = name.lower()
    return next((cls for cls, keys in CLASSES if any(k in low for k in keys)), "other")


def summarize(prof, wall: float, top: int = 12) -> dict:
    """Kernel count, summed kernel time, classes and the top kernels of one profiler session."""
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    by_name, by_class = defaultdict(lambda: [0, 0.0]), defaultdict(lambda: [0, 0.0])
    for e in kernels:
        t = e.device_time / 1e6  # seconds
        for table, key in ((by_name, e.name), (by_class, kernel_class(e.name))):
            table[key][0] += 1
            table[key][1] += t
    gpu = sum(v[1] for v in by_class.values())
    cpu_ops = sorted((e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CPU),
                     key=lambda e: -e.self_cpu_time_total)[:top]
    syncs = sum(e.count for e in prof.key_averages() if "Synchronize" in e.key or e.key == "aten::item"
                or e.key == "aten::_local_scalar_dense")
    return {"wall_s": wall, "gpu_kernel_s": gpu, "kernels": len(kernels), "host_syncs": syncs,
            "cpu_top": [{"name": e.key[:60], "count": e.count, "self_s": e.self_cpu_time_total / 1e6} for e in cpu_ops],
            "classes": {k: {"count": c, "s": s} for k, (c, s) in sorted(by_class.items(), key=lambda i: -i[1][1])},
            "top": [{"name": n[:90], "count": c, "s": s}
                    for n, (c, s) in sorted(by_name.items(), key=lambda i: -i[1][1])[:top]]}


def profiled(method, report: dict, phase: str):
    """`method` run inside its own profiler session, its summary stored under report[phase]."""
    def run(*args, **kwargs):
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            start = time.perf_counter()
            out = method(*args, **kwargs)
            torch.cuda.synchronize()
            wall = time.perf_counter() - start
        report[phase] = summarize(prof, wall)
        return out
    return run


def run_variant(name: str, args) -> dict:
    algo = build(args.gsm8k, args.warmup + args.steps + 1, args.micro_batch, True, 0, "ddp", 16, 8, 256,
                 COMPILE_CHOICES[args.torch_compile])
    policy = algo.policy
    policy.fast_decoder = FastDecoder(policy.model, **VARIANTS[name])
    steps = Counter()
    step = policy.fast_decoder._step
    policy.fast_decoder._step = lambda *a: (steps.update(["decode"]), step(*a))[1]
    rows = []
    for i in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        metrics = algo.train_iteration()
        algo.iteration += 1
        torch.cuda.synchronize()
        rows.append({"step_s": time.perf_counter() - start, **{k: metrics[k] for k in
                     ("time_sample", "time_prepare", "time_update", "completion_length")}})
        print(name, i, json.dumps(rows[-1]), flush=True)
    timed = rows[args.warmup:]
    report = {"variant": name, "median": {k: statistics.median(r[k] for r in timed) for k in timed[0]},
              "compile_s": rows[0]["time_sample"] - statistics.median(r["time_sample"] for r in timed)}
    phases: dict = {}
    algo.collect = profiled(algo.collect, phases, "sample")
    algo.prepare = profiled(algo.prepare, phases, "prepare")
    algo.update = profiled(algo.update, phases, "update")
    steps.clear()
    algo.train_iteration()
    phases["decode_steps"] = steps["decode"]
    phases["kernels_per_decode_step"] = phases["sample"]["kernels"] / max(steps["decode"], 1)
    phases["gpu_ms_per_decode_step"] = 1e3 * phases["sample"]["gpu_kernel_s"] / max(steps["decode"], 1)
    phases["wall_ms_per_decode_step"] = 1e3 * phases["sample"]["wall_s"] / max(steps["decode"], 1)
    report["profile"] = phases
    report["peak_mem_gb"] = torch.cuda.max_memory_allocated() / 1e9
    del algo, policy
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return report


def main() -> None:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gsm8k", required=True)
    parser.add_argument("--variants", nargs="*", default=["fused+compile"], choices=list(VARIANTS))
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--micro-batch", type=int, default=32)
    parser.add_argument("--torch-compile", choices=sorted(COMPILE_CHOICES), default="auto",
                        help="GRPOConfig.torch_compile (auto: its default, on CUDA)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    reports = []
    for name in args.variants:
        reports.append(run_variant(name, args))
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "variants": reports}, indent=1))
        short = {k: reports[-1]["profile"][k] for k in ("kernels_per_decode_step", "gpu_ms_per_decode_step",
                                                          "wall_ms_per_decode_step")}
        print("VARIANT", name, json.dumps(reports[-1]["median"]), json.dumps(short), flush=True)
        for phase in ("sample", "prepare", "update"):
            p = reports[-1]["profile"][phase]
            print(f"  {phase}: wall {p['wall_s']:.3f} s, kernels {p['gpu_kernel_s']:.3f} s in {p['kernels']}",
                  json.dumps({k: round(v["s"], 3) for k, v in p["classes"].items()}), flush=True)
            for t in p["top"][:6]:
                print(f"    {t['s']:.3f} s {t['count']:6d}x {t['name']}", flush=True)
            print(f"    host syncs {p['host_syncs']}; CPU self time:", ", ".join(
                f"{c['name']} {c['self_s']:.3f} s/{c['count']}" for c in p["cpu_top"][:8]), flush=True)


if __name__ == "__main__":
    main()
