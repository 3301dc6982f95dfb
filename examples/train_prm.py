"""Train a process reward model (PRM) on step preferences, offline, and save it as a model folder.

    python examples/train_prm.py                                   # CPU-sized: Arithmetic-v0 levels 3-4
    python examples/train_prm.py --preset gpu --gsm8k_path ../shared/data/gsm8k/train.jsonl \\
        --prm800k_path ../shared/data/prm800k/prm800k_raw_sample.jsonl

Data (each source by its flags; see traindata/step_data):
- gold solutions with corrupted siblings (wrong number, wrong operation, dropped step): Arithmetic-v0
  train problems of --arithmetic_levels, and GSM8K train rows with --gsm8k_path (the last
  --gsm8k_holdout rows are never used: the other GSM8K examples evaluate on them);
- PRM800K's human step ratings with --prm800k_path;
- Math-Shepherd labels from the policy with --shepherd_problems N > 0 (Arithmetic-v0 train problems of
  --shepherd_level; --shepherd_rollouts k rollouts per step).
A slice of the problems (--held_out_fraction) is held out; the PRM (a copy of the policy's backbone with
a scalar head) is trained with PRMTrainer, and the held-out pairwise accuracy (chosen step scored above
the rejected one) is printed before and after. The run folder gets metrics, plot, checkpoints and the
PRM in prm/ (`ProcessRewardModel.from_pretrained`); --save_data keeps the items built as JSONL. Every
PRMConfig field is also a flag.
"""
from __future__ import annotations

import argparse
import random
from collections import Counter
from pathlib import Path

from common import example_parser  # noqa: E402

from lmgym.algorithms import PRMConfig, PRMTrainer  # noqa: E402
from lmgym.buffers.step_pairs import StepPair, save_step_data, split_by_problem  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402
from lmgym.policies.prm import ProcessRewardModel  # noqa: E402
from lmgym.traindata.step_data import (  # noqa: E402
    ShepherdConfig,
    arithmetic_pairs,
    gsm8k_pairs,
    load_prm800k,
    shepherd_data,
)
from lmgym.training.cli import add_config_arguments, config_from_arguments, run_with_clear_errors  # noqa: E402

PRESETS = {
    "cpu": dict(train_iterations=30, pairs_per_iteration=16, micro_batch_size=8, learning_rate=2e-5,
                eval_every=10, eval_at_start=True, output_dir="runs/prm-cpu"),
    "gpu": dict(train_iterations=400, pairs_per_iteration=64, micro_batch_size=32, learning_rate=1e-5,
                eval_every=50, eval_at_start=True, output_dir="runs/prm-gpu"),
}
DATA_PRESETS = {
    "cpu": dict(arithmetic_levels="3,4", arithmetic_problems=100, gsm8k_rows=200, shepherd_problems=0,
                shepherd_rollouts=4, shepherd_solutions=2, shepherd_max_new_tokens=32),
    "gpu": dict(arithmetic_levels="1,2,3,4", arithmetic_problems=1000, gsm8k_rows=0, shepherd_problems=128,
                shepherd_rollouts=8, shepherd_solutions=4, shepherd_max_new_tokens=64),
}


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help="cpu or gpu (default: gpu when CUDA is available)")
    parser.add_argument("--model", default=EMBEDDED_MODEL, help="the policy the PRM starts from (and that samples "
                                                                "Math-Shepherd rollouts): hub name or local path")
    parser.add_argument("--resume", action="store_true", help="continue from the newest complete checkpoint")
    data = parser.add_argument_group("step data (defaults per preset: cpu / gpu)")

    def preset_default(name: str) -> str:
        return f"(default: cpu {DATA_PRESETS['cpu'][name]!r}, gpu {DATA_PRESETS['gpu'][name]!r})"

    data.add_argument("--arithmetic_levels", default=None,
                      help="comma-separated Arithmetic-v0 levels for gold-corruption pairs; '' for none "
                           + preset_default("arithmetic_levels"))
    data.add_argument("--arithmetic_problems", type=int, default=None,
                      help=f"train problems per level {preset_default('arithmetic_problems')}")
    data.add_argument("--gsm8k_path", default=None, help="GSM8K train.jsonl for gold-corruption pairs (default: none)")
    data.add_argument("--gsm8k_rows", type=int, default=None,
                      help=f"GSM8K rows used from the start, 0 = all not held back {preset_default('gsm8k_rows')}")
    data.add_argument("--gsm8k_holdout", type=int, default=500,
                      help="the last rows of the GSM8K file are never used (evaluation data; default 500)")
    data.add_argument("--prm800k_path", default=None, help="a PRM800K JSONL file (default: none)")
    data.add_argument("--shepherd_problems", type=int, default=None,
                      help="Arithmetic-v0 train problems labelled by rollouts, 0 = off "
                           + preset_default("shepherd_problems"))
    data.add_argument("--shepherd_level", type=int, default=3, help="their Arithmetic-v0 level (default 3)")
    data.add_argument("--shepherd_max_steps", type=int, default=8,
                      help="steps per episode of their env (its max_steps; default 8)")
    data.add_argument("--shepherd_rollouts", type=int, default=None,
                      help=f"k rollouts per step prefix {preset_default('shepherd_rollouts')}")
    data.add_argument("--shepherd_solutions", type=int, default=None,
                      help=f"sampled solutions per problem {preset_default('shepherd_solutions')}")
    data.add_argument("--shepherd_max_new_tokens", type=int, default=None,
                      help=f"tokens per sampled step {preset_default('shepherd_max_new_tokens')}")
    data.add_argument("--save_data", default=None,
                      help="also write every item built to this JSONL file (buffers.load_step_data reads it)")
    data.add_argument("--held_out_fraction", type=float, default=0.1,
                      help="fraction of the problems held out for evaluation (default 0.1)")
    data.add_argument("--aggregation", default="min", help="how the saved PRM scores a solution from its "
                                                           "step scores: min | last | product | mean (default min)")
    add_config_arguments(parser, PRMConfig, presets=PRESETS)
    return parser


