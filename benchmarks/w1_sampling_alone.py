"""W1's sampling alone: 16 GSM8K prompts x 8 samples, 256 new tokens, T = 1, four calls on the fast decoder of
whichever lmgym is on PYTHONPATH (with shared prefills off too, where the tree has them): seconds per call,
buckets, peak memory. Run it with two trees on PYTHONPATH to tell the decoder's speed from the trainer's.

    PYTHONPATH=<tree> python benchmarks/w1_sampling_alone.py <gsm8k train.jsonl>
"""
import inspect
import sys
import time

import torch

from lmgym.envs import make
from lmgym.policies import EMBEDDED_MODEL, HFPolicy
from lmgym.policies.decoding.fast import FastDecoder

SYSTEM_PROMPT = "Solve the math word problem step by step. End with '#### <number>'."  # w1_benchmark.py's


def main(gsm8k: str) -> None:
    policy = HFPolicy(EMBEDDED_MODEL, system_prompt=SYSTEM_PROMPT, fast_decode=True)
    env = make("GSM8K-v0", data_path=gsm8k, instruction="")
    prompts = []
    for i in range(16):
        observation, _ = env.reset(options={"index": i})
        prompts += [policy.format_prompt(observation)] * 8
    print("prompt lengths", min(map(len, prompts)), max(map(len, prompts)))
    variants = {"default": {}}
    if "share_prefill" in inspect.signature(FastDecoder).parameters:
        variants["no_share"] = {"share_prefill": False}
    for name, settings in variants.items():
        decoder = FastDecoder(policy.model, **settings)
        torch.cuda.reset_peak_memory_stats()
        seconds = []
        for rep in range(4):
            torch.cuda.synchronize()
            start = time.perf_counter()
            with policy.autocast():
                out = decoder.generate(policy.tokenizer, prompts, 256, 1.0,
                                       generator=torch.Generator(device="cuda").manual_seed(rep))
            torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
        print(name, "s", [round(s, 3) for s in seconds], "tokens", sum(len(g.completion_ids) for g in out),
              "buckets", list(decoder._buckets)[:8], getattr(decoder, "stats", None),
              "peak GB", round(torch.cuda.max_memory_allocated() / 1e9, 2), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
