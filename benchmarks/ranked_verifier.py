"""The ORM against the ORM with a within-problem ranking term (verifier kind orm_ranked), judged where reranking
is judged: on one problem's samples of the second policy (the budgeted SFT), on problems neither saw.

    python benchmarks/ranked_verifier.py --labels statics/results/session28_h200/i36/vl/labels --level 2 \
      --held-out 400 --train_iterations 150 --out runs/ranked_verifier

Reads examples/verifier_loop.py's labels of one train level (train_L<level>.jsonl, the policy's, and
train_L<level>.second.jsonl, the second policy's, of the same problems; gzipped or not). The last --held-out
problems are held out; the rest, both policies' samples balanced to half right each (per_policy, as the loop
does), train each --kinds verifier from --model with one seed and one config. Each is then evaluated on the
held-out problems' second-policy samples (`evaluate_verifier`): AUC over every sample and within problems,
maj@N, weighted maj@N and best-of-N over the same N samples, with the paired bootstrap interval of weighted
maj@N and best-of-N against maj@N. <out>/<kind>/result.json per kind (skipped when saved); <out>/ranked.md.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.common import example_parser  # noqa: E402
from lmgym.core.atomic_io import atomic_write_text  # noqa: E402
from lmgym.core.jsonl import kept_file  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL  # noqa: E402
from lmgym.traindata.step_data import LabelledSample, balanced_sources, load_policy_labels  # noqa: E402

KINDS = ("orm", "orm_ranked")


def read_labels(folder: Path, name: str) -> list[LabelledSample]:
    """The samples of labels file `name` in `folder`, or of its .gz beside (the toolkit's readers take either)."""
    return load_policy_labels(kept_file(folder / name) or folder / name).samples


def split(samples: list[LabelledSample], held_out: set[str]) -> tuple[list[LabelledSample], list[LabelledSample]]:
    """(train, held out) by problem id."""
    return [s for s in samples if s.problem_id not in held_out], [s for s in samples if s.problem_id in held_out]


def versus_majority(report) -> dict[str, dict]:
    """Weighted maj@N and best-of-N against maj@N over the report's problems: the paired bootstrap interval."""
    from lmgym.evaluation.statistics import paired_bootstrap
    from lmgym.evaluation.verifier_eval import problem_outcomes

    outcomes = problem_outcomes(report.problems)
    out = {}
    for key, rule in (("weighted_vs_maj", "weighted_majority"), ("best_vs_maj", "best_of_n")):
        d = paired_bootstrap(outcomes[rule], outcomes["majority"])
        out[key] = {"difference": d.difference, "low": d.low, "high": d.high}
    return out


def run_kind(args: argparse.Namespace, kind: str, train: list[LabelledSample], test: list[LabelledSample]) -> dict:
    from lmgym.algorithms import PRMConfig, verifier_trainer
    from lmgym.evaluation import evaluate_verifier
    from lmgym.policies import HFPolicy
    from lmgym.policies.prm import ProcessRewardModel

    out = Path(args.out) / kind
    config = PRMConfig(train_iterations=args.train_iterations, pairs_per_iteration=args.pairs_per_iteration,
                       micro_batch_size=args.micro_batch_size, learning_rate=args.learning_rate,
                       warmup_iterations=min(20, args.train_iterations // 10), eval_every=0,
                       save_every=args.train_iterations, eval_at_start=False, pointwise_weight=1.0,
                       seed=args.seed, progress=args.progress, output_dir=str(out))
    prm = ProcessRewardModel.from_policy(HFPolicy(args.model), "min")
    trainer = verifier_trainer(prm, train, kind, config, pairs_per_problem=args.pairs_per_problem)
    trainer.train(resume=False)
    report = evaluate_verifier(trainer.prm, test)
    values = report.as_dict()
    return {"kind": kind, "train_samples": len(train), "test_samples": len(test), "problems": len(report.problems),
            **{k: values.get(k) for k in ("solution_auc", "solution_within_problem_auc", "solution_mixed_problems",
                                          "majority_accuracy", "weighted_majority_accuracy", "best_of_n_accuracy",
                                          "pass_at_n", "sample_accuracy")},
            **versus_majority(report),
            "settings": {k: getattr(args, k) for k in ("train_iterations", "pairs_per_iteration", "learning_rate",
                                                       "pairs_per_problem", "seed", "held_out", "level")}}


def markdown(results: list[dict]) -> str:
    def points(d: dict) -> str:
        return f"{100 * d['difference']:+.1f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]"

    lines = ["| verifier | AUC | AUC within problems (mixed problems) | maj@N | weighted maj@N, vs maj@N | best-of-N, "
             "vs maj@N | pass@N |", "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['kind']} | {r['solution_auc']:.3f} | {r['solution_within_problem_auc']:.3f} "
                     f"({r['solution_mixed_problems']:.0f}) | {r['majority_accuracy']:.1%} | "
                     f"{r['weighted_majority_accuracy']:.1%}, {points(r['weighted_vs_maj'])} | "
                     f"{r['best_of_n_accuracy']:.1%}, {points(r['best_vs_maj'])} | {r['pass_at_n']:.1%} |")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--labels", required=True, help="examples/verifier_loop.py's labels folder")
    add("--level", type=int, default=2)
    add("--held-out", dest="held_out", type=int, default=400, help="the last N labelled problems, held out")
    add("--model", default=EMBEDDED_MODEL)
    add("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    add("--train_iterations", type=int, default=500)
    add("--pairs_per_iteration", type=int, default=64)
    add("--micro_batch_size", type=int, default=32)
    add("--learning_rate", type=float, default=2e-5)
    add("--pairs_per_problem", type=int, default=4)
    add("--seed", type=int, default=0)
    add("--out", default="runs/ranked_verifier")
    add("--no-progress", dest="progress", action="store_false")
    return parser


def run(args: argparse.Namespace) -> list[dict]:
    folder = Path(args.labels)
    own = read_labels(folder, f"train_L{args.level}.jsonl")
    second = read_labels(folder, f"train_L{args.level}.second.jsonl")
    problems = list(dict.fromkeys(s.problem_id for s in own + second))
    if not 0 < args.held_out < len(problems):
        raise ValueError(f"--held-out must be in 1..{len(problems) - 1} (the labels hold {len(problems)} problems), "
                         f"got {args.held_out}")
    held_out = set(problems[-args.held_out:])
    own_train, _ = split(own, held_out)
    second_train, test = split(second, held_out)
    train, _ = balanced_sources({"policy": own_train, "second": second_train}, 0.5, args.seed, "per_policy")
    results = []
    for kind in args.kinds:
        path = Path(args.out) / kind / "result.json"
        if path.is_file():
            print(f"{kind}: saved in {path}, not trained again")
            results.append(json.loads(path.read_text()))
            continue
        result = run_kind(args, kind, train, test)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(result, indent=2) + "\n")
        results.append(result)
    table = markdown(results)
    atomic_write_text(Path(args.out) / "ranked.md", table)
    print(table)
    return results


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        run(args)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main()
