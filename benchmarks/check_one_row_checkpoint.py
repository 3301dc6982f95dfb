"""One-row training passes of compiled, checkpointed layers on CUDA: the case that raised CheckpointError (issue 35).

    python benchmarks/check_one_row_checkpoint.py                  # the embedded model, LoRA, as the RAG agent trains
    python benchmarks/check_one_row_checkpoint.py --without_fix    # the recomputation free to pick cuDNN: should fail

A one-row micro-batch of a compiled layer runs uncompiled under `torch.utils.checkpoint` (policies/compiled_layers.py,
RowTiering). Its forward runs inside `variable_length_attention` (no cuDNN attention), its backward outside; before
`padded_passes.same_attention_kernels`, the recomputation could pick cuDNN and save tensors of other shapes (on an
H200: a [1, 9, 880] log-sum-exp recomputed as [1, 9, 880, 1]). This runs two wide passes (the layers compile), then
one-row passes of several lengths, each forward and backward, and prints OK or the error's first line per length.
"""
from __future__ import annotations

import argparse
import contextlib
import sys

import torch

from lmgym.policies import HFPolicy, LoraSettings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--lengths", default="880,600,1200", help="one-row lengths, comma-separated")
    parser.add_argument("--without_fix", action="store_true", help="recompute without the forward's kernel flags")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs CUDA (cuDNN attention is what the recomputation picked)")
        return 2
    if args.without_fix:
        import lmgym.policies.compiled_layers as compiled_layers
        import lmgym.policies.padded_passes as padded_passes

        def free():
            return contextlib.nullcontext(), contextlib.nullcontext()

        padded_passes.same_attention_kernels = compiled_layers.same_attention_kernels = free
    policy = HFPolicy(args.model, lora=LoraSettings(r=16, alpha=32), gradient_checkpointing=True, device="cuda")
    print("compiled layers:", policy.compile_layers())
    generator = torch.Generator().manual_seed(0)

    def rows(count: int, length: int):
        ids = torch.randint(10, min(1000, len(policy.tokenizer)), (count, length), generator=generator).cuda()
        return ids, torch.ones_like(ids), length - min(64, length // 2)  # the last 64 tokens: the completion

    def train_pass(batch) -> str:
        policy.model.train()
        policy.model.zero_grad()
        try:
            logprobs, _ = policy.token_logprobs(*batch)
            logprobs.float().sum().backward()
            return "OK"
        except Exception as err:  # noqa: BLE001 - the report is the point
            return f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"

    failed = 0
    for length in (512, 704):
        print(f"2 rows x {length}: {train_pass(rows(2, length))}")
    for length in map(int, args.lengths.split(",")):
        result = train_pass(rows(1, length))
        failed += result != "OK"
        print(f"1 row x {length}: {result}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
