"""The TRL side of the SFT comparison: TRL's `SFTTrainer` on token rows written by `sft_vs_trl.py`.

    python benchmarks/trl_sft_baseline.py --data rows.jsonl --model MODEL_DIR --out OUT_DIR \
        [--epochs 2 --lr 3e-5 --batch 64 --micro 16 --max-length 1024]

The rows are pre-tokenized ({"input_ids", "labels"}, labels -100 off the completion), so TRL trains on
exactly the tokens and loss mask the toolkit's SFT trains on. TRL's own defaults are kept except what
makes the runs comparable: the same examples per optimizer step, learning rate, epochs and maximum length,
a constant learning rate (the toolkit's schedule), bf16 autocast over float32 weights (the toolkit's
precision on a GPU) and no activation checkpointing (TRL 1.x turns it on by default; the toolkit does
not). No packing: TRL's packing without flash attention lets attention cross examples. It saves the
model in OUT_DIR/model and prints one line `RESULT {json}` (training seconds, peak memory, final loss).
Needs trl (1.16.0 was measured) and datasets beside torch and transformers.
"""
from __future__ import annotations

import argparse
import json
import time

import torch


def main() -> None:
    # toolkit-free script (no lmgym.training.cli.example_parser): no prefix matching of flags at least
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--data", required=True, help="JSONL of {input_ids, labels} rows")
    parser.add_argument("--model", required=True, help="a Hugging Face model folder")
    parser.add_argument("--out", required=True)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--batch", type=int, default=64, help="examples per optimizer step")
    parser.add_argument("--micro", type=int, default=16, help="examples per forward/backward")
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.batch % args.micro:
        raise SystemExit(f"--batch ({args.batch}) must be a multiple of --micro ({args.micro})")

    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    rows = [json.loads(line) for line in open(args.data)]
    dataset = Dataset.from_list(rows)
    gpu = torch.cuda.is_available()
    config = SFTConfig(
        output_dir=f"{args.out}/trl_run", per_device_train_batch_size=args.micro,
        gradient_accumulation_steps=args.batch // args.micro, learning_rate=args.lr, lr_scheduler_type="constant",
        warmup_steps=0, num_train_epochs=args.epochs, max_length=args.max_length, packing=False,
        gradient_checkpointing=False, bf16=gpu, use_cpu=not gpu, report_to="none", save_strategy="no",
        logging_steps=10, seed=args.seed, dataloader_num_workers=0)
    trainer = SFTTrainer(model=args.model, args=config, train_dataset=dataset,
                         processing_class=AutoTokenizer.from_pretrained(args.model))
    if gpu:
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
    start = time.perf_counter()
    trainer.train()
    if gpu:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    trainer.save_model(f"{args.out}/model")
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    print("RESULT " + json.dumps({
        "trainer": "trl.SFTTrainer", "trl": __import__("trl").__version__, "train_seconds": seconds,
        "optimizer_steps": trainer.state.global_step, "examples": len(rows),
        "trained_tokens_per_epoch": sum(sum(1 for t in r["labels"] if t != -100) for r in rows),
        "loss_first_last": [losses[0], losses[-1]] if losses else None,
        "peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9 if gpu else None}))


if __name__ == "__main__":
    main()
