"""Actor/critic reflection (issue 26), SFT then DPO for both roles, in one command: the base model, after
SFT and after SFT+DPO, each evaluated on held-back problems by p1@t1, m1@t5 and p1@t5 (as "Reinforce LLM
Reasoning through Multi-Agent Reflection" reports them), turn-k accuracy and the wrong->right / right->wrong
rates per turn.

    python examples/reflection_dpo.py                          # CPU-sized: Reflection-Arithmetic-v0 level 3
    python examples/reflection_dpo.py --preset gpu_room        # level 4, few SFT examples, checked critic
    python examples/reflection_dpo.py --preset gpu             # level 3, SFT on every train problem
    python examples/reflection_dpo.py --env Reflection-GSM8K-v0 --data_path ../shared/data/gsm8k/train.jsonl \\
        --subset 7217,7473 --sft_config examples/configs/reflection_gsm8k_sft.yaml --max_new_tokens 256
    python examples/reflection_dpo.py --env Reflection-MATH-v0 --data_path ../shared/data/math500 --subset 0,250

Stages, each written under --output_dir and skipped on a rerun once finished (--restart runs them all again;
a stage whose input was just rebuilt runs again too):

1. base/eval.json: the base model on the held-back problems (greedy; --turns actor answers, the critic
   between them; each problem's turns in base/eval.problems.jsonl): p1@t1 (the first answer is right), m1@tT
   (the majority of the T answers is), p1@tT (one of them is), tokens (sampled per episode, both roles),
   acc@t{k}, w2r@t{k}, r2w@t{k}.
2. sft_first/: (a) the actor's first-answer SFT on the gold solutions of --sft_examples TRAIN problems (a
   budget: few examples leave the first answer often wrong, room for reflection to show anything).
3. sft/answers/: (b) that model answers --reflect_problems other TRAIN problems (sampled at
   --answer_temperature, one answer each; right and wrong ones); answers.jsonl, summary.json (right / wrong
   answers used, examples per kind) and samples.md (a few critic and refinement examples).
4. sft/: (c) a second SFT stage, from the first-answer model: critic SFT on (question, answer) -> the
   programmatic oracle's feedback, actor refinement SFT on (question, answer, feedback) -> the gold
   solution, over those answers, mixed with (a)'s first-answer examples so the first answer is kept
   (--critic_style checked: the feedback redoes each step of the answer before its verdict,
   traindata/checked_feedback.py); the model in sft/model (--reflect_sft_iterations; the rest of SFTConfig as
   stage 2's).
   Why two stages rather than one run: (b) needs a model that answers like the actor will, and the critic
   should learn on that model's own mistakes; continuing from it reuses its training instead of redoing it.
5. pairs/: the SFT model plays branched episodes on --pair_problems further TRAIN problems (one answer,
   --pair_feedbacks critic turns on it, --pair_refinements refinements after each; at --pair_temperature);
   `context_pairs` gives actor pairs (a refinement that became right over one that did not, after the same
   feedback) and critic pairs (feedback after which refinements were right more often, over other feedback
   on the same answer); --triples adds pairs from recorded (question, initial, feedback, refined, gold)
   triples. actor.jsonl, critic.jsonl (load_preference_pairs reads them), summary.json (pairs per role,
   ties, dropped by reason) and pairs.md (samples).
6. dpo/: DPO (--loss sigmoid | ipo | length_normalized) from the SFT model on both roles' pairs (one model
   plays both roles, so they train the same weights; --no-critic_pairs leaves the critic's out).
7. sft/eval.json, dpo/eval.json, then reflection.md and reflection.json (rows base, SFT, SFT+DPO), also
   printed, and turn_accuracy.png (turn-k accuracy, one line per stage).

The oracle (lmgym.traindata.oracle_feedback) knows gold steps for Arithmetic-v0 and GSM8K: the first wrong step,
what it should be, redo from there; "correct, keep it" for a right answer. MATH has no step gold: its
feedback comes from the final-answer verdict only ("correct, keep it" or "wrong, redo step by step") and
the refinement target is the row's worked solution.

Held-back problems: the Arithmetic-v0 --level test split's first --eval_episodes problems; for GSM8K and
MATH the rows --subset START,STOP of --data_path (default: the last min(500, half) rows), never trained on:
each training stage draws its own set of the other rows ((b)'s, the pairs', then (a)'s: disjoint). SFT and DPO
settings: --sft_config / --dpo_config (YAML files of SFTConfig / DPOConfig fields) and the flags below; a
rerun with other settings than the folder's (settings.json) needs --restart or another --output_dir.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from common import example_parser  # noqa: E402

from lmgym.algorithms import SFT, DPOConfig, SFTConfig  # noqa: E402
from lmgym.algorithms.dpo import VARIANTS  # noqa: E402
from lmgym.core.atomic_io import atomic_write_text  # noqa: E402
from lmgym.core.jsonl import read_json  # noqa: E402
from lmgym.core.problem_records import problems_path  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.episodes.engine import SamplingSettings  # noqa: E402
from lmgym.evaluation import evaluate_reflection, reflection_episodes  # noqa: E402
from lmgym.evaluation.reflection_critic_metrics import CRITIC_METRICS  # noqa: E402
from lmgym.evaluation.reflection_metrics import plot_turn_accuracy  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402
from lmgym.traindata import load_triples, pairs_from_triples, save_preference_pairs  # noqa: E402
from lmgym.traindata.preference_data import load_preference_pairs  # noqa: E402
from lmgym.traindata.reflection_branching import branched_reflection_episodes  # noqa: E402
from lmgym.traindata.reflection_context_pairs import context_pairs  # noqa: E402
from lmgym.traindata.reflection_sft import (  # noqa: E402
    FEEDBACK_STYLES,
    AnswerRow,
    ReflectionTurnExample,
    actor_refinement_sft_examples,
    answer_rows,
    critic_sft_examples,
    gold_text,
)
from lmgym.training.checkpoints import has_checkpoints  # noqa: E402
from lmgym.training.cli import run_with_clear_errors  # noqa: E402
from lmgym.training.config import load_config  # noqa: E402

ENVS = {"Reflection-Arithmetic-v0": None, "Reflection-GSM8K-v0": "train", "Reflection-MATH-v0": "test"}  # -> split
_SFT_CPU = dict(train_iterations=20, examples_per_iteration=16, micro_batch_size=8, max_length=384,
                learning_rate=5e-5, eval_every=0, eval_at_start=True)
_SFT_GPU = dict(train_iterations=150, examples_per_iteration=64, micro_batch_size=64, max_length=384,
                learning_rate=5e-5, eval_every=50, eval_at_start=True)
_DPO_GPU = dict(train_iterations=60, pairs_per_iteration=64, micro_batch_size=32, max_length=768,
                learning_rate=1e-6, beta=0.1, eval_every=0)
# a GPU's rollout batch: W4c (reflection evaluation, 256 problems x 5 turns) ran at 1.71x the tokens/s of batches
# of 64 on an H200 (RESULTS.md, twenty-sixth session), where most decode steps had run in buckets of 8-16 rows
GPU_BATCH_PROMPTS = 256
PRESETS = {
    # sized for 2 CPU cores (a few minutes): a short look at each stage, not a result
    "cpu": dict(level=3, eval_episodes=32, max_new_tokens=48, critic_style="oracle", sft_examples=512,
                reflect_problems=32, reflect_sft_iterations=20, pair_problems=16, pair_feedbacks=2, pair_refinements=2,
                batch_prompts=64,
                sft=_SFT_CPU,
                dpo=dict(train_iterations=10, pairs_per_iteration=16, micro_batch_size=8, max_length=512,
                         learning_rate=5e-7, beta=0.1, eval_every=0)),
    # the setting of the first GPU runs (level 3, SFT on every train problem): the first answer lands at
    # 96.5% (benchmarks/RESULTS.md, "Reflection: SFT then DPO"), at the ceiling: no room to reflect
    "gpu": dict(level=3, eval_episodes=256, max_new_tokens=64, critic_style="oracle", sft_examples=0,
                reflect_problems=2048, reflect_sft_iterations=100, pair_problems=512, pair_feedbacks=4,
                pair_refinements=2, batch_prompts=GPU_BATCH_PROMPTS, sft=_SFT_GPU, dpo=_DPO_GPU),
    # "room to reflect" (issue 26: the first answer right about 30-60%). Chosen from RESULTS.md's figures for
    # the embedded model (greedy base accuracy 0.8% at level 4; SFT on every train problem 93.8%): level 4,
    # 128 distinct problems seen 6 times (24 x 32 draws). Measured on an H200 (RESULTS.md, "Reflection with a
    # trained critic"): sampled first answers 44-46% right. The critic writes the checked feedback (each step
    # redone, then the verdict; up to 62 tokens, so 96 a turn): on 2026-11-27 the oracle style's critic
    # rejected right answers (100% false alarms after SFT, m1@t5 25.4% < p1@t1 44.5%), the checked one
    # 2.2%, and after DPO reached p1@t1 59.8%, m1@t5 69.9%, p1@t5 70.7%.
    "gpu_room": dict(level=4, eval_episodes=256, max_new_tokens=96, critic_style="checked", sft_examples=128,
                     reflect_problems=1024, reflect_sft_iterations=60, pair_problems=512, pair_feedbacks=4,
                     pair_refinements=2, batch_prompts=GPU_BATCH_PROMPTS,
                     sft={**_SFT_GPU, "train_iterations": 24, "examples_per_iteration": 32, "eval_every": 8},
                     dpo=_DPO_GPU),
}
ROWS = (("base", "base"), ("SFT", "sft"), ("SFT+DPO", "dpo"))  # table row -> stage folder
SAMPLES = 3  # examples / pairs of each kind shown in samples.md and pairs.md


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--preset", choices=sorted(PRESETS), default=None, help="cpu, gpu or gpu_room (default: gpu when CUDA "
                                                                "is available)")
    add("--model", default=EMBEDDED_MODEL, help="hub name, local path, or the embedded default")
    add("--env", choices=sorted(ENVS), default="Reflection-Arithmetic-v0", help="the reflection env")
    add("--level", type=int, default=None, help="Arithmetic-v0 level (preset)")
    add("--data_path", default=None, help="GSM8K / MATH: the data file or folder (None: the hub)")
    add("--subset", default=None, help="GSM8K / MATH: START,STOP rows held back for evaluation, never trained on "
                                       "(default: the last min(500, half) rows)")
    add("--turns", type=int, default=5, help="actor answers per episode (the T of m1@tT, p1@tT; >= 2; default 5)")
    add("--eval_episodes", type=int, default=None, help="held-back problems evaluated (preset)")
    add("--max_new_tokens", type=int, default=None, help="tokens per turn, both roles (preset)")
    add("--sft_examples", type=int, default=None,
        help="(a) the first-answer SFT budget: train problems whose gold solution it trains on (0: all; preset)")
    add("--reflect_problems", type=int, default=None,
        help="(b) train problems the first-answer model answers for critic and refinement SFT (preset)")
    add("--critic_style", choices=FEEDBACK_STYLES, default=None,
        help="(c) the critic's target: oracle (the verdict alone) or checked (each step redone first, then the "
             "verdict; traindata/checked_feedback.py); preset: checked for gpu_room, else oracle")
    add("--answer_temperature", type=float, default=1.0, help="(b)'s sampling temperature, >= 0 (default 1)")
    add("--reflect_sft_iterations", type=int, default=None, help="(c) the second SFT stage's train_iterations "
                                                                 "(preset)")
    add("--pair_problems", type=int, default=None, help="train problems the SFT model plays for pairs (preset)")
    add("--pair_feedbacks", type=int, default=None, help="critic turns on each pair problem's answer (preset)")
    add("--pair_refinements", type=int, default=None, help="refinements after each of those feedbacks (preset)")
    add("--pair_temperature", type=float, default=1.0, help="sampling temperature of those episodes, > 0 (default 1)")
    add("--critic_pairs", action=argparse.BooleanOptionalAction, default=True,
        help="train on the critic's pairs too (the one model plays both roles; default on)")
    add("--triples", default=None, help="a JSONL file of recorded (question, initial, feedback, refined, gold) "
                                        "triples whose pairs join the rollout pairs")
    add("--loss", choices=sorted(VARIANTS), default="sigmoid", help="DPO loss (default sigmoid)")
    add("--sft_config", default=None, help="YAML file of SFTConfig fields (flags override it)")
    add("--dpo_config", default=None, help="YAML file of DPOConfig fields (flags override it)")
    add("--sft_iterations", type=int, default=None, help="(a) SFT train_iterations (preset)")
    add("--sft_learning_rate", type=float, default=None, help="SFT learning_rate, both SFT stages (preset)")
    add("--dpo_iterations", type=int, default=None, help="DPO train_iterations (preset)")
    add("--dpo_learning_rate", type=float, default=None, help="DPO learning_rate (preset)")
    add("--beta", type=float, default=None, help="DPO beta (preset)")
    add("--batch_prompts", type=int, default=None,
        help="problems per rollout batch (default: the preset's, 64 on a CPU, 256 on a GPU)")
    add("--seed", type=int, default=0, help="seeds data draws, sampling and training (default 0)")
    add("--progress", action=argparse.BooleanOptionalAction, default=True, help="progress bars (default on)")
    add("--output_dir", default=None, help="the run folder (default runs/reflection-dpo-<preset>)")
    add("--restart", action="store_true", help="run every stage again, even those finished")
    return parser


def main(argv: list[str] | None = None) -> None:
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


# ---------------------------------------------------------------------------------------------- settings
def resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the preset's values of the flags left unset; check the script's own flags (one line each)."""
    import torch

    args.preset = args.preset or ("gpu" if torch.cuda.is_available() else "cpu")
    preset = PRESETS[args.preset]
    for name in ("level", "eval_episodes", "max_new_tokens", "critic_style", "sft_examples", "reflect_problems",
                 "reflect_sft_iterations", "pair_problems", "pair_feedbacks", "pair_refinements", "batch_prompts"):
        if getattr(args, name) is None:
            setattr(args, name, preset[name])
    if args.turns < 2:
        raise ValueError(f"--turns must be >= 2 (a refinement is the second answer), got {args.turns}")
    for name in ("eval_episodes", "max_new_tokens", "reflect_problems", "reflect_sft_iterations", "pair_problems",
                 "pair_feedbacks", "pair_refinements", "batch_prompts"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.sft_examples < 0:
        raise ValueError(f"--sft_examples must be >= 0 (0: all), got {args.sft_examples}")
    if not args.answer_temperature >= 0:
        raise ValueError(f"--answer_temperature must be >= 0, got {args.answer_temperature}")
    if not args.pair_temperature > 0:
        raise ValueError(f"--pair_temperature must be > 0 (the pair episodes must differ), got {args.pair_temperature}")
    if ENVS[args.env] is None and (args.data_path or args.subset):
        raise ValueError(f"--data_path and --subset are for Reflection-GSM8K-v0 / Reflection-MATH-v0, not {args.env}")
    args.output_dir = args.output_dir or f"runs/reflection-dpo-{args.preset}"
    return args


def trainer_configs(args: argparse.Namespace) -> tuple[SFTConfig, SFTConfig, DPOConfig]:
    """The first-answer SFTConfig, the reflection SFTConfig and the DPOConfig: the preset < --sft_config /
    --dpo_config < the flags; run folders under --output_dir."""
    out, preset = Path(args.output_dir), PRESETS[args.preset]
    common = dict(seed=args.seed, progress=args.progress)
    sft = {"learning_rate": args.sft_learning_rate, **common}
    first = load_config(SFTConfig, args.sft_config, {"train_iterations": args.sft_iterations, **sft,
                                                     "output_dir": str(out / "sft_first")}, preset["sft"])
    reflect = load_config(SFTConfig, args.sft_config, {"train_iterations": args.reflect_sft_iterations, **sft,
                                                       "output_dir": str(out / "sft")}, preset["sft"])
    dpo = load_config(DPOConfig, args.dpo_config, {
        "train_iterations": args.dpo_iterations, "learning_rate": args.dpo_learning_rate, "beta": args.beta,
        **common, "output_dir": str(out / "dpo")}, preset["dpo"])
    return first, reflect, dpo


def check_settings(args: argparse.Namespace) -> None:
    """Write <output_dir>/settings.json; a folder run with other settings needs --restart (one line)."""
    path = Path(args.output_dir) / "settings.json"
    settings = {k: v for k, v in sorted(vars(args).items()) if k not in ("restart", "progress")}
    if path.is_file() and not args.restart:
        before = read_json(path)  # one-line ValueError for an unreadable file
        if not isinstance(before, dict):
            raise ValueError(f"{path}: expected a JSON object of settings, got {type(before).__name__}")
        before.setdefault("critic_style", "oracle")  # folders from before the flag existed ran the oracle style
        changed = sorted(k for k in set(before) | set(settings) if before.get(k) != settings.get(k))
        if changed:
            raise ValueError(f"{args.output_dir} was run with other settings ({', '.join(changed)}); pass --restart "
                             f"to run every stage again there, or another --output_dir")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(settings, indent=1) + "\n")


