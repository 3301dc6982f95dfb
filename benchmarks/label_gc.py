"""Garbage collections while labelling, on the host alone: `policy_labels` with a scripted policy (no model) over
W4a's batches (64 problems of Arithmetic level 3, 8 samples, k = 4, up to 8 steps), one call a batch as
benchmarks/w4_workloads.py makes them, in a process that already holds --ballast tracked objects (standing for
the model process). Every full (generation-2) collection is recorded: its seconds, whether the heap was frozen,
and how many objects the oldest generation held (what it walks).

    python benchmarks/label_gc.py                        # the library's spacing of full collections while labelling
    python benchmarks/label_gc.py --spacing 10           # CPython's default threshold instead (the earlier code)

The scripted policy answers a step with a random sum line or, three times in ten, a random final answer; the
figures are the host's only (no decoding), so they compare collection settings, not workloads.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lmgym.envs import make  # noqa: E402
from lmgym.policies import build_tiny_tokenizer  # noqa: E402
from lmgym.policies.base import Policy  # noqa: E402
from lmgym.policies.decoding.generation import Generation  # noqa: E402
from lmgym.traindata.step_data import PolicyLabelConfig, policy_labels  # noqa: E402

labels_module = importlib.import_module("lmgym.traindata.step_data.policy_labels")  # its function shadows it


class RandomSteps(Policy):
    """A step is a random sum line, or (three times in ten) a random final answer."""

    def __init__(self, seed: int = 0):
        self.tokenizer, self.rng = build_tiny_tokenizer(), random.Random(seed)

    def format_prompt(self, observation: str) -> list[int]:
        return self.encode_text(observation)

    def sample(self, prompts, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, stop=None, generator=None):
        out = []
        for ids in prompts:
            r = self.rng
            text = (f"#### {r.randint(0, 99)}\n" if r.random() < 0.3
                    else f"Compute {r.randint(0, 99)} + {r.randint(0, 99)} = {r.randint(0, 199)}.\n")
            completion = self.encode_text(text)
            out.append([Generation(list(ids), completion, [0.0] * len(completion), text, "stop")])
        return out

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0):
        raise AssertionError("labelling never scores tokens")


class FullCollections:
    """gc callback: each generation-2 collection's seconds, the frozen count and the oldest generation's size."""

    def __init__(self):
        self.records: list[dict] = []
        self._start: dict = {}

    def __call__(self, phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":  # the counts walk the heap: taken before the clock starts
            self._start = {"frozen": gc.get_freeze_count(), "oldest": len(gc.get_objects(2)),
                           "t": time.perf_counter()}
        else:
            self.records.append({"seconds": time.perf_counter() - self._start["t"], "frozen": self._start["frozen"],
                                 "oldest_generation": self._start["oldest"], "collected": info["collected"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=6, help="64-problem batches, one policy_labels call each")
    parser.add_argument("--ballast", type=int, default=2_000_000, help="tracked objects held before labelling")
    parser.add_argument("--spacing", type=int, default=None,
                        help="young collections between full ones inside the labelling (default: the library's)")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    if args.spacing is not None:
        labels_module.FULL_COLLECTION_SPACING = args.spacing
    ballast = [[i] for i in range(args.ballast)]
    env = make("Arithmetic-v0", level=3, split="train", mode="stepwise", max_steps=8)
    policy, watch = RandomSteps(), FullCollections()
    gc.callbacks.append(watch)
    batches = []
    try:
        for b in range(args.batches):
            start, seen = time.perf_counter(), len(watch.records)
            config = PolicyLabelConfig(problems=64, first_problem=64 * b, samples_per_problem=8, rollouts=4,
                                       max_new_tokens=64, batch_size=64)
            stats = policy_labels(policy, env, config, sample_key=0).stats
            batches.append({"seconds": time.perf_counter() - start, "episodes": stats["samples"] + stats["rollouts"],
                            "full_collections": watch.records[seen:]})
    finally:
        gc.callbacks.remove(watch)
    left = gc.collect()
    result = {"spacing": labels_module.FULL_COLLECTION_SPACING, "threshold": gc.get_threshold(),
              "ballast": len(ballast), "python": sys.version.split()[0], "batches": batches,
              "full_collections": len(watch.records), "full_seconds": sum(r["seconds"] for r in watch.records),
              "labelling_seconds": sum(b["seconds"] for b in batches), "garbage_found_after": left}
    print(f"spacing {result['spacing']}: {result['full_collections']} full collections in {len(batches)} batches, "
          f"{result['full_seconds']:.2f} s of {result['labelling_seconds']:.1f} s labelling; oldest generation "
          f"{[r['oldest_generation'] for r in watch.records]}; heap frozen during them: "
          f"{[r['frozen'] > labels_module.INTERPRETER_FROZEN for r in watch.records]} (objects the interpreter froze "
          f"itself: {labels_module.INTERPRETER_FROZEN}); cyclic garbage found after: {left}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
