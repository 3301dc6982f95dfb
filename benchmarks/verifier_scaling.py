"""The verifier's held-out AUC against the number of labelled problems (issue 36's scaling curve).

    python benchmarks/verifier_scaling.py --run runs/issue36/vl --sizes 250,500,1000,2000 --out runs/issue36/scaling

Reads examples/verifier_loop.py's labels in --run (labels/train_L<level>.jsonl, and .second.jsonl when a second
policy labelled the same problems; labels/test_L<level>.jsonl held out). For each size n: the samples of the
first n labelled problems of every train level, both policies', balanced to --right_share right solutions
(traindata/step_data/label_balance.py; --balance per_policy: each policy's labels on their own), train a --kind
verifier (the loop's gpu settings, or --train_iterations) from --model, and evaluate it on every held-out level:
solution AUC with its 95% bootstrap interval over problems, and ECE. Each size is saved in
<out>/n<size>/result.json and skipped when saved (one size a process fits a device call); scaling.md and
scaling.json collect the saved sizes.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.common import example_parser  # noqa: E402
from lmgym.core.atomic_io import atomic_write_text  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL  # noqa: E402
from lmgym.traindata.step_data import (  # noqa: E402
    BALANCE_MODES,
    LabelledSample,
    balanced_sources,
    first_problems,
    load_policy_labels,
)

SAVED = ("solution_auc", "solution_auc_low", "solution_auc_high", "solution_within_problem_auc", "solution_ece",
         "solution_count", "solution_positive_rate")  # a held-out level's numbers in result.json
TRAIN = dict(train_iterations=500, pairs_per_iteration=64, micro_batch_size=32, learning_rate=2e-5,
             warmup_iterations=20, eval_every=0, save_every=100, eval_at_start=False, pointwise_weight=1.0)


def levels_in(run: Path, split: str) -> list[int]:
    """The levels whose `split` labels the run saved (policy labels, not the second policy's)."""
    return sorted(int(p.name[len(split) + 2:-len(".jsonl")]) for p in (run / "labels").glob(f"{split}_L*.jsonl")
                  if ".second" not in p.name)


def training_samples(run: Path, levels: list[int], size: int, right_share: float, seed: int,
                     mode: str = "per_policy") -> tuple[list[LabelledSample], dict]:
    """Every level's samples of its first `size` labelled problems (both policies'), balanced as `mode` says;
    and the balance before and after, per level (`balanced_sources`)."""
    samples, balance = [], {}
    for level in levels:
        sources = {"policy": first_problems(load_policy_labels(run / "labels" / f"train_L{level}.jsonl").samples,
                                            size)}
        second = run / "labels" / f"train_L{level}.second.jsonl"
        if second.is_file():
            sources["second"] = first_problems(load_policy_labels(second).samples, size)
        kept, balance[f"L{level}"] = balanced_sources(sources, right_share, seed, mode)
        samples += kept
    return samples, balance


def train_and_evaluate(args: argparse.Namespace, size: int, folder: Path) -> dict:
    from lmgym.algorithms import PRMConfig, verifier_trainer
    from lmgym.buffers.step_pairs import split_by_problem
    from lmgym.evaluation import evaluate_verifier
    from lmgym.policies import HFPolicy
    from lmgym.policies.prm import ProcessRewardModel

    run = Path(args.run)
    samples, balance = training_samples(run, levels_in(run, "train"), size, args.right_share, args.seed,
                                       args.balance)
    train, held_back = split_by_problem(samples, 0.05, args.seed)
    values = {**TRAIN, **({"train_iterations": args.train_iterations} if args.train_iterations else {})}
    config = PRMConfig(output_dir=str(folder), seed=args.seed, progress=False, **values)
    prm = ProcessRewardModel.from_policy(HFPolicy(args.model), "min")
    verifier_trainer(prm, train, args.kind, config, held_out=held_back).train()
    result = {"size": size, "kind": args.kind, "train_samples": len(train), "balance": balance, "levels": {}}
    for level in levels_in(run, "test"):
        report = evaluate_verifier(prm, load_policy_labels(run / "labels" / f"test_L{level}.jsonl").samples)
        record = report.as_dict()
        result["levels"][f"L{level}"] = {k: record.get(k) for k in SAVED}
    return result


def auc_cell(level: dict) -> str:
    """A level's AUC, its 95% interval over problems and the held-out right solutions it rests on."""
    if level.get("solution_auc") is None:
        return "-"
    cell = f"{level['solution_auc']:.3f}"
    if level.get("solution_auc_low") is not None:
        cell += f" [{level['solution_auc_low']:.2f}, {level['solution_auc_high']:.2f}]"
    if level.get("solution_within_problem_auc") is not None:
        cell += f", within problems {level['solution_within_problem_auc']:.3f}"
    if level.get("solution_count") and level.get("solution_positive_rate") is not None:
        cell += f" ({round(level['solution_count'] * level['solution_positive_rate'])} right)"
    return cell


def markdown(results: list[dict]) -> str:
    levels = sorted({level for r in results for level in r["levels"]})
    lines = ["| labelled problems a level | training samples | "
             + " | ".join(f"AUC {x} [95% CI] (held-out right solutions)" for x in levels) + " |",
             "|---|---|" + "---|" * len(levels)]
    for r in sorted(results, key=lambda r: r["size"]):
        cells = [auc_cell(r["levels"][x]) for x in levels]
        lines.append(f"| {r['size']} | {r['train_samples']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="examples/verifier_loop.py's output folder (its labels)")
    parser.add_argument("--sizes", default="250,500,1000,2000", help="labelled problems a level, comma-separated")
    parser.add_argument("--kind", choices=("orm", "prm_soft"), default="orm")
    parser.add_argument("--right_share", type=float, default=0.5, help="balance to this share right (0: as sampled)")
    parser.add_argument("--balance", choices=BALANCE_MODES, default="per_policy",
                        help="per_policy: each policy's labels balanced on their own; pooled: as one set")
    parser.add_argument("--train_iterations", type=int, default=None, help="(default 500, the loop's gpu setting)")
    parser.add_argument("--model", default=EMBEDDED_MODEL, help="the verifier's starting model (the policy)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    return parser


def main(argv: list[str] | None = None) -> list[dict]:
    args = build_parser().parse_args(argv)
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--sizes must be comma-separated integers, got {args.sizes!r}") from None
    if not sizes or min(sizes) < 1:
        raise SystemExit(f"--sizes must be integers >= 1, got {args.sizes!r}")
    out, results = Path(args.out), []
    for size in sizes:
        path = out / f"n{size}" / "result.json"
        if path.is_file():
            print(f"size {size}: saved in {path}, not trained again")
        else:
            result = train_and_evaluate(args, size, path.parent)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(result, indent=2) + "\n")
            print("RESULT " + json.dumps(result["levels"]), flush=True)
    results = [json.loads(p.read_text()) for p in sorted(out.glob("n*/result.json"))]
    atomic_write_text(out / "scaling.json", json.dumps(results, indent=2) + "\n")
    atomic_write_text(out / "scaling.md", markdown(results))
    print(markdown(results))
    return results


if __name__ == "__main__":
    main()
