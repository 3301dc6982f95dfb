"""GPU memory of sampling and scoring long padded prompts: the fast decoder, the plain loop, a training pass.

    python benchmarks/prefill_memory.py [--batch 32] [--context 4096] [--new-tokens 64] [--train-batch 4]

A model of the embedded model's shape (SmolLM2-135M: 30 layers, hidden 576, 9 query and 3 key/value heads,
49,152 tokens) with random weights samples `batch` prompts of `context` * 3/4 to `context` tokens (padded
rows), then scores `train-batch` rows of `context` tokens (right-padded, completions of a quarter of it) with
gradients, as a training pass does. One JSON line per phase: the peak memory allocated above what was
allocated before the phase (GiB), its seconds and, for sampling, completion tokens per second (second call:
the fast decoder's first compiles and captures). Issue 23: before the mask-free prefill, the fast decoder's
prefill built a [batch, 1, prompt, length] mask and bias and fell back to the math kernel (grouped-query
attention with a mask), holding every head's scores.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from examples.common import example_parser  # noqa: E402
from lmgym.policies import HFPolicy, build_tiny_tokenizer  # noqa: E402
from lmgym.policies.decoding.fast import FastDecoder  # noqa: E402
from lmgym.policies.decoding.generation import decode  # noqa: E402

GiB = 1 << 30


def _model():
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_tiny_tokenizer()
    config = LlamaConfig(vocab_size=49_152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).cuda().eval(), tok


def _measure(name: str, run, tokens: int = 0) -> None:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    try:
        run()
        torch.cuda.synchronize()
        row = {"phase": name, "peak_gib": round((torch.cuda.max_memory_allocated() - base) / GiB, 3),
               "seconds": round(time.perf_counter() - start, 3)}
        if tokens:
            row["tokens_per_second"] = round(tokens / row["seconds"], 1)
    except torch.OutOfMemoryError as err:
        row = {"phase": name, "out_of_memory": str(err).splitlines()[0][:160]}
        torch.cuda.empty_cache()
    print("MEMORY " + json.dumps(row), flush=True)


def main() -> None:
    parser = example_parser()
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--train-batch", type=int, default=4)
    parser.add_argument("--skip-plain", action="store_true")
    args = parser.parse_args()
    model, tok = _model()
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(args.context * 3 // 4, args.context + 1, (args.batch,), generator=g).tolist()
    prompts = [torch.randint(3, 100, (n,), generator=g).tolist() for n in lengths]
    decoder = FastDecoder(model)
    new = args.batch * args.new_tokens

    def fast():
        decoder.generate(tok, prompts, args.new_tokens, 1.0, generator=torch.Generator("cuda").manual_seed(0))

    _measure("fast decoder, first call (compiles, captures)", fast)
    _measure("fast decoder", fast, new)
    decoder._buckets.clear()
    if not args.skip_plain:
        def plain():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                decode(model, tok, prompts, args.new_tokens, 1.0, generator=torch.Generator("cuda").manual_seed(0))

        _measure("plain loop", plain, new)
        _measure("plain loop", plain, new)
    policy = HFPolicy(model, tok, device="cuda", fast_decode=False)
    width, completion = args.context, args.context // 4
    ids = torch.randint(3, 100, (args.train_batch, width), generator=g).cuda()
    mask = torch.zeros_like(ids)
    for i in range(args.train_batch):
        mask[i, :width - 64 * i] = 1
    positions = (width - completion + torch.arange(completion)).expand(args.train_batch, -1).cuda()

    def train():
        logprobs, entropy = policy.token_logprobs(ids, mask, positions)
        logprobs.sum().backward()
        model.zero_grad(set_to_none=True)

    _measure("training pass (forward + backward)", train)
    _measure("training pass (forward + backward)", train, args.train_batch * completion)


if __name__ == "__main__":
    main()
