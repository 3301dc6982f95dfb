"""Micro-batches of `micro_batch_size` trajectories against `max_tokens_per_microbatch` on one long-tailed batch.

A fixed batch of GRPO trajectories with a long tail of completion lengths (random token ids, so no sampling:
the workload is the same for every setting) goes through the reference pass (`prepare`, beta > 0) and one
optimizer step (`update_step`) under each setting, each from the same starting weights. Reports per setting:
micro-batches per pass, padded and real tokens (padding waste), seconds of the reference pass and of the
update (median of --repeats after the first, which includes compilation), peak GPU memory of each, the first
step's loss (equal across settings up to bf16 rounding), or "oom".

    python benchmarks/token_budget.py --lengths 256:40,1024:16,4096:8 --micro-batch 32 16 8 \
        --budget 16384 32768 65536 --out token_budget.json

A smoke run on the CPU: `--model tiny --lengths 8:6,32:2 --prompt-len 8 --micro-batch 4 --budget 64 --repeats 1`.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from examples.common import example_parser  # noqa: E402
from lmgym.algorithms import GRPO, GRPOConfig  # noqa: E402
from lmgym.algorithms.base import padded_length  # noqa: E402
from lmgym.buffers import Trajectory  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy, build_tiny_model, build_tiny_tokenizer  # noqa: E402


def parse_lengths(spec: str) -> list[int]:
    """"256:40,4096:8" -> 40 completions of 256 tokens and 8 of 4096."""
    out = []
    for part in spec.split(","):
        length, count = part.split(":")
        out += [int(length)] * int(count)
    return out


def batch(lengths: list[int], prompt_len: int, vocab: int, group: int, seed: int) -> list[Trajectory]:
    """Trajectories of random tokens with the given completion lengths, shuffled into groups of `group`."""
    rng = np.random.default_rng(seed)
    lengths = [int(n) for n in rng.permutation(lengths)]
    return [Trajectory(rng.integers(100, vocab, prompt_len).tolist(), rng.integers(100, vocab, n).tolist(),
                       [-3.0] * n, [1] * n, reward=float(rng.integers(0, 2)), group_id=i // group)
            for i, n in enumerate(lengths)]


def policy(model: str) -> HFPolicy:
    if model == "tiny":
        tok = build_tiny_tokenizer()
        return HFPolicy(build_tiny_model(tok, seed=0), tok)
    return HFPolicy(EMBEDDED_MODEL if model == "embedded" else model)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def peak_gb() -> float | None:
    return torch.cuda.max_memory_allocated() / 1e9 if torch.cuda.is_available() else None


def reset_peak() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def measure(args, micro_batch: int, budget: int, trajectories: list[Trajectory]) -> dict:
    """The reference pass and one optimizer step under one setting, `args.repeats` times."""
    algo = GRPO(policy(args.model), make("Arithmetic-v0", level=0, split="train"), GRPOConfig(
        micro_batch_size=micro_batch, max_tokens_per_microbatch=budget, kl_coeff=0.04, learning_rate=1e-6,
        samples_per_prompt=args.group, progress=False, output_dir="/tmp/token_budget_run"))
    groups = algo.micro_batches(trajectories)
    row = {"micro_batch_size": micro_batch, "max_tokens_per_microbatch": budget, "micro_batches": len(groups),
           "padded_tokens": sum(len(g) * max(padded_length(t) for t in g) for g in groups),
           "real_tokens": sum(padded_length(t) for t in trajectories),
           "largest_micro_batch_tokens": max(len(g) * max(padded_length(t) for t in g) for g in groups)}
    times: dict[str, list[float]] = {"reference": [], "update": []}
    peaks: dict[str, float | None] = {}
    try:
        for repeat in range(args.repeats):
            for phase in ("reference", "update"):
                reset_peak()
                start = time.perf_counter()
                result = (algo.prepare if phase == "reference" else algo.update_step)(trajectories)
                sync()
                times[phase].append(time.perf_counter() - start)
                peaks[phase] = max(peaks.get(phase) or 0.0, peak_gb() or 0.0) if torch.cuda.is_available() else None
                if phase == "update" and repeat == 0:
                    row["first_loss"] = result["loss"]
    except torch.OutOfMemoryError as err:
        row["oom"] = str(err).splitlines()[0]
    del algo
    reset_peak()
    for phase, values in times.items():
        kept = values[1:] or values
        row[f"{phase}_s"] = statistics.median(kept) if kept else None
        row[f"{phase}_peak_gb"] = peaks.get(phase)
    return row


def main() -> None:
    parser = example_parser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded", help="embedded | tiny | a model folder")
    parser.add_argument("--lengths", default="256:40,1024:16,4096:8", help="completion length:count, ...")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--group", type=int, default=8, help="trajectories per GRPO group")
    parser.add_argument("--micro-batch", type=int, nargs="*", default=[32, 16, 8])
    parser.add_argument("--budget", type=int, nargs="*", default=[16384, 32768, 65536])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    vocab = len(policy(args.model).tokenizer)
    trajectories = batch(parse_lengths(args.lengths), args.prompt_len, vocab, args.group, args.seed)
    settings = [(m, 0) for m in args.micro_batch] + [(args.micro_batch[0] if args.micro_batch else 32, b)
                                                     for b in args.budget]
    rows = []
    for micro_batch, budget in settings:
        rows.append(measure(args, micro_batch, budget, trajectories))
        print(json.dumps(rows[-1]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
