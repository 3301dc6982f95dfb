"""One iteration of the loop (issue 25): the policy samples and labels its own solutions, an outcome reward
model (ORM) and a soft-label process reward model (PRM) are trained on them, and search uses the verifier,
every number on held-out problems never labelled for training or trained on.

    python examples/verifier_loop.py --preset cpu          # tiny sizes, the embedded model, on the CPU
    python examples/verifier_loop.py --preset gpu          # one GPU: 2,000 train problems of levels 2-4

Problems (Arithmetic-v0, stepwise): labels for training come from the first --label_problems problems of
the *train* split of each --train_levels level; everything held out comes from the *test* split of each
--test_levels level. The two splits never share a problem (a stable hash of the canonical operands picks
the split, the same key in every level: envs/arithmetic.py). Inside the test split, the curves run on
problems 0 .. --curve_problems - 1 and the verifiers are evaluated on the next --eval_problems, so the
problems a verifier is judged on and the problems search is measured on are disjoint too.

Stages, each written under --output_dir and skipped when its output exists (--stages picks some, --restart
does the named ones again; a cut training continues from its newest checkpoint):
1. label: `lmgym.traindata.step_data.policy_labels` per train level (N = --samples solutions a problem, each step's
   soft and hard Monte-Carlo label from --rollouts completions) -> labels/train_L<level>.jsonl; the held-out
   verifier problems per test level, outcome labels only -> labels/test_L<level>.jsonl. Sampled tokens and
   tokens/s are printed and collected in labels/stats.json.
2. train: `lmgym.algorithms.verifier_trainer` kinds orm and prm_soft on every train level's labels (a few problems
   held back for the trainer's own evaluation) -> verifiers/<kind>/ (run folder) and verifiers/<kind>/model
   (`ProcessRewardModel.from_pretrained`). --verifiers picks some (two processes can train one each).
3. evaluate: `lmgym.algorithms.evaluate_verifier` of each verifier on each test level's labels: accuracy, AUC, ECE,
   the reliability table, and maj@N, weighted maj@N and best-of-N over the same N samples ->
   verifier_eval.json (each problem's samples, verdicts and scores in verifier_eval.problems.jsonl); the
   verifier with the higher mean AUC is "better".
4. curves: per test level, `lmgym.evaluation.evaluate_curves` of maj, weighted_maj, best_of_n, beam and mcts at every
   --budgets token cap with the better verifier -> curves/L<level>.md/.json/.png; and maj@N, weighted_maj@N
   and best_of_N uncapped (the same N samples each, so the same tokens) -> curves/L<level>_at_maj.md/.json;
   each problem's answers, verdicts and tokens under every method (and budget) in the .problems.jsonl beside.
The summary (verifier table, curves tables, the "at maj@N's budget" line) is written from whatever is saved
to <output_dir>/verifier_loop.md and verifier_loop.json at the end of every run.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from common import example_parser, parse_stages, release_memory  # noqa: E402

from lmgym.algorithms import PRMConfig  # noqa: E402
from lmgym.core.atomic_io import atomic_write_text  # noqa: E402
from lmgym.core.problem_records import problems_path, write_problem_records  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL  # noqa: E402
from lmgym.policies.prm import AGGREGATIONS  # noqa: E402
from lmgym.search.mcts import MCTSConfig  # noqa: E402
from lmgym.search.settings import SearchSettings  # noqa: E402
from lmgym.traindata.step_data.policy_labels import LABEL_PRESETS, PolicyLabelConfig  # noqa: E402
from lmgym.training import load_config  # noqa: E402
from lmgym.training.checkpoints import has_checkpoints  # noqa: E402
from lmgym.training.cli import run_with_clear_errors  # noqa: E402

STAGES = ("label", "train", "evaluate", "curves")
VERIFIERS = ("orm", "prm_soft")
CURVE_METHODS = ("maj", "weighted_maj", "best_of_n", "beam", "mcts")
SIZES = {  # flag: (help, cpu, gpu); gpu labelling as LABEL_PRESETS["gpu"]; cpu smaller than LABEL_PRESETS["cpu"]:
    # on 2 shared (loaded) CPU cores the embedded model labelled at 1-3 tokens/s, about 40 s an engine round: the
    # cpu preset shows every stage run rather than measuring anything
    "label_problems": ("train problems labelled per train level", 2, LABEL_PRESETS["gpu"]["problems"]),
    "samples": ("N: solutions sampled per problem (labels, and the N of maj@N / best-of-N)",
                LABEL_PRESETS["cpu"]["samples_per_problem"], LABEL_PRESETS["gpu"]["samples_per_problem"]),
    "rollouts": ("k: completions from each step prefix (MC step labels)", 1, LABEL_PRESETS["gpu"]["rollouts"]),
    "max_new_tokens": ("tokens per step", 24, LABEL_PRESETS["gpu"]["max_new_tokens"]),
    "max_steps": ("steps per episode at most", 3, 8),
    "label_batch": ("problems labelled together", LABEL_PRESETS["cpu"]["batch_size"],
                    LABEL_PRESETS["gpu"]["batch_size"]),
    "eval_problems": ("held-out test problems per test level the verifiers are evaluated on", 2, 256),
    "curve_problems": ("held-out test problems per test level the curves run on", 2, 256),
    "budgets": ("comma-separated token caps per problem of the curves", "16,32,64,128", "96,192,384,768,1536"),
    "batch_problems": ("problems searched together", 8, 64),
    "beam_width": ("beams kept per problem", 2, 4),
    "beam_expand": ("candidates per beam per step", 2, 2),
    "simulations": ("MCTS leaf evaluations per problem (raised to the budget under a cap)", 4, 32),
    "expand_k": ("MCTS candidate steps per expanded leaf", 2, 4),
    "wave_size": ("MCTS leaves expanded per tree per wave", 2, 4),
}
TRAIN_PRESETS = {  # PRMConfig of each verifier (--prm_config YAML and the flags override it)
    "cpu": dict(train_iterations=10, pairs_per_iteration=16, micro_batch_size=8, learning_rate=2e-5, eval_every=5,
                eval_at_start=False, pointwise_weight=1.0),
    "gpu": dict(train_iterations=500, pairs_per_iteration=64, micro_batch_size=32, learning_rate=2e-5,
                warmup_iterations=20, eval_every=100, save_every=100, eval_at_start=False, pointwise_weight=1.0),
}


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--preset", choices=("cpu", "gpu"), default=None, help="cpu or gpu sizes (default: gpu when CUDA is available)")
    add("--model", default=EMBEDDED_MODEL, help="the policy: hub name, local folder, or the embedded default")
    add("--output_dir", default=None, help="the run folder (default runs/verifier_loop-<preset>)")
    add("--stages", default="all", help=f"comma-separated, of {', '.join(STAGES)} (default all)")
    add("--restart", action="store_true", help="do the named stages again, even when their output is saved")
    add("--verifiers", default="all",
        help=f"comma-separated, of {', '.join(VERIFIERS)}: the ones trained and evaluated "
             "(default all; one each lets two processes train them side by side)")
    add("--train_levels", default="2,3,4", help="Arithmetic-v0 levels whose train split is labelled (default 2,3,4)")
    add("--test_levels", default="2,4", help="levels whose test split is held out (default 2,4)")
    add("--seed", type=int, default=0, help="sampling and training seed (default 0)")
    add("--temperature", type=float, default=0.8, help="sampling temperature of labels and search (default 0.8)")
    add("--aggregation", choices=AGGREGATIONS, default="min",
        help="the PRM's solution score from its step scores (default min; the ORM's is its last step's)")
    add("--prm_config", default=None, help="YAML file of PRMConfig fields for both verifiers")
    for name in ("train_iterations", "pairs_per_iteration", "micro_batch_size"):
        add(f"--{name}", type=int, default=None, help=f"PRMConfig {name} (default: the preset's)")
    add("--learning_rate", type=float, default=None, help="PRMConfig learning_rate (default: the preset's)")
    add("--progress", action=argparse.BooleanOptionalAction, default=True, help="progress bars (default on)")
    sizes = parser.add_argument_group("sizes (default: the preset's)")
    for name, (what, cpu, gpu) in SIZES.items():
        sizes.add_argument(f"--{name}", type=str if name == "budgets" else int, default=None,
                           help=f"{what} (default: cpu {cpu}, gpu {gpu})")
    return parser


def main(argv: list[str] | None = None) -> None:
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


def int_list(flag: str, text: str, allowed: range | None = None) -> list[int]:
    """A comma-separated flag as distinct integers (>= 1, or in `allowed`); anything else is one line."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--{flag} must be comma-separated integers, got {text!r}") from None
    ok = (lambda v: v in allowed) if allowed is not None else (lambda v: v >= 1)
    if not values or not all(map(ok, values)) or len(set(values)) != len(values):
        wanted = f"in {allowed.start}..{allowed.stop - 1}" if allowed is not None else ">= 1"
        raise ValueError(f"--{flag} must be distinct integers {wanted}, got {text!r}")
    return values


