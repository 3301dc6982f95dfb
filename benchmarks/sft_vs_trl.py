"""SFT against TRL's `SFTTrainer`: the same GSM8K solutions, tokens, loss mask, epochs and learning rate.

    python benchmarks/sft_vs_trl.py --gsm8k ../shared/data/gsm8k/train.jsonl --out results/sft_vs_trl \
        --trl-script benchmarks/trl_sft_baseline.py

The last --holdout rows of the file are held back (never trained on); the others' solutions are the
completions of the GSM8K env's prompts (`gsm8k_sft_examples`, single mode). The toolkit's `SFT` encodes
them once; the same token rows (ids, loss on completion tokens only) are written to JSONL and TRL trains
on exactly those in a subprocess (`trl_sft_baseline.py`). Both: --epochs over the examples, --batch
examples per optimizer step, learning rate --lr held constant, bf16 autocast over float32 weights. The
toolkit packs examples into --max-length rows (attention never crossing examples); TRL pads each example
(its packing needs flash attention to keep examples apart).

Both trained models are then measured by the same code: the held-out NLL per completion token and greedy
accuracy on --eval-episodes held-back problems (--max-new-tokens each). Written: OUT/sft_vs_trl.md and
.json (also printed). --small shrinks everything for a CPU smoke run.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from examples.common import example_parser  # noqa: E402
from lmgym.algorithms import SFT, SFTConfig  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.evaluation import evaluate  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402
from lmgym.policies.loading.models import resolve_model_path  # noqa: E402
from lmgym.traindata.sft_data import gsm8k_sft_examples  # noqa: E402


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def measure(policy, trainer: SFT, env, args) -> dict:
    """Held-out NLL per completion token and greedy accuracy, by the same code for every model."""
    loss = trainer.evaluate()["loss"]
    result = evaluate(policy, env, episodes=args.eval_episodes, max_new_tokens=args.max_new_tokens,
                      batch_prompts=args.eval_batch)
    return {"held_out_loss": loss, "accuracy": result["accuracy"], "mean_length": result.get("mean_length")}


def token_rows(trainer: SFT) -> list[dict]:
    """The toolkit's encoded training examples as TRL rows: labels -100 where the weight is 0."""
    return [{"input_ids": e.ids, "labels": [i if w else -100 for i, w in zip(e.ids, e.weights)]}
            for e in trainer.examples]


def run_trl(args, rows_path: Path, model_dir: str) -> dict:
    command = [sys.executable, args.trl_script, "--data", str(rows_path), "--model", model_dir,
               "--out", str(Path(args.out) / "trl"), "--epochs", str(args.epochs), "--lr", str(args.lr),
               "--batch", str(args.batch), "--micro", str(args.trl_micro), "--max-length", str(args.max_length),
               "--seed", str(args.seed)]
    print("+ " + " ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"TRL baseline failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    line = next(out for out in done.stdout.splitlines() if out.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def main() -> None:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gsm8k", required=True, help="GSM8K train JSONL")
    parser.add_argument("--out", required=True, help="folder for the models, rows and the table")
    parser.add_argument("--trl-script", default=None, help="trl_sft_baseline.py (None: the toolkit alone)")
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--holdout", type=int, default=500)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--batch", type=int, default=64, help="examples per optimizer step (both)")
    parser.add_argument("--micro", type=int, default=16, help="toolkit: packed rows per forward/backward")
    parser.add_argument("--trl-micro", type=int, default=16, help="TRL: examples per forward/backward")
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--eval-episodes", type=int, default=500)
    parser.add_argument("--eval-batch", type=int, default=128)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--small", action="store_true", help="a CPU smoke run: 64 rows, 4 evaluated")
    args = parser.parse_args()
    if args.small:
        args.holdout, args.eval_episodes, args.max_new_tokens = 8, 4, 16
        args.batch, args.micro, args.trl_micro = 8, 4, 4
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    rows = make("GSM8K-v0", data_path=args.gsm8k, split="train").num_problems
    stop = 64 if args.small else rows
    first_held = stop - args.holdout
    train = gsm8k_sft_examples(args.gsm8k, (0, first_held))
    held = gsm8k_sft_examples(args.gsm8k, (first_held, stop))
    env = make("GSM8K-v0", data_path=args.gsm8k, split="train", subset=(first_held, stop))
    iterations = math.ceil(args.epochs * len(train) / args.batch)
    config = SFTConfig(train_iterations=iterations, examples_per_iteration=args.batch, max_length=args.max_length,
                       micro_batch_size=args.micro, learning_rate=args.lr, eval_at_start=False, eval_every=10**9,
                       save_every=10**9, output_dir=str(out / "toolkit"), progress=False, seed=args.seed)

    policy = HFPolicy(args.model)
    print(f"device={policy.device} train={len(train)} held={len(held)} iterations={iterations}", flush=True)
    trainer = SFT(policy, train, config, held_out=held)
    table = {"base": measure(policy, trainer, env, args)}
    print("base", table["base"], flush=True)
    rows_path = out / "token_rows.jsonl"
    with open(rows_path, "w") as f:
        for row in token_rows(trainer):
            f.write(json.dumps(row) + "\n")
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    sync()
    start = time.perf_counter()
    rows = trainer.train()
    sync()
    seconds = time.perf_counter() - start
    # train() resets torch's peak at each phase and logs the peaks of each (training/phase_memory.py)
    peak = (max([torch.cuda.max_memory_allocated() / 1e9] + [v for r in rows for k, v in r.items()
                                                             if k.startswith("memory_peak_gb")])
            if torch.cuda.is_available() else None)
    trainer.save_model(out / "toolkit" / "model")
    table["toolkit SFT"] = {**measure(policy, trainer, env, args), "train_seconds": seconds, "peak_mem_gb": peak,
                            "optimizer_steps": iterations}
    print("toolkit", table["toolkit SFT"], flush=True)
    system_prompt = policy.system_prompt
    del trainer, policy
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

    if args.trl_script:
        trl = run_trl(args, rows_path, resolve_model_path(args.model) if args.model == EMBEDDED_MODEL else args.model)
        trl_policy = HFPolicy(str(out / "trl" / "model"), system_prompt=system_prompt)
        scorer = SFT(trl_policy, train[:1], config, held_out=held)
        table["TRL SFTTrainer"] = {**measure(trl_policy, scorer, env, args), "train_seconds": trl["train_seconds"],
                                   "peak_mem_gb": trl["peak_mem_gb"], "optimizer_steps": trl["optimizer_steps"],
                                   "trl": trl.get("trl")}
        print("trl", table["TRL SFTTrainer"], flush=True)

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    lines = [f"SFT on {len(train)} GSM8K train solutions, {args.epochs:g} epochs, {args.batch} examples a step, "
             f"lr {args.lr:g} constant; held back: rows {first_held}..{stop - 1} ({len(held)} problems); {device}",
             "", "| model | train s | peak GB | held-out NLL/token | greedy accuracy |", "|---|---|---|---|---|"]
    for name, r in table.items():
        train_s = f"{r['train_seconds']:.1f}" if "train_seconds" in r else "-"
        mem = f"{r['peak_mem_gb']:.1f}" if r.get("peak_mem_gb") else "-"
        lines.append(f"| {name} | {train_s} | {mem} | {r['held_out_loss']:.4f} | {r['accuracy']:.1%} |")
    markdown = "\n".join(lines) + "\n"
    (out / "sft_vs_trl.md").write_text(markdown)
    (out / "sft_vs_trl.json").write_text(json.dumps({"args": vars(args), "device": device, "rows": table}, indent=1))
    print(markdown, end="")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
