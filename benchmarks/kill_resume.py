"""Random-timed kill trials: a tiny seeded GRPO run (CPU) is SIGKILLed at random moments and resumed
until it completes; each trial is compared with an uninterrupted run (parameters, optimizer state,
metrics.jsonl). Prints trials run, kills delivered, resumes, iterations lost and any mismatch.

    python benchmarks/kill_resume.py --trials 30 --seed 0
    python benchmarks/kill_resume.py --trials 4 --device cuda   # on a GPU: the trainer's CUDA generator resumed too

On a GPU the parent never starts CUDA (each forked attempt does, with torch's deterministic kernels), a second
uninterrupted run says whether two runs agree at all, and random kill times are drawn from its (warm) span
between its first checkpoint and its end (before it, an attempt is mostly starting CUDA: a kill there resumes
nothing).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tests.kill_harness as harness  # noqa: E402
from examples.common import example_parser  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=10, help="iterations of the run (one checkpoint each)")
    parser.add_argument("--max_kills", type=int, default=4, help="kills per trial at most (then it runs to the end)")
    parser.add_argument("--workdir", default=None, help="run folders (default: a temporary folder, kept)")
    parser.add_argument("--device", default="cpu", help="where the run trains: cpu (default) or cuda")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="kill-resume-"))
    harness.ITERATIONS = args.iterations  # read by the forked training attempts
    harness.DEVICE = args.device
    s = harness.random_trials(workdir, args.trials, args.seed, args.max_kills)
    print(f"trials run: {s['trials']}")
    print(f"kills delivered: {s['kills']} ({s['kills_before_the_end']} before the last checkpoint was complete)")
    print(f"resumes: {s['resumes']}")
    print(f"iterations lost: {s['iterations_lost']}")
    print(f"mismatches with the uninterrupted run: {len(s['mismatches'])}")
    for m in s["mismatches"]:
        print(f"  trial {m['trial']}: {'; '.join(m['differences'])}")
    if s["repeat_differences"] is not None:
        print(f"a second uninterrupted run: {'; '.join(s['repeat_differences']) or 'equal'} (its first checkpoint "
              f"after {s['first_checkpoint_seconds']} s)")
    print(f"(uninterrupted run: {s['reference_seconds']} s; run folders in {workdir})")
    if not s["kills"]:
        print("no kill landed before its attempt finished: nothing was shown (more --trials, or a longer run)")
    return 1 if s["mismatches"] or s["iterations_lost"] or not s["kills"] else 0


if __name__ == "__main__":
    sys.exit(main())