# ---------------------------------------------------------------------------------------------- problems
def held_back(args: argparse.Namespace) -> tuple[int, int] | None:
    """GSM8K / MATH: the [start, stop) rows held back for evaluation; None for Arithmetic (its test split)."""
    split = ENVS[args.env]
    if split is None:
        return None
    rows = make(args.env, data_path=args.data_path, split=split).num_problems
    if args.subset is None:
        held = min(500, rows // 2)
        if held < 1:
            raise ValueError(f"{args.data_path} has {rows} row(s): too few to hold any back")
        return rows - held, rows
    try:
        start, stop = (int(v) for v in args.subset.split(","))
    except ValueError:
        raise ValueError(f"--subset must be START,STOP (two integers), got {args.subset!r}") from None
    if not 0 <= start < stop <= rows or stop - start == rows:
        raise ValueError(f"--subset {args.subset}: need 0 <= START < STOP <= {rows}, leaving rows to train on")
    return start, stop


def task_kwargs(args: argparse.Namespace, evaluation: bool, held: tuple[int, int] | None) -> dict[str, Any]:
    """The reflection env's task arguments: the held-back problems (evaluation), or the training ones."""
    split = ENVS[args.env]
    if split is None:
        return {"level": args.level, "split": "test" if evaluation else "train"}
    return {"data_path": args.data_path, "split": split, **({"subset": held} if evaluation else {})}


def train_draws(args: argparse.Namespace, num_problems: int, held: tuple[int, int] | None) -> dict[str, list[int]]:
    """Disjoint train problem indices: "reflect" (b), "pairs" and "first" (a: --sft_examples of the rest, 0: all
    of it), from one seeded order of the problems outside the held-back ones."""
    order = [i for i in range(num_problems) if held is None or not held[0] <= i < held[1]]
    random.Random(f"{args.seed}:train").shuffle(order)
    need = args.reflect_problems + args.pair_problems + max(args.sft_examples, 1)
    if len(order) < need:
        raise ValueError(f"{len(order)} train problems, but --reflect_problems, --pair_problems and --sft_examples "
                         f"need {need}")
    r, p = args.reflect_problems, args.reflect_problems + args.pair_problems
    first = order[p:] if args.sft_examples == 0 else order[p:p + args.sft_examples]
    return {"reflect": sorted(order[:r]), "pairs": sorted(order[r:p]), "first": sorted(first)}


def first_answer_examples(env, indices: Sequence[int]) -> list[ReflectionTurnExample]:
    """The gold solution of each problem as the actor's first answer, laid out as the episode engine does."""
    base = getattr(env, "unwrapped", env)
    examples = []
    for index in indices:
        problem = base.get_problem(index)
        examples.append(ReflectionTurnExample(base.build_prompt(problem), (), gold_text(problem), base.critic_request,
                                              base.refine_request, base.turn_role))
    return examples


# ---------------------------------------------------------------------------------------------- stages
class Pipeline:
    """The stages of the module docstring over one run folder."""

    def __init__(self, args: argparse.Namespace):
        self.args, self.out = args, Path(args.output_dir)
        self.first_config, self.reflect_config, self.dpo_config = trainer_configs(args)
        self.held = held_back(args)
        self.eval_env = make(args.env, max_turns=args.turns, **task_kwargs(args, True, self.held))
        self.train_env = make(args.env, max_turns=args.turns, **task_kwargs(args, False, self.held))
        self.draws = train_draws(args, self.train_env.num_problems, self.held)
        self.stages: tuple[tuple[str, Path, tuple[str, ...], Callable[[bool], None]], ...] = (
            ("base", self.out / "base" / "eval.json", (), lambda resume: self.evaluate("base", args.model)),
            ("sft first", self.out / "sft_first" / "model" / "config.json", (), self.sft_first),
            ("sft answers", self.out / "sft" / "answers" / "summary.json", ("sft first",),
             lambda resume: self.answers()),
            ("sft", self.out / "sft" / "model" / "config.json", ("sft answers",), self.sft),
            ("sft eval", self.out / "sft" / "eval.json", ("sft",), lambda resume: self.evaluate("sft")),
            ("pairs", self.out / "pairs" / "summary.json", ("sft",), lambda resume: self.pairs()),
            ("dpo", self.out / "dpo" / "model" / "config.json", ("pairs",), self.dpo),
            ("dpo eval", self.out / "dpo" / "eval.json", ("dpo",), lambda resume: self.evaluate("dpo")),
        )

    def run(self) -> dict[str, Any]:
        """Every stage not finished (or all, with --restart; or whose input was rebuilt); then the table."""
        rebuilt: set[str] = set()
        for name, done, inputs, stage in self.stages:
            forced = self.args.restart or bool(rebuilt & set(inputs))
            if done.is_file() and not forced:
                print(f"[{name}] finished earlier ({done}): skipped")
                continue
            print(f"[{name}] running")
            start = time.perf_counter()
            stage(not forced)  # resume a trainer's own checkpoints only when nothing before it was rebuilt
            print(f"[{name}] done in {(time.perf_counter() - start) / 60:.1f} min")
            rebuilt.add(name)
        return self.report()

    def policy(self, stage: str) -> HFPolicy:
        return HFPolicy(str(self.out / stage / "model"))

    def evaluate(self, stage: str, model: str | None = None) -> None:
        """Greedy reflection metrics of the stage's model on the held-back problems -> <stage>/eval.json, each
        problem's record in <stage>/eval.problems.jsonl."""
        a = self.args
        policy = HFPolicy(model) if model is not None else self.policy(stage)
        path = self.out / stage / "eval.json"
        result = evaluate_reflection(policy, self.eval_env, a.eval_episodes, a.max_new_tokens, 0.0, a.turns,
                                     a.batch_prompts, a.seed, records_path=problems_path(path))
        write_json(path, result)

    def held_out(self) -> list[ReflectionTurnExample]:
        """First-answer gold solutions of held-back problems, for the SFT stages' eval_loss."""
        return first_answer_examples(self.eval_env, range(min(self.args.eval_episodes, 256,
                                                               self.eval_env.num_problems)))

    def sft_first(self, resume: bool) -> None:
        """(a): the actor's first answer, SFT on --sft_examples gold solutions -> sft_first/model."""
        train = first_answer_examples(self.train_env, self.draws["first"])
        print(f"SFT (first answer): {len(train)} gold solutions of train problems")
        trainer = SFT(HFPolicy(self.args.model), train, self.first_config, held_out=self.held_out())
        trainer.train(resume=resume and has_checkpoints(self.out / "sft_first"))
        trainer.save_model(self.out / "sft_first" / "model")

    def answers(self) -> None:
        """(b): the first-answer model's own answers on --reflect_problems train problems -> sft/answers/."""
        a, folder = self.args, self.out / "sft" / "answers"
        env = make(a.env, max_turns=1, **task_kwargs(a, False, self.held))  # first answers only
        played = reflection_episodes(self.policy("sft_first"), env, max_new_tokens=a.max_new_tokens,
                                     temperature=a.answer_temperature, batch_prompts=a.batch_prompts, seed=a.seed,
                                     problems=self.draws["reflect"])
        rows = answer_rows(played, env)
        lines = [json.dumps({"index": i, "answer": r.answer, "correct": r.correct})
                 for i, r in zip(self.draws["reflect"], rows)]
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "answers.jsonl", "".join(line + "\n" for line in lines))
        critic, refine = self.reflection_examples(rows)
        right = sum(bool(r.correct) for r in rows)
        summary = {"answers": len(rows), "right": right, "wrong": len(rows) - right,
                   "sampled_first_answer_accuracy": right / len(rows), "first_answer_examples":
                   len(self.draws["first"]), "critic_examples": len(critic), "refinement_examples": len(refine)}
        atomic_write_text(folder / "samples.md", examples_markdown(critic, refine, rows))
        write_json(folder / "summary.json", summary)
        print(f"answers: {right} right, {len(rows) - right} wrong (sampled at T={a.answer_temperature}); "
              f"{len(critic)} critic and {len(refine)} refinement examples")

    def reflection_examples(self, rows: list[AnswerRow]) -> tuple[list, list]:
        style = self.args.critic_style
        return (critic_sft_examples(self.train_env, rows, style),
                actor_refinement_sft_examples(self.train_env, rows, style))

    def sft(self, resume: bool) -> None:
        """(c): critic + refinement SFT with (a)'s examples, from the first-answer model -> sft/model."""
        path = self.out / "sft" / "answers" / "answers.jsonl"
        rows = [AnswerRow(self.train_env.get_problem(r["index"]), r["answer"], r["correct"])
                for r in map(json.loads, path.read_text().splitlines())]
        critic, refine = self.reflection_examples(rows)
        first = first_answer_examples(self.train_env, self.draws["first"])
        print(f"SFT (both roles): {len(critic)} critic, {len(refine)} refinement and {len(first)} first-answer "
              f"examples")
        trainer = SFT(self.policy("sft_first"), critic + refine + first, self.reflect_config,
                      held_out=self.held_out())
        trainer.train(resume=resume and has_checkpoints(self.out / "sft"))
        trainer.save_model(self.out / "sft" / "model")

    def pairs(self) -> None:
        """Both roles' pairs from the SFT model's branched episodes on train problems (+ --triples) -> pairs/."""
        a = self.args
        settings = SamplingSettings(a.max_new_tokens, a.pair_temperature, 1.0)
        leaves = branched_reflection_episodes(self.policy("sft"), self.train_env, self.draws["pairs"],
                                              feedbacks=a.pair_feedbacks, refinements=a.pair_refinements,
                                              settings=settings, seed=a.seed, batch_problems=a.batch_prompts)
        found = context_pairs(leaves, self.train_env)
        pairs, counts = found.pairs(), found.counts()
        if a.triples is not None:
            recorded = pairs_from_triples(load_triples(a.triples), actor_context="feedback",
                                          env=getattr(self.train_env, "unwrapped", self.train_env))
            counts.update({f"{role}_from_triples": len(more) for role, more in recorded.items()})
            pairs = {role: kept + recorded[role] for role, kept in pairs.items()}
        for role, kept in pairs.items():
            save_preference_pairs(kept, self.out / "pairs" / f"{role}.jsonl")
        first_right = sum(bool(t.info["turn_correct"][0]) for t in leaves) / max(len(leaves), 1)
        refined_right = sum(bool(t.info["turn_correct"][-1]) for t in leaves) / max(len(leaves), 1)
        summary = {**counts, "episodes": len(leaves), "problems": len(self.draws["pairs"]),
                   "sampled_first_right": first_right, "sampled_refinement_right": refined_right}
        atomic_write_text(self.out / "pairs" / "pairs.md", pairs_markdown(found.samples(SAMPLES), counts))
        print(f"pairs: actor {len(pairs['actor'])}, critic {len(pairs['critic'])} "
              f"(ties: actor {found.ties['actor']}, critic {found.ties['critic']}; sampled first answers right "
              f"{first_right:.1%}, refinements right {refined_right:.1%})")
        write_json(self.out / "pairs" / "summary.json", summary)

    def dpo(self, resume: bool) -> None:
        roles = ("actor", "critic") if self.args.critic_pairs else ("actor",)
        files = [self.out / "pairs" / f"{role}.jsonl" for role in roles]
        pairs = [pair for path in files if path.stat().st_size for pair in load_preference_pairs(path)]
        if not pairs:
            raise ValueError(f"no preference pairs in {self.out / 'pairs'}: every context of the SFT model's episodes "
                             f"was a tie (see pairs/summary.json); raise --pair_problems, --pair_feedbacks or "
                             f"--pair_refinements, or give --triples")
        print(f"DPO ({self.args.loss}) on {len(pairs)} pairs ({', '.join(roles)})")
        trainer = VARIANTS[self.args.loss](self.policy("sft"), pairs, self.dpo_config)
        trainer.train(resume=resume and has_checkpoints(self.out / "dpo"))
        trainer.save_model(self.out / "dpo" / "model")

    # ------------------------------------------------------------------------------------------ the table
    def report(self) -> dict[str, Any]:
        """reflection.json, reflection.md (rows base, SFT, SFT+DPO) and turn_accuracy.png; prints the table."""
        a, t = self.args, self.args.turns
        columns = ("p1@t1", f"m1@t{t}", f"p1@t{t}")
        turn_columns = (*(f"acc@t{k}" for k in range(1, t + 1)), *(f"{rate}@t{k}" for rate in ("w2r", "r2w")
                                                                     for k in range(2, t + 1)))
        rows, results = [], {}
        for label, stage in ROWS:
            results[label] = json.loads((self.out / stage / "eval.json").read_text())
            rows.append({"stage": label, **{c: results[label][c] for c in (*columns, *turn_columns)},
                         **{c: results[label].get(c) for c in CRITIC_METRICS},  # absent from older eval.json
                         "tokens": results[label]["mean_length"]})
        where = (f"{a.env} level {a.level}, test split" if ENVS[a.env] is None
                 else f"{a.env} {a.data_path or '(hub)'} rows {self.held[0]}-{self.held[1]}")
        report = {"env": a.env, "held_back": where, "episodes": a.eval_episodes, "turns": t, "model": a.model,
                  "loss": a.loss, "sft": json.loads((self.out / "sft" / "answers" / "summary.json").read_text()),
                  "pairs": json.loads((self.out / "pairs" / "summary.json").read_text()), "rows": rows}
        lines = [f"# Reflection: SFT then DPO, both roles ({a.model})", "",
                 (f"The first {a.eval_episodes} held-back problems ({where}), greedy, {t} actor answers with the "
                  f"critic between them; one model plays both roles. tokens: sampled per episode, both roles. "
                  f"acc@tk: the answer at turn k is right; w2r@tk / r2w@tk: wrong (right) at turn k-1 and right "
                  f"(wrong) at turn k, out of those wrong (right) at turn k-1."), "",
                 *markdown_table(["stage", *columns, "tokens"],
                                 [[r["stage"], *(percent(r[c]) for c in columns), f"{r['tokens']:.0f}"]
                                  for r in rows]), "",
                 *markdown_table(["stage", *turn_columns], [[r["stage"], *(percent(r[c]) for c in turn_columns)]
                                                            for r in rows]), "",
                 ("What the critic said and what the actor did next, pooled over the critic turns "
                  "(evaluation/reflection_critic_metrics.py): false alarm = rejected a right answer; miss = approved "
                  "a wrong one; then the actor's next answer after each kind of verdict."), "",
                 *markdown_table(["stage", *CRITIC_METRICS], [[r["stage"], *(percent(r[c]) for c in CRITIC_METRICS)]
                                                             for r in rows])]
        table = "\n".join(lines) + "\n"
        write_json(self.out / "reflection.json", report)
        atomic_write_text(self.out / "reflection.md", table)
        plot_turn_accuracy(results, self.out / "turn_accuracy.png", f"turn-k accuracy, {where}")
        print(table)
        return report