class Plan:
    """Every setting and file of a run, checked before any model loads."""

    def __init__(self, args: argparse.Namespace, preset: str):
        self.args, self.preset = args, preset
        column = 1 if preset == "cpu" else 2
        self.size = {name: getattr(args, name) if getattr(args, name) is not None else spec[column]
                     for name, spec in SIZES.items()}
        self.out = Path(args.output_dir or f"runs/verifier_loop-{preset}")
        self.stages = parse_stages(args.stages, STAGES)
        for name, value in self.size.items():
            if name != "budgets" and value < 1:
                raise ValueError(f"--{name} must be >= 1, got {value}")
        self.train_levels = int_list("train_levels", args.train_levels, range(0, 5))
        self.test_levels = int_list("test_levels", args.test_levels, range(0, 5))
        self.budgets = int_list("budgets", self.size["budgets"])
        self.check_problem_counts()
        common = dict(samples_per_problem=self.size["samples"], max_new_tokens=self.size["max_new_tokens"],
                      temperature=args.temperature, batch_size=self.size["label_batch"])
        self.train_labels = PolicyLabelConfig(problems=self.size["label_problems"], rollouts=self.size["rollouts"],
                                              **common)
        # held out: outcome labels of the test problems after the curves' ones (see the module docstring)
        self.test_labels = PolicyLabelConfig(problems=self.size["eval_problems"], rollouts=0,
                                             first_problem=self.size["curve_problems"], **common)
        chosen = parse_stages(args.verifiers, VERIFIERS, "--verifiers")
        self.verifiers = [kind for kind in VERIFIERS if kind in chosen]  # in VERIFIERS' order, as the tables are
        self.prm_configs = {kind: self.prm_config(kind) for kind in self.verifiers}
        self.methods = self.search_methods()

    def check_problem_counts(self) -> None:
        """The problems asked for fit their splits: --label_problems each train split, --curve_problems +
        --eval_problems each test split."""
        from lmgym.envs.arithmetic import split_indices

        wanted = [("train", level, self.size["label_problems"], "--label_problems") for level in self.train_levels]
        wanted += [("test", level, self.size["curve_problems"] + self.size["eval_problems"],
                    "--curve_problems + --eval_problems") for level in self.test_levels]
        for split, level, count, flags in wanted:
            have = len(split_indices(level, split))
            if count > have:
                raise ValueError(f"{flags} is {count}, but the {split} split of Arithmetic-v0 level {level} has "
                                 f"{have} problems")

    def prm_config(self, kind: str) -> PRMConfig:
        flags = {"output_dir": str(self.out / "verifiers" / kind), "seed": self.args.seed,
                 "progress": self.args.progress, **{name: getattr(self.args, name) for name in (
                     "train_iterations", "pairs_per_iteration", "micro_batch_size", "learning_rate")}}
        return load_config(PRMConfig, self.args.prm_config, flags, TRAIN_PRESETS[self.preset])

    def search_methods(self) -> list[SearchSettings]:
        size, args = self.size, self.args
        tree = MCTSConfig(simulations=size["simulations"], expand_k=size["expand_k"], wave_size=size["wave_size"],
                          answer="vote")
        common = dict(n=size["samples"], beam_width=size["beam_width"], beam_expand=size["beam_expand"],
                      temperature=args.temperature, max_new_tokens=size["max_new_tokens"], mcts=tree)
        return [SearchSettings(method=m, **common) for m in CURVE_METHODS]

    def labels_file(self, split: str, level: int) -> Path:
        return self.out / "labels" / f"{split}_L{level}.jsonl"

    def verifier(self, kind: str) -> Path:
        return self.out / "verifiers" / kind / "model"

    def curves(self, level: int, at_maj: bool = False) -> Path:
        return self.out / "curves" / (f"L{level}_at_maj" if at_maj else f"L{level}")

    def check_inputs(self) -> None:
        """A stage that is run needs what earlier stages write: saved, or made in this run (the stage that makes
        a missing file is named: evaluate's held-out labels come from label, its verifiers from train)."""
        test_labels = [(self.labels_file("test", level), "label") for level in self.test_levels]
        needs = {"train": [(self.labels_file("train", level), "label") for level in self.train_levels],
                 "evaluate": [(self.verifier(k), "train") for k in self.verifiers] + test_labels,
                 "curves": [(self.out / "verifier_eval.json", "evaluate")]}
        for stage in self.stages:
            for path, maker in needs.get(stage, []):
                if not path.exists() and maker not in self.stages:
                    raise ValueError(f"stage {stage} needs {path}, which does not exist: add {maker} to --stages")


