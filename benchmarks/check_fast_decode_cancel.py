"""GPU check that the fast decoder (CUDA graphs) ends the rows a `cancelled_rows` hook names at its next host
sync and leaves the other rows' tokens unchanged: tests/test_fast_decode.py's CPU case, on a GPU, fp32 and bf16.

    python benchmarks/check_fast_decode_cancel.py

2026-11-27, one H100: rows 1 and 4 of 6 cut at 8 of 48 tokens (the second sync of 4 steps), the other rows
token-identical to an uncancelled run, in fp32 and bf16, with CUDA graphs on.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from lmgym.policies import build_tiny_model, build_tiny_tokenizer  # noqa: E402
from lmgym.policies.decoding.fast import FastDecoder  # noqa: E402

CANCELLED = (1, 4)


def check(dtype: torch.dtype, rows: int = 6, new_tokens: int = 48, sync_every: int = 4) -> None:
    """Decode `rows` prompts greedily twice, the second time cancelling CANCELLED at the second sync."""
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=0).to("cuda", dtype).eval()
    prompts = [tok(f"question {i}: " + "x" * (i % 7))["input_ids"] for i in range(rows)]
    decoder = FastDecoder(model, sync_every=sync_every)
    whole = decoder.generate(tok, prompts, new_tokens, temperature=0.0)
    checks = []

    def cancelled_rows() -> list[int]:
        checks.append(1)
        return list(CANCELLED) if len(checks) >= 2 else []

    cut = decoder.generate(tok, prompts, new_tokens, temperature=0.0, cancelled_rows=cancelled_rows)
    for r in range(rows):
        if r in CANCELLED:
            assert cut[r].finish_reason == "cancelled", (r, cut[r].finish_reason)
            assert cut[r].completion_ids == whole[r].completion_ids[:2 * sync_every], r
        else:
            assert cut[r].completion_ids == whole[r].completion_ids, r
    print(f"{dtype}: ok, lengths {[len(g.completion_ids) for g in cut]} of {[len(g.completion_ids) for g in whole]}, "
          f"CUDA graphs {decoder.use_graphs}")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("check_fast_decode_cancel.py needs a GPU")
    for dtype in (torch.float32, torch.bfloat16):
        check(dtype)