# ---------------------------------------------------------------------------------------------- markdown
def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|---" * len(header) + "|", *("| " + " | ".join(r) + " |" for r in rows)]


def fenced(text: str) -> str:
    return "```\n" + text.replace("```", "'''") + "\n```"


def examples_markdown(critic: list[ReflectionTurnExample], refine: list[ReflectionTurnExample],
                      rows: list[AnswerRow]) -> str:
    """A few critic and refinement SFT examples (a wrong answer first where there is one)."""
    order = sorted(range(len(rows)), key=lambda i: bool(rows[i].correct))[:SAMPLES]
    parts = ["# Reflection SFT samples", ""]
    for kind, examples in (("critic", critic), ("refinement", refine)):
        for i in order:
            e = asdict(examples[i])
            parts += [f"## {kind} example (answer {'right' if rows[i].correct else 'wrong'})", "", "prompt:",
                      fenced(e["prompt"]), "", *(x for n, action in enumerate(e["actions"])
                                                 for x in (("answer:" if n % 2 == 0 else "feedback:"), fenced(action))),
                      "", "target (trained on):", fenced(e["target"]), ""]
    return "\n".join(parts)


def pairs_markdown(samples: dict[str, list], counts: dict[str, int]) -> str:
    """Counts and a few pairs of each role."""
    parts = ["# Reflection pairs", "", *(f"- {k}: {v}" for k, v in counts.items()), ""]
    for role, pairs in samples.items():
        if not pairs:
            parts += [f"## {role}: no pair", ""]
        for n, pair in enumerate(pairs, start=1):
            parts += [f"## {role} pair {n}", "", "prompt:", fenced(pair.prompt), "", "chosen:", fenced(pair.chosen), "",
                      "rejected:", fenced(pair.rejected), ""]
    return "\n".join(parts)


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(value, indent=1) + "\n")


def run(args: argparse.Namespace) -> dict[str, Any]:
    args = resolve(args)
    pipeline = Pipeline(args)  # every config and data source checked before any stage runs
    check_settings(args)
    print(f"preset={args.preset} model={args.model} env={args.env} level={args.level} output_dir={args.output_dir}")
    return pipeline.run()


if __name__ == "__main__":
    main()