def main(argv: list[str] | None = None) -> None:
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


def data_settings(args: argparse.Namespace, preset: str) -> argparse.Namespace:
    """The data flags with each unset one taken from the preset; a bad value is one ValueError."""
    values = {name: getattr(args, name) if getattr(args, name) is not None else default
              for name, default in DATA_PRESETS[preset].items()}
    try:
        levels = [int(v) for v in values["arithmetic_levels"].split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--arithmetic_levels must be comma-separated integers, "
                         f"got {values['arithmetic_levels']!r}") from None
    for name in ("arithmetic_problems", "gsm8k_rows", "shepherd_problems"):
        if values[name] < 0:
            raise ValueError(f"--{name} must be >= 0, got {values[name]}")
    if args.gsm8k_holdout < 0:
        raise ValueError(f"--gsm8k_holdout must be >= 0, got {args.gsm8k_holdout}")
    if not (levels and values["arithmetic_problems"]) and not args.gsm8k_path and not args.prm800k_path \
            and not values["shepherd_problems"]:
        raise ValueError("no step data: give --arithmetic_levels, --gsm8k_path, --prm800k_path or --shepherd_problems")
    return argparse.Namespace(**{**vars(args), **values, "levels": levels})


def build_items(data: argparse.Namespace, policy: HFPolicy, seed: int) -> list:
    """Every source's StepPairs and RatedSteps; prints how many each gave."""
    items: list = []
    if data.levels and data.arithmetic_problems:
        items += arithmetic_pairs(data.levels, data.arithmetic_problems, "train", seed)
    if data.gsm8k_path:
        rows = make("GSM8K-v0", data_path=data.gsm8k_path).num_problems
        usable = rows - data.gsm8k_holdout
        if usable < 1:
            raise ValueError(f"--gsm8k_holdout {data.gsm8k_holdout} leaves none of the {rows} GSM8K rows")
        items += gsm8k_pairs(data.gsm8k_path, "train", (0, min(data.gsm8k_rows or usable, usable)), seed)
    if data.prm800k_path:
        items += load_prm800k(data.prm800k_path)
    if data.shepherd_problems:
        env = make("Arithmetic-v0", level=data.shepherd_level, split="train", mode="stepwise",
                   max_steps=data.shepherd_max_steps)
        count = min(data.shepherd_problems, env.num_problems)
        starts = [{"options": {"index": i}} for i in sorted(random.Random(seed).sample(range(env.num_problems), count))]
        config = ShepherdConfig(solutions_per_problem=data.shepherd_solutions, rollouts=data.shepherd_rollouts,
                                max_new_tokens=data.shepherd_max_new_tokens)
        built = shepherd_data(policy, env, starts, config, sample_key=seed)
        print(f"shepherd: {count} problems, {built.tokens} tokens sampled")
        items += built.items
    counts = Counter(f"{item.source} ({'pair' if isinstance(item, StepPair) else 'rated'})" for item in items)
    print("step data: " + ", ".join(f"{name} {n}" for name, n in sorted(counts.items())))
    return items


def run(args: argparse.Namespace) -> None:
    import torch

    preset = args.preset or ("gpu" if torch.cuda.is_available() else "cpu")
    config = config_from_arguments(PRMConfig, args, PRESETS[preset])
    data = data_settings(args, preset)
    policy = HFPolicy(args.model)
    print(f"device={policy.device} preset={preset} model={args.model}")
    items = build_items(data, policy, config.seed)
    if args.save_data:
        save_step_data(args.save_data, items)
        print(f"step data written to {args.save_data}")
    train, held_out = split_by_problem(items, args.held_out_fraction, config.seed)
    print(f"{len(train)} training items, {len(held_out)} held out "
          f"({len({i.problem_id for i in held_out})} problems never trained on)")
    prm = ProcessRewardModel.from_policy(policy, args.aggregation)
    del policy
    trainer = PRMTrainer(prm, train, config, held_out=held_out)
    rows = trainer.train(resume=args.resume)
    folder = trainer.save_model(Path(config.output_dir) / "prm")
    accuracy = [f"{r['eval_pairwise_accuracy']:.3f} (iteration {r['iteration']})" for r in rows
                if "eval_pairwise_accuracy" in r]
    if accuracy:
        shown = [accuracy[0], accuracy[-1]] if len(accuracy) > 1 else accuracy
        print("held-out pairwise accuracy: " + " -> ".join(shown))
    print(f"PRM folder: {folder}; run folder: {config.output_dir} (metrics.jsonl, metrics.png, checkpoint-N/)")


if __name__ == "__main__":
    main()
