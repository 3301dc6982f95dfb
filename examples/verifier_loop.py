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
0. sft (with --second_policy sft only): a budgeted first-answer SFT of the policy on --sft_examples gold solutions
   of each train level (--sft_iterations), as reflection's gpu_room preset budgets it -> sft/model: a second
   policy that is right 20-60% of the time, whose samples add right solutions to the labels (issue 36).
1. label: `lmgym.traindata.step_data.policy_labels` per train level (N = --samples solutions a problem, each step's
   soft and hard Monte-Carlo label from --rollouts completions) -> labels/train_L<level>.jsonl; the held-out
   verifier problems per test level, outcome labels only -> labels/test_L<level>.jsonl. Sampled tokens and
   tokens/s are printed and collected in labels/stats.json. With --second_policy, the second policy's samples
   of the same train problems -> labels/train_L<level>.second.jsonl (stats "second_L<level>").
2. train: `lmgym.algorithms.verifier_trainer` kinds orm, prm_soft and orm_ranked (the ORM with a ranking term
   over right-wrong pairs of one problem's solutions, --pairs_per_problem a problem) on every train level's labels
   (a few problems held back for the trainer's own evaluation) -> verifiers/<kind>/ (run folder) and
   verifiers/<kind>/model (`ProcessRewardModel.from_pretrained`). --verifiers picks some (a process can train
   each). Each
   level's samples (both policies' when there are two) are balanced to --right_share right solutions first
   (`traindata.step_data.label_balance`); the balance before and after, per level -> labels/balance.json.
3. evaluate: `lmgym.algorithms.evaluate_verifier` of each verifier on each test level's labels: accuracy, AUC, ECE,
   the reliability table, and maj@N, weighted maj@N and best-of-N over the same N samples ->
   verifier_eval.json (each problem's samples, verdicts and scores in verifier_eval.problems.jsonl); the
   verifier with the higher mean AUC is "better".
4. curves: per test level, `lmgym.evaluation.evaluate_curves` of maj, weighted_maj, best_of_n, beam and mcts at every
   --budgets token cap with the better verifier -> curves/L<level>.md/.json/.png; and the headline table
   uncapped, on ONE pool of N samples a problem (`lmgym.evaluation.evaluate_reranking`): maj@N, and weighted_maj@N
   and best_of_N under the better verifier, the other trained one, the critic (--critic) and the better one and
   the critic combined (`<better>_critic`, the geometric mean of their scores), so every row has the same samples
   and tokens and differs from maj@N by its choice alone -> curves/L<level>_at_maj.md/.json;
   each problem's answers, verdicts and tokens under every method (and budget) in the .problems.jsonl beside.
   Every table gives each method's paired bootstrap 95% interval against maj (evaluation/search_comparison.py);
   the uncapped table's scored methods give their scorer's AUC on the very samples they ranked, with its interval
   over problems (`search_eval.sample_auc`): the held-out labels hold few right samples, these hold hundreds.
   --curve_methods pool: maj, weighted maj and best-of-N under every scorer of that table at every budget, from
   ONE pool of --pool_samples samples a problem (`lmgym.evaluation.pool_curves`: each budget keeps the pool's
   prefix that fits, as a capped run does) -> curves/L<level>_pool.md/.json/.png, the pool in
   curves/L<level>_pool_samples; with --pool_policy second the second policy samples it (curves/L<level>_pool_second).
   With --critic (a reflection critic's model folder, examples/reflection_dpo.py --preset gpu_room) the
   critic scores solutions too (`algorithms.prm.critic_verifier`): weighted_maj[critic] and best_of_n[critic]
   join both tables. --curve_methods runs some of the capped curves (one process a method: curves/
   L<level>_part_<method>.json); the summary merges the parts. Each finished (method, budget) run is kept as it
   ends (`evaluation/curve_progress.py`), so a cut curve stage continues from there when run again. The
   uncapped table comes with maj's part (its baseline), so parts without maj run beside it.
The summary (verifier table, curves tables, the "at maj@N's budget" line, MCTS at maj@N's tokens, how often maj's
pool and MCTS's trees held a right answer, and a generative verifier's rows against maj at the tokens policy and
verifier generated together) is written from whatever is saved
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
from lmgym.evaluation.curves import SIMULATIONS_PER_TOKEN  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL  # noqa: E402
from lmgym.policies.prm import AGGREGATIONS  # noqa: E402
from lmgym.search.mcts import MCTSConfig  # noqa: E402
from lmgym.search.settings import SearchSettings  # noqa: E402
from lmgym.traindata.step_data.label_balance import BALANCE_MODES  # noqa: E402
from lmgym.traindata.step_data.policy_labels import LABEL_PRESETS, PolicyLabelConfig  # noqa: E402
from lmgym.training import load_config  # noqa: E402
from lmgym.training.checkpoints import has_checkpoints  # noqa: E402
from lmgym.training.cli import run_with_clear_errors  # noqa: E402

STAGES = ("sft", "label", "train", "evaluate", "curves")
VERIFIERS = ("orm", "prm_soft", "orm_ranked")
CURVE_METHODS = ("maj", "weighted_maj", "best_of_n", "beam", "mcts")
# every rule's curve (maj, weighted maj and best-of-N under every scorer) from one pool sampled once past the largest
# budget (lmgym.evaluation.pool_curves): the capped runs sample again for each method and budget
POOL = "pool"
# run again with the critic's scores, named <method>[critic]; MCTS with the critic as its value: the checked critic
# redoes each step before its verdict, so on a partial solution it judges the steps so far (a step value)
CRITIC_METHODS = ("weighted_maj", "best_of_n", "mcts")
SIZES = {  # flag: (help, cpu, gpu); gpu labelling as LABEL_PRESETS["gpu"]; cpu smaller than LABEL_PRESETS["cpu"]:
    # on 2 shared (loaded) CPU cores the embedded model labelled at 1-3 tokens/s, about 40 s an engine round: the
    # cpu preset shows every stage run rather than measuring anything
    "label_problems": ("train problems labelled per train level", 2, 2000),
    "samples": ("N: solutions sampled per problem (labels, and the N of maj@N / best-of-N)",
                LABEL_PRESETS["cpu"]["samples_per_problem"], LABEL_PRESETS["gpu"]["samples_per_problem"]),
    "rollouts": ("k: completions from each step prefix (MC step labels)", 1, LABEL_PRESETS["gpu"]["rollouts"]),
    "max_new_tokens": ("tokens per step", 24, LABEL_PRESETS["gpu"]["max_new_tokens"]),
    "max_steps": ("steps per episode at most", 3, 8),
    "label_batch": ("problems labelled together", LABEL_PRESETS["cpu"]["batch_size"],
                    LABEL_PRESETS["gpu"]["batch_size"]),
    "eval_problems": ("held-out test problems per test level the verifiers are evaluated on", 2, 256),
    "curve_problems": ("held-out test problems per test level the curves run on", 2, 896),
    "budgets": ("comma-separated token caps per problem of the curves", "16,32,64,128", "96,192,384,768,1536"),
    "pool_samples": ("samples per problem of the pooled curves (--curve_methods pool), enough to pass the largest "
                     "budget", 8, 48),
    "batch_problems": ("problems searched together", 8, 64),
    "beam_width": ("beams kept per problem", 2, 4),
    "beam_expand": ("candidates per beam per step", 2, 2),
    "simulations": (f"MCTS leaf evaluations per problem (raised to {SIMULATIONS_PER_TOKEN}x the budget under a cap)",
                    4, 32),
    "expand_k": ("MCTS candidate steps per expanded leaf", 2, 4),
    "wave_size": ("MCTS leaves expanded per tree per wave", 2, 4),
    "sft_examples": ("gold solutions per train level of the budgeted SFT (--second_policy sft)", 16, 128),
    "sft_iterations": ("iterations of the budgeted SFT (32 examples each)", 2, 24),
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
    add("--pairs_per_problem", type=int, default=4,
        help="orm_ranked's right-wrong pairs of one problem's solutions, at most, a problem (default 4)")
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
    add("--second_policy", default=None,
        help="a second policy whose samples join the train labels: 'sft' (the sft stage's budgeted SFT) or a model "
             "folder (default none)")
    add("--right_share", type=float, default=0.5,
        help="balance each train level's labels to this share of right solutions before training (0: as sampled; "
             "default 0.5)")
    add("--balance", choices=BALANCE_MODES, default="per_policy",
        help="per_policy: each policy's labels balanced on their own, so which policy wrote a solution says nothing "
             "of its label; pooled: both policies' labels balanced as one set (default per_policy)")
    add("--label_only", choices=("both", "policy", "second"), default="both",
        help="the label stage labels the policy's samples, the second policy's, or both (default both)")
    add("--critic", default=None, help="a reflection critic's model folder: scores solutions beside the verifier")
    add("--pool_policy", choices=("policy", "second"), default="policy",
        help="who samples the pooled curves' pool: the policy, or the second policy (--second_policy; its curves go "
             "to curves/L<level>_pool_second)")
    add("--critic_mode", choices=("verdict", "votes"), default="verdict",
        help="the critic's score: P(approve) at its verdict, or the share of approving sampled turns")
    add("--curve_methods", default="all",
        help=f"comma-separated capped curves to run, of {', '.join(CURVE_METHODS)} and "
             f"{', '.join(m + '_critic' for m in CRITIC_METHODS)}, and {POOL} (every rule and scorer from one pool) "
             f"(default all); the uncapped table (<level>_at_maj) comes with maj")
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
        if not (args.right_share == 0 or 0 < args.right_share < 1):
            raise ValueError(f"--right_share must be 0 (no balancing) or in (0, 1), got {args.right_share}")
        if args.critic is not None and not Path(args.critic).is_dir():
            raise ValueError(f"--critic {args.critic}: no such model folder")
        self.curve_methods = parse_stages(args.curve_methods, [*self.capped_names, POOL], "--curve_methods")
        if args.pairs_per_problem < 1:
            raise ValueError(f"--pairs_per_problem must be >= 1, got {args.pairs_per_problem}")
        if args.pool_policy == "second" and args.second_policy is None:
            raise ValueError("--pool_policy second needs --second_policy (sft, or a model folder)")
        if args.second_policy not in (None, "sft") and not Path(args.second_policy).is_dir():
            raise ValueError(f"--second_policy {args.second_policy}: not 'sft' and no such model folder")
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
        methods = [SearchSettings(method=m, **common) for m in CURVE_METHODS]
        if args.critic:
            methods += [SearchSettings(method=m, verifier="critic", aggregation="last", **common)
                        for m in CRITIC_METHODS]
        return methods

    @property
    def second_model(self) -> str | None:
        """The second policy's model: the sft stage's, a folder, or None."""
        choice = self.args.second_policy
        return None if choice is None else str(self.out / "sft" / "model") if choice == "sft" else choice

    def labels_file(self, split: str, level: int, second: bool = False) -> Path:
        return self.out / "labels" / f"{split}_L{level}{'.second' if second else ''}.jsonl"

    def verifier(self, kind: str) -> Path:
        return self.out / "verifiers" / kind / "model"

    def curves(self, level: int, at_maj: bool = False) -> Path:
        return self.out / "curves" / (f"L{level}_at_maj" if at_maj else f"L{level}")

    @property
    def capped_names(self) -> list[str]:
        """Every capped curve's name: the search methods, and with --critic those the critic scores."""
        return list(CURVE_METHODS) + ([m + "_critic" for m in CRITIC_METHODS] if self.args.critic else [])

    def curve_part(self, level: int) -> Path:
        """Where this run's capped curves go: curves/L<level> with every method, else curves/L<level>_part_<methods>."""
        chosen, stem = [m for m in self.curve_methods if m != POOL], self.curves(level)
        if chosen == self.capped_names:
            return stem
        return stem.with_name(f"{stem.name}_part_{'+'.join(chosen)}")

    def pool_curves(self, level: int, sampler: str | None = None) -> Path:
        """Where the pooled curves of `sampler` (default --pool_policy) go: curves/L<level>_pool for the policy's,
        curves/L<level>_pool_second for the second policy's (the pool itself beside, ..._samples)."""
        sampler = sampler or self.args.pool_policy
        return self.out / "curves" / f"L{level}_pool{'_second' if sampler == 'second' else ''}"

    def check_inputs(self) -> None:
        """A stage that is run needs what earlier stages write: saved, or made in this run (the stage that makes
        a missing file is named: evaluate's held-out labels come from label, its verifiers from train)."""
        test_labels = [(self.labels_file("test", level), "label") for level in self.test_levels]
        needs = {"train": [(self.labels_file("train", level, second), "label") for level in self.train_levels
                           for second in ((False, True) if self.second_model else (False,))],
                 "label": [(Path(self.second_model), "sft")]  # the second policy labels: its model exists
                 if self.args.second_policy == "sft" and self.args.label_only != "policy" else [],
                 "evaluate": [(self.verifier(k), "train") for k in self.verifiers] + test_labels,
                 "curves": [(self.out / "verifier_eval.json", "evaluate")]
                 + ([(Path(self.second_model), "sft")]
                    if POOL in self.curve_methods and self.args.pool_policy == "second" else [])}
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
        self.plan, self._policy, self._verifier, self._critic = plan, None, None, None
        self._others: dict = {}  # the trained verifiers other than the better one, for the headline's pool

    @property
    def policy(self):
        if self._policy is None:
            from lmgym.policies import HFPolicy

            self._policy = HFPolicy(self.plan.args.model)
            print(f"policy {self.plan.args.model} on {self._policy.device}")
        return self._policy

    def sft(self) -> None:
        """The budgeted first-answer SFT (--second_policy sft): gold solutions of --sft_examples problems of each
        train level, --sft_iterations x 32 examples -> sft/model."""
        from lmgym.algorithms import SFT, SFTConfig
        from lmgym.traindata.sft_data import arithmetic_sft_examples

        plan = self.plan
        if plan.args.second_policy != "sft":
            return  # nothing to train: the labels come from the policy alone, or a given second model
        model = Path(plan.second_model)
        if skipped(plan, model, "sft (second policy)"):
            return
        size, seed = plan.size, plan.args.seed
        train = [e for level in plan.train_levels
                 for e in arithmetic_sft_examples(level, "train", size["sft_examples"], seed, "stepwise")]
        held = arithmetic_sft_examples(plan.train_levels[0], "test", 64, seed, "stepwise")
        config = SFTConfig(output_dir=str(plan.out / "sft"), train_iterations=size["sft_iterations"],
                           examples_per_iteration=32, micro_batch_size=32, max_length=384, learning_rate=5e-5,
                           eval_every=0, eval_at_start=False, seed=seed, progress=plan.args.progress)
        trainer = SFT(self.policy, train, config, held_out=held)
        trainer.train(resume=not plan.args.restart and has_checkpoints(config.output_dir))
        trainer.save_model(model)
        self._policy = None  # trained in place: the next stage loads the policy afresh
        release_memory()
        print(f"sft: {len(train)} gold solutions, {config.train_iterations} iterations -> {model}")

    def label(self) -> None:
        from lmgym.policies import HFPolicy
        from lmgym.traindata.step_data import load_policy_labels, policy_labels, save_policy_labels

        plan = self.plan
        jobs = [("train", level, plan.train_labels, False) for level in plan.train_levels]
        jobs += [("test", level, plan.test_labels, False) for level in plan.test_levels]
        jobs += [("train", level, plan.train_labels, True) for level in plan.train_levels if plan.second_model]
        if plan.args.label_only != "both":  # one process a policy: the other's labels are left to another process
            jobs = [job for job in jobs if job[3] == (plan.args.label_only == "second")]
        second = None
        for split, level, config, by_second in jobs:
            path, what = plan.labels_file(split, level, by_second), f"{'second' if by_second else split} L{level}"
            if skipped(plan, path, f"labels {what}"):
                continue
            if by_second and second is None:
                second = HFPolicy(plan.second_model)
                print(f"second policy {plan.second_model} on {second.device}")
            env = arithmetic(level, split, plan.size["max_steps"])
            labels = policy_labels(second if by_second else self.policy, env, config, sample_key=plan.args.seed,
                                   on_batch=lambda done, total, tokens, seconds, name=what: print(
                                       f"labels {name}: {done}/{total} problems, {tokens} tokens, "
                                       f"{tokens / max(seconds, 1e-9):.0f} tokens/s", flush=True))
            save_policy_labels(path, labels)
            print(f"labels {what}: {labels.describe()}, pass@{config.samples_per_problem} "
                  f"{labels.stats['pass_at_n']:.1%} -> {path}")
        if plan.args.label_only != "both":
            return  # labels/stats.json covers every label file: a process that labels them all writes it
        stats = {f"{'second' if by_second else split}_L{level}":
                 load_policy_labels(plan.labels_file(split, level, by_second)).stats
                 for split, level, _, by_second in jobs}
        atomic_write_text(plan.out / "labels" / "stats.json", json.dumps(stats, indent=2) + "\n")

    def train(self) -> None:
        from verifier_tables import auc_text

        from lmgym.algorithms import verifier_trainer
        from lmgym.buffers.step_pairs import split_by_problem
        from lmgym.policies.prm import ProcessRewardModel
        from lmgym.traindata.step_data import balanced_sources, load_policy_labels

        plan = self.plan
        samples, balance = [], {}
        for level in plan.train_levels:
            sources = {"policy": load_policy_labels(plan.labels_file("train", level)).samples}
            if plan.second_model:
                sources["second"] = load_policy_labels(plan.labels_file("train", level, second=True)).samples
            kept, balance[f"L{level}"] = balanced_sources(sources, plan.args.right_share, plan.args.seed,
                                                          plan.args.balance)
            samples += kept
        atomic_write_text(plan.out / "labels" / "balance.json", json.dumps(balance, indent=2) + "\n")
        print("labels balanced: " + ", ".join(f"{level} {b['before']['right_share']:.1%} right of "
                                               f"{b['before']['samples']} -> {b['after']['right_share']:.1%} of "
                                               f"{b['after']['samples']} ({b['mode']}; the source's AUC "
                                               f"{auc_text(b['source_auc']['after'])})"
                                               for level, b in balance.items()))
        # a few training problems held back for the trainer's own evaluation (the test split stays untouched)
        train, held_back = split_by_problem(samples, 0.05, plan.args.seed)
        for kind in plan.verifiers:
            if skipped(plan, plan.verifier(kind), f"verifier {kind}"):
                continue
            config = plan.prm_configs[kind]
            prm = ProcessRewardModel.from_policy(self.policy, plan.args.aggregation)
            trainer = verifier_trainer(prm, train, kind, config, held_out=held_back,
                                       pairs_per_problem=plan.args.pairs_per_problem)
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

    def scorers(self, better: str, level: int) -> dict:
        """The curves' scorers: "default", the better verifier; "critic" with --critic, judging in the
        reflection env of the level's test split."""
        from lmgym.policies.prm import ProcessRewardModel

        plan = self.plan
        if self._verifier is None:
            self._verifier = ProcessRewardModel.from_pretrained(plan.verifier(better), device=self.policy.device)
        out = {"default": self._verifier}
        if plan.args.critic:
            from lmgym.algorithms.prm.critic_verifier import CriticVerifier, CriticVerifierConfig
            from lmgym.envs import make
            from lmgym.policies import HFPolicy

            if self._critic is None:
                self._critic = HFPolicy(plan.args.critic)
            env = make("Reflection-Arithmetic-v0", level=level, split="test")
            out["critic"] = CriticVerifier(self._critic, env, CriticVerifierConfig(mode=plan.args.critic_mode,
                                                                                   batch_size=64))
        return out

    def pool_scorers(self, better: str, scorers: dict) -> tuple[dict, dict, dict]:
        """The headline table's scorers on its one pool of samples: the better verifier ("default"), the other
        trained one under its kind's name where it was trained, the critic with --critic, and the better verifier
        and the critic combined (`<better>_critic`, the geometric mean of their scores); their aggregations (each
        verifier as it was trained, the critic "last"); and the combinations."""
        from lmgym.policies.prm import ProcessRewardModel

        named, aggregations = {"default": scorers["default"]}, {"default": scorers["default"].aggregation}
        for kind in VERIFIERS:
            if kind != better and (self.plan.verifier(kind) / "config.json").is_file():
                if kind not in self._others:
                    self._others[kind] = ProcessRewardModel.from_pretrained(self.plan.verifier(kind),
                                                                            device=self.policy.device)
                named[kind], aggregations[kind] = self._others[kind], self._others[kind].aggregation
        combined = {}
        if "critic" in scorers:
            named["critic"], aggregations["critic"] = scorers["critic"], "last"
            combined[f"{better}_critic"] = ("default", "critic")
        return named, aggregations, combined

    def curves(self) -> None:
        from lmgym.evaluation.curve_progress import partial_path
        from lmgym.evaluation.curves import evaluate_curves, save_curves
        from lmgym.evaluation.rerank_eval import evaluate_reranking
        from lmgym.evaluation.search_eval import save_table

        plan = self.plan
        better = json.loads((plan.out / "verifier_eval.json").read_text())["better"]
        for level in plan.test_levels:
            at_maj, part, pooled = plan.curves(level, at_maj=True), plan.curve_part(level), plan.pool_curves(level)
            capped_todo = any(m != POOL for m in plan.curve_methods) and not skipped(
                plan, part.with_suffix(".json"), f"curves L{level}")
            pool_todo = POOL in plan.curve_methods and not skipped(plan, pooled.with_suffix(".json"),
                                                                   f"pooled curves L{level}")
            if not (capped_todo or pool_todo):
                continue
            scorers = self.scorers(better, level)
            aggregation = scorers["default"].aggregation
            # solutions scored as the verifier was trained: the ORM by its last step, the PRM by --aggregation
            # (the critic judges whole answers: "last")
            methods = [s if s.verifier else dataclasses.replace(s, aggregation=aggregation) for s in plan.methods]
            env, size = arithmetic(level, "test", plan.size["max_steps"]), plan.size
            run = dict(episodes=size["curve_problems"], offset=0, batch_problems=size["batch_problems"],
                       seed=plan.args.seed, progress=plan.args.progress)
            about = {"level": level, "split": "test", "problems": [0, size["curve_problems"]], "verifier": better,
                     "aggregation": aggregation, "model": plan.args.model, "critic": plan.args.critic,
                     "critic_mode": plan.args.critic_mode if plan.args.critic else None}
            if pool_todo:
                self.pooled_curves(level, better, scorers, env, run, about)
            if not capped_todo:
                continue
            # the uncapped N-sample table first (the headline comparison, minutes), then the capped curves; a run
            # of some curves makes the table only when maj is among them (its baseline), so parts run side by side
            if "maj" in plan.curve_methods and (plan.args.restart or not at_maj.with_suffix(".json").exists()):
                pool = next(s for s in methods if s.method == "maj" and not s.verifier)
                named, aggregations, combined = self.pool_scorers(better, scorers)
                rows = evaluate_reranking(self.policy, env, pool, named, aggregations=aggregations,
                                          combined=combined, **run,
                                          records_path=problems_path(at_maj.with_suffix(".json")))
                save_table(rows, at_maj, {**about, "scorers": list(named), "combined": combined,
                                          "aggregations": aggregations, "one_pool": True})
                print(f"curves L{level}: {at_maj}.md/.json", flush=True)
            capped = [s for s in methods if curve_key(s) in plan.curve_methods]
            baseline = "maj" if any(s.method == "maj" and not s.verifier for s in capped) else None
            records = problems_path(part.with_suffix(".json"))
            if plan.args.restart:  # a cut run's finished (method, budget) runs are kept for the next call, not this
                partial_path(records).unlink(missing_ok=True)
            rows = evaluate_curves(self.policy, env, capped, plan.budgets, scorers, **run, baseline=baseline,
                                   records_path=records, on_run=run_line(level))
            save_curves(rows, part, about)
            print(f"curves L{level} -> {part}.md/.json/.png and {at_maj}.md/.json")

    def pooled_curves(self, level: int, better: str, scorers: dict, env, run: dict, about: dict) -> None:
        """maj, weighted maj and best-of-N under every scorer of the headline table, at every budget, from one pool
        of --pool_samples samples a problem (`evaluate_reranking` once, then `pool_curves`) -> curves/L<level>_pool
        (.md/.json/.png, per-problem runs beside; its settings hold `scorers_on_pool`' rows) and the pool itself
        (curves/L<level>_pool_samples)."""
        from lmgym.core.problem_records import read_problem_records, write_problem_records
        from lmgym.evaluation.curves import save_curves
        from lmgym.evaluation.pool_curves import pool_curves, scorers_on_pool
        from lmgym.evaluation.rerank_eval import evaluate_reranking
        from lmgym.evaluation.search_eval import save_table
        from lmgym.policies import HFPolicy

        plan, stem = self.plan, self.plan.pool_curves(level)
        sampler = self.policy if plan.args.pool_policy == "policy" else HFPolicy(plan.second_model)
        maj = next(s for s in plan.methods if s.method == "maj" and not s.verifier)
        pool = dataclasses.replace(maj, n=plan.size["pool_samples"])
        named, aggregations, combined = self.pool_scorers(better, scorers)
        samples = stem.with_name(f"{stem.name}_samples.json")
        rows = evaluate_reranking(sampler, env, pool, named, aggregations=aggregations, combined=combined, **run,
                                  records_path=problems_path(samples))
        settings = {**about, "pool_samples": pool.n, "scorers": list(named), "combined": combined,
                    "aggregations": aggregations, "one_pool": True, "pool_policy": plan.args.pool_policy,
                    "sampler": plan.args.model if plan.args.pool_policy == "policy" else plan.second_model}
        save_table(rows, samples.with_suffix(""), settings)  # the whole pool's table (maj@N over every sample)
        pooled = read_problem_records(problems_path(samples))
        curves, records = pool_curves(pooled, plan.budgets, plan.args.seed)
        # each scorer's AUC over the pool and within its problems, and the pool's reach: why a row gains or not
        save_curves(curves, stem, {**settings, "budgets": plan.budgets, "scorers_on_pool": scorers_on_pool(pooled)})
        write_problem_records(problems_path(stem.with_suffix(".json")), "search_curves", records)
        print(f"pooled curves L{level} -> {stem}.md/.json/.png (the pool: {samples})", flush=True)


def run_line(level: int):
    """evaluate_curves' `on_run`: one printed line a finished (method, budget) run, so a log shows how far it got."""
    def line(row: dict, done: int, total: int, resumed: bool) -> None:
        print(f"curves L{level}: {row['method']} at {row['budget']}: {row['accuracy']:.1%}, "
              f"{row['tokens_per_problem']:.1f} tokens/problem ({done} of {total}"
              f"{', saved by an earlier call' if resumed else ''})", flush=True)
    return line


def curve_key(settings: SearchSettings) -> str:
    """A method's name in --curve_methods: maj, ..., mcts, weighted_maj_critic, best_of_n_critic."""
    return settings.method + (f"_{settings.verifier}" if settings.verifier else "")


def summary(plan: Plan) -> tuple[str, dict]:
    """The markdown summary and its JSON, from whatever the stages saved."""
    from verifier_tables import (
        balance_table,
        equal_tokens_lines,
        matched_budget_line,
        read_curves,
        reliability_markdown,
        verifier_table,
        versus_line,
        within_reach_line,
    )

    from lmgym.core.problem_records import read_problem_records
    from lmgym.evaluation.curves import curves_table
    from lmgym.evaluation.pool_curves import scorers_on_pool_markdown
    from lmgym.evaluation.search_comparison import with_intervals
    from lmgym.evaluation.search_eval import markdown_table, sample_auc_table

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
    balance_file = plan.out / "labels" / "balance.json"
    if balance_file.is_file():
        data["label_balance"] = json.loads(balance_file.read_text())
        parts.append("## Label balance (train levels, before and after balancing)\n\n"
                     + balance_table(data["label_balance"]))
    eval_file = plan.out / "verifier_eval.json"
    if eval_file.is_file():
        data["verifier_eval"] = saved = json.loads(eval_file.read_text())
        named = {f"{kind}, {level}": r for kind, levels in saved["verifiers"].items() for level, r in levels.items()}
        tables = "".join(f"\n{name}:\n\n{reliability_markdown(r)}" for name, r in named.items())
        parts.append(f"## Verifiers on held-out samples\n\n{verifier_table(named)}\nBetter (mean AUC): "
                     f"{saved['better']}\n\nReliability (solution score bins):\n{tables}")
    for level in plan.test_levels:
        at_maj = plan.curves(level, at_maj=True)
        if not at_maj.with_suffix(".json").is_file():
            continue
        sampled = json.loads(at_maj.with_suffix(".json").read_text())["rows"]
        others = [r["method"] for r in sampled if r["method"] != f"maj@{n}"]
        line = versus_line(sampled, f"maj@{n}", others)
        data[f"L{level}"] = {"at_maj": sampled, "at_maj_line": line}
        part = f"## Held-out L{level}\n\n{markdown_table(sampled)}\n{line}\n"
        aucs = sample_auc_table(sampled)  # the verifiers' AUC on the very samples the table's methods ranked
        if aucs:
            part += f"\nThe scorers on the samples they ranked:\n\n{aucs}"
        curves = read_curves(plan.out / "curves", level)
        if curves is not None:  # the capped curves come after the N-sample table
            rows, records = curves
            if any(r["method"] == "maj" for r in rows) and records:  # parts merged: every row compared here
                rows = with_intervals([{k: v for k, v in r.items() if k != "vs"} for r in rows], records, "maj",
                                      seed=plan.args.seed)
            data[f"L{level}"]["curves"] = rows
            part += f"\nAccuracy against tokens per problem:\n\n{curves_table(rows)}\n"
            at_path = problems_path(at_maj.with_suffix(".json"))
            at_records = read_problem_records(at_path) if at_path.is_file() else []
            lines = {}
            for tree, key in (("mcts", ""), ("mcts[critic]", "_critic")):  # the PRM's value, the critic's
                if key and not any(r["method"] == tree for r in rows):
                    continue
                lines[f"mcts{key}_at_maj_line"] = matched_budget_line(sampled, at_records, rows, records, f"maj@{n}",
                                                                      tree, plan.args.seed)
                # what each rule's samples held: a choice cannot find a right answer that is not there
                lines[f"within_reach{key}_line"] = within_reach_line(sampled, at_records, rows, records,
                                                                     f"maj@{n}", tree)
            for key, line in lines.items():
                if line:
                    data[f"L{level}"][key] = line
                    part += f"\n{line}\n"
            equal = equal_tokens_lines(sampled, at_records, rows, records, "maj", plan.args.seed)
            if equal:  # a generative verifier's checks counted: against maj at the tokens both wrote
                data[f"L{level}"]["equal_tokens_lines"] = equal
                part += "\n" + "\n\n".join(equal) + "\n"
            if plan.curves(level).with_suffix(".png").is_file():
                part += f"\n![L{level}](curves/L{level}.png)\n"
        parts.append(part)
    for level, sampler in ((level, s) for level in plan.test_levels for s in ("policy", "second")):
        pooled = plan.pool_curves(level, sampler).with_suffix(".json")  # every rule's curve from one pool
        if pooled.is_file():
            saved = json.loads(pooled.read_text())
            data.setdefault(f"L{level}", {})["pool_curves" + ("_second" if sampler == "second" else "")] = saved["rows"]
            who = "the policy's" if sampler == "policy" else "the second policy's"
            parts.append(f"## Held-out L{level}: every rule's curve from one pool of {saved['about']['pool_samples']} "
                         f"samples a problem, {who} ({saved['about'].get('sampler')})\n\nEach budget keeps the "
                         f"pool's samples that fit it in sampling order (as a capped run does); rows differ by their "
                         f"choice alone.\n\n{curves_table(saved['rows'])}"
                         + (f"\nThe scorers on the pool (a choice among one problem's samples gains only as far as "
                            f"its AUC within problems and the pool's reach let it):\n\n"
                            f"{scorers_on_pool_markdown(saved['about']['scorers_on_pool'])}"
                            if saved["about"].get("scorers_on_pool") else "")
                         + f"\n![L{level} pool]({pooled.with_suffix('.png').relative_to(plan.out).as_posix()})\n")
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
