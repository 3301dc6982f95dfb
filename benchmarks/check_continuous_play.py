"""GPU check of continuous play (policies/decoding/continuous.py) against round-by-round `advance` on the embedded
model, stepwise Arithmetic-v0 level 3, 64 tokens a step, T = 0.8, keyed noise: tokens/s both ways, and how many
first actions and whole episodes agree (in bf16 a near-tie may break differently; on the CPU, in float32, the
tests require the same tokens).

    python benchmarks/check_continuous_play.py
"""
import time

import torch

from lmgym.envs import make
from lmgym.episodes import EpisodeEngine, SamplingSettings
from lmgym.policies import EMBEDDED_MODEL, HFPolicy


def run(engine: EpisodeEngine, continuous: bool, problems: int, group: int, key: int = 5):
    """(branches, calls or rounds, seconds, sampled tokens) of `problems` x `group` episodes."""
    branches = engine.start([{"options": {"index": i}} for i in range(problems)], group)
    torch.cuda.synchronize()
    start = time.perf_counter()
    if continuous:
        calls = engine.play(branches, sample_key=key)
    else:
        calls = 0
        while engine.live(branches):
            engine.advance(branches, sample_key=key)
            calls += 1
    torch.cuda.synchronize()
    return branches, calls, time.perf_counter() - start, sum(sum(b.mask) for b in branches)


def main() -> None:
    policy = HFPolicy(EMBEDDED_MODEL, fast_decode=True)
    env = make("Arithmetic-v0", mode="stepwise", level=3, max_steps=8)
    engine = EpisodeEngine(env, policy, SamplingSettings(max_new_tokens=64, temperature=0.8))
    for problems, group in [(8, 8), (64, 8), (128, 16)]:
        for continuous in (False, True):
            run(engine, continuous, 4, 4, key=99)  # warm-up: graphs of both paths
        a, calls, seconds_a, tokens_a = run(engine, True, problems, group)
        b, rounds, seconds_b, tokens_b = run(engine, False, problems, group)
        first = sum(x.actions[0].text == y.actions[0].text for x, y in zip(a, b))
        whole = sum(x.ids == y.ids for x, y in zip(a, b))
        print(f"{problems}x{group}: continuous {tokens_a} tokens in {seconds_a:.2f} s = {tokens_a / seconds_a:.0f} "
              f"tok/s, {calls} calls | rounds {tokens_b} tokens in {seconds_b:.2f} s = {tokens_b / seconds_b:.0f} "
              f"tok/s, {rounds} rounds | first action equal {first}/{len(a)}, whole episode equal {whole}/{len(a)}; "
              f"right {sum(x.outcome.correct for x in a)} / {sum(y.outcome.correct for y in b)}", flush=True)
    print("decoder stats", policy.fast_decoder.stats, flush=True)


if __name__ == "__main__":
    main()