def skipped(plan: Plan, path: Path, what: str) -> bool:
    """True (and says so) when `path` is saved and --restart was not given."""
    if path.exists() and not plan.args.restart:
        print(f"{what}: {path} exists, skipped (--restart redoes it)")
        return True
    return False


def device_name() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def arithmetic(level: int, split: str, max_steps: int):
    from lmgym.envs import make

    return make("Arithmetic-v0", level=level, split=split, mode="stepwise", max_steps=max_steps)


class Loop:
    """The run's policy (loaded once, when a stage needs it) and each stage."""

    def __init__(self, plan: Plan):
        self.plan, self._policy = plan, None

    @property
    def policy(self):
        if self._policy is None:
            from lmgym.policies import HFPolicy

            self._policy = HFPolicy(self.plan.args.model)
            print(f"policy {self.plan.args.model} on {self._policy.device}")
        return self._policy

    def label(self) -> None:
        from lmgym.traindata.step_data import load_policy_labels, policy_labels, save_policy_labels

        plan = self.plan
        jobs = [("train", level, plan.train_labels) for level in plan.train_levels]
        jobs += [("test", level, plan.test_labels) for level in plan.test_levels]
        for split, level, config in jobs:
            path = plan.labels_file(split, level)
            if skipped(plan, path, f"labels {split} L{level}"):
                continue
            env = arithmetic(level, split, plan.size["max_steps"])
            labels = policy_labels(self.policy, env, config, sample_key=plan.args.seed,
                                   on_batch=lambda done, total, tokens, seconds, name=f"{split} L{level}": print(
                                       f"labels {name}: {done}/{total} problems, {tokens} tokens, "
                                       f"{tokens / max(seconds, 1e-9):.0f} tokens/s", flush=True))
            save_policy_labels(path, labels)
            print(f"labels {split} L{level}: {labels.describe()}, pass@{config.samples_per_problem} "
                  f"{labels.stats['pass_at_n']:.1%} -> {path}")
        stats = {f"{split}_L{level}": load_policy_labels(plan.labels_file(split, level)).stats
                 for split, level, _ in jobs}
        atomic_write_text(plan.out / "labels" / "stats.json", json.dumps(stats, indent=2) + "\n")

    def train(self) -> None:
        from lmgym.algorithms import verifier_trainer
        from lmgym.buffers.step_pairs import split_by_problem
        from lmgym.policies.prm import ProcessRewardModel
        from lmgym.traindata.step_data import load_policy_labels

        plan = self.plan
        samples = [s for level in plan.train_levels
                   for s in load_policy_labels(plan.labels_file("train", level)).samples]
        # a few training problems held back for the trainer's own evaluation (the test split stays untouched)
        train, held_back = split_by_problem(samples, 0.05, plan.args.seed)
        for kind in plan.verifiers:
            if skipped(plan, plan.verifier(kind), f"verifier {kind}"):
                continue
            config = plan.prm_configs[kind]
            prm = ProcessRewardModel.from_policy(self.policy, plan.args.aggregation)
            trainer = verifier_trainer(prm, train, kind, config, held_out=held_back)
            resume = not plan.args.restart and has_checkpoints(config.output_dir)
            rows = trainer.train(resume=resume)
            trainer.save_model(plan.verifier(kind))
            last = {k: round(v, 4) for k, v in rows[-1].items() if k.startswith("eval_")} if rows else {}
            print(f"verifier {kind}: {len(train)} samples, {config.train_iterations} iterations -> "
                  f"{plan.verifier(kind)} {last}")
            del prm, trainer
            release_memory()

    def evaluate(self) -> None:
        from verifier_tables import better_verifier, report_record

        from lmgym.evaluation import evaluate_verifier
        from lmgym.policies.prm import ProcessRewardModel
        from lmgym.traindata.step_data import load_policy_labels

        plan, path = self.plan, self.plan.out / "verifier_eval.json"
        if skipped(plan, path, "verifier evaluation"):
            return
        held_out = {level: load_policy_labels(plan.labels_file("test", level)).samples for level in plan.test_levels}
        records: dict[str, dict[str, dict]] = {}
        problems: list[dict] = []  # each (verifier, level, problem): verifier_eval.problems.jsonl
        for kind in plan.verifiers:
            prm = ProcessRewardModel.from_pretrained(plan.verifier(kind), device=device_name())
            records[kind] = {}
            for level, samples in held_out.items():
                report = evaluate_verifier(prm, samples)
                records[kind][f"L{level}"] = report_record(report)
                problems += [{"verifier": kind, "level": f"L{level}", **p} for p in report.problems]
            del prm
            release_memory()
        better = better_verifier({kind: list(levels.values()) for kind, levels in records.items()})
        write_problem_records(path, "verifier", problems)
        atomic_write_text(path, json.dumps({"better": better, "verifiers": records}, indent=2) + "\n")
        for kind, levels in records.items():
            print(f"verifier {kind}: " + ", ".join(f"{level} AUC {r.get('solution_auc', float('nan')):.3f} "
                                                    f"ECE {r['solution_ece']:.3f}" for level, r in levels.items()))
        print(f"better verifier (mean held-out AUC): {better}")

    def curves(self) -> None:
        from lmgym.evaluation.curves import evaluate_curves, save_curves
        from lmgym.evaluation.search_eval import evaluate_search, save_table
        from lmgym.policies.prm import ProcessRewardModel

        plan = self.plan
        better = json.loads((plan.out / "verifier_eval.json").read_text())["better"]
        scorer = None
        for level in plan.test_levels:
            stem, at_maj = plan.curves(level), plan.curves(level, at_maj=True)
            if skipped(plan, stem.with_suffix(".json"), f"curves L{level}"):
                continue
            if scorer is None:
                scorer = ProcessRewardModel.from_pretrained(plan.verifier(better), device=self.policy.device)
            # solutions scored as the verifier was trained: the ORM by its last step, the PRM by --aggregation
            methods = [dataclasses.replace(s, aggregation=scorer.aggregation) for s in plan.methods]
            env, size = arithmetic(level, "test", plan.size["max_steps"]), plan.size
            run = dict(episodes=size["curve_problems"], offset=0, batch_problems=size["batch_problems"],
                       seed=plan.args.seed, progress=plan.args.progress)
            about = {"level": level, "split": "test", "problems": [0, size["curve_problems"]], "verifier": better,
                     "aggregation": scorer.aggregation, "model": plan.args.model}
            # the uncapped N-sample table first (the headline comparison, minutes), then the capped curves
            if plan.args.restart or not at_maj.with_suffix(".json").exists():
                sampled = [s for s in methods if s.method in ("maj", "weighted_maj", "best_of_n")]
                rows = evaluate_search(self.policy, env, sampled, scorer, **run,
                                       records_path=problems_path(at_maj.with_suffix(".json")))
                save_table(rows, at_maj, about)
                print(f"curves L{level}: {at_maj}.md/.json", flush=True)
            rows = evaluate_curves(self.policy, env, methods, plan.budgets, scorer, **run,
                                   records_path=problems_path(stem.with_suffix(".json")))
            save_curves(rows, stem, about)
            print(f"curves L{level} -> {stem}.md/.json/.png and {at_maj}.md/.json")


def summary(plan: Plan) -> tuple[str, dict]:
    """The markdown summary and its JSON, from whatever the stages saved."""
    from verifier_tables import reliability_markdown, verifier_table, versus_line

    from lmgym.evaluation.curves import curves_table
    from lmgym.evaluation.search_eval import markdown_table

    n, data = plan.size["samples"], {"preset": plan.preset, "model": plan.args.model}
    parts = [f"# One iteration of the loop ({plan.preset} preset, {plan.args.model})\n",
             f"Labels: train split of Arithmetic-v0 levels {plan.args.train_levels}, "
             f"problems 0..{plan.size['label_problems'] - 1} "
             f"of each; held out: test split of levels {plan.args.test_levels} (curves on test problems "
             f"0..{plan.size['curve_problems'] - 1}, verifiers on the next {plan.size['eval_problems']}).\n"]
    stats_file = plan.out / "labels" / "stats.json"
    if stats_file.is_file():
        data["labels"] = json.loads(stats_file.read_text())
        lines = ["| labels | problems | samples | tokens sampled | tokens/s | sample accuracy | pass@N |",
                 "|---|---|---|---|---|---|---|"]
        lines += [f"| {name} | {s['problems']} | {s['samples']} | {s['sampled_tokens']} | {s['tokens_per_second']:.0f} "
                  f"| {s['sample_accuracy']:.1%} | {s['pass_at_n']:.1%} |" for name, s in data["labels"].items()]
        parts.append("## Labels\n\n" + "\n".join(lines) + "\n")
    eval_file = plan.out / "verifier_eval.json"
    if eval_file.is_file():
        data["verifier_eval"] = saved = json.loads(eval_file.read_text())
        named = {f"{kind}, {level}": r for kind, levels in saved["verifiers"].items() for level, r in levels.items()}
        tables = "".join(f"\n{name}:\n\n{reliability_markdown(r)}" for name, r in named.items())
        parts.append(f"## Verifiers on held-out samples\n\n{verifier_table(named)}\nBetter (mean AUC): "
                     f"{saved['better']}\n\nReliability (solution score bins):\n{tables}")
    for level in plan.test_levels:
        stem, at_maj = plan.curves(level), plan.curves(level, at_maj=True)
        if not at_maj.with_suffix(".json").is_file():
            continue
        sampled = json.loads(at_maj.with_suffix(".json").read_text())["rows"]
        line = versus_line(sampled, f"maj@{n}", [f"weighted_maj@{n}", f"best_of_{n}"])
        data[f"L{level}"] = {"at_maj": sampled, "at_maj_line": line}
        part = f"## Held-out L{level}\n\n{markdown_table(sampled)}\n{line}\n"
        if stem.with_suffix(".json").is_file():  # the capped curves come after the N-sample table
            data[f"L{level}"]["curves"] = rows = json.loads(stem.with_suffix(".json").read_text())["rows"]
            part += (f"\nAccuracy against tokens per problem:\n\n{curves_table(rows)}\n"
                     f"![L{level}](curves/L{level}.png)\n")
        parts.append(part)
    return "\n".join(parts), data


def run(args: argparse.Namespace) -> None:
    preset = args.preset or ("gpu" if device_name() == "cuda" else "cpu")
    plan = Plan(args, preset)
    plan.check_inputs()
    print(f"preset={preset} model={args.model} stages={','.join(plan.stages)} output={plan.out}")
    loop = Loop(plan)
    for stage in STAGES:
        if stage in plan.stages:
            getattr(loop, stage)()
    markdown, data = summary(plan)
    plan.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(plan.out / "verifier_loop.md", markdown)
    atomic_write_text(plan.out / "verifier_loop.json", json.dumps(data, indent=2) + "\n")
    print(markdown)
    print(f"summary: {plan.out / 'verifier_loop.md'} and {plan.out / 'verifier_loop.json'}")


if __name__ == "__main__":
    main()
