"""Actor/critic reflection, SFT then DPO, in one command: the base model, after SFT, and after SFT+DPO,
each evaluated on held-back problems by p1@t1, m1@t5 and p1@t5 (as "Reinforce LLM Reasoning through
Multi-Agent Reflection" reports them).

    python examples/reflection_dpo.py                          # CPU-sized: Reflection-Arithmetic-v0 level 3
    python examples/reflection_dpo.py --preset gpu             # about 4 minutes on one H100 (embedded model)
    python examples/reflection_dpo.py --env Reflection-GSM8K-v0 --data_path ../shared/data/gsm8k/train.jsonl \\
        --subset 7217,7473 --sft_config statics/configs/reflection_gsm8k_sft.yaml --max_new_tokens 256
        # about 8 minutes on one H100 (GSM8K solutions need longer SFT rows and turns than the preset's)
    python examples/reflection_dpo.py --env Reflection-MATH-v0 --data_path ../shared/data/math500 --subset 0,250

Stages, each written under --output_dir and skipped on a rerun once finished (--restart runs them all again;
a stage whose input was just rebuilt runs again too):

1. base/eval.json: the base model on the held-back problems (greedy; --turns actor answers, the critic
   between them): p1@t1 (the first answer is right), m1@tT (the majority of the T answers is), p1@tT (one
   of them is), tokens (sampled per episode, both roles).
2. sft/: SFT on gold solutions of TRAIN problems as the actor's first answer (Arithmetic-v0 step-by-step
   gold, GSM8K's solutions, MATH's solutions); the model in sft/model.
3. pairs/: the SFT model plays reflection episodes on TRAIN problems (--pair_samples each, sampled at
   --pair_temperature > 0); `pairs_from_episodes` turns every refinement round into actor pairs (the correct
   answer chosen over the incorrect one) and critic pairs (feedback that led to a correct refinement over
   feedback that did not); --triples adds pairs from recorded (question, initial, feedback, refined, gold)
   JSONL triples. Written as actor.jsonl and critic.jsonl (load_preference_pairs reads them).
4. dpo/: DPO (--loss sigmoid | ipo | length_normalized) from the SFT model on the pairs; the model in
   dpo/model.
5. sft/eval.json, dpo/eval.json, then reflection.md and reflection.json: the table (rows base, SFT,
   SFT+DPO), also printed.

One model plays both roles (actor and critic) at every stage, so the actor's and the critic's pairs train
the same weights in one DPO run (--no-critic_pairs leaves the critic's out). Held-back problems: the
Arithmetic-v0 --level test split's first --eval_episodes problems; for GSM8K and MATH the rows --subset
START,STOP of --data_path (default: the last min(500, half) rows), never trained on: SFT and the pairs use the
other rows. SFT and DPO settings: --sft_config / --dpo_config (YAML files of SFTConfig / DPOConfig fields)
and the flags below; a rerun with other settings than the folder's (settings.json) needs --restart or another
--output_dir.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms import DPOConfig, evaluate_reflection, reflection_episodes, reflection_metrics, SFT, SFTConfig  # noqa: E402
from traindata import arithmetic_sft_examples, gsm8k_sft_examples, load_triples, pairs_from_episodes, pairs_from_triples, save_preference_pairs  # noqa: E402
from core.atomic_io import atomic_write_text  # noqa: E402
from training.cli import example_parser, run_with_clear_errors  # noqa: E402
from training.config import load_config  # noqa: E402
from algorithms.dpo import VARIANTS  # noqa: E402
from traindata.preference_data import load_preference_pairs  # noqa: E402
from traindata.reflection_pairs import ACTOR_CONTEXTS  # noqa: E402
from traindata.sft_data import math_sft_examples  # noqa: E402
from envs import make  # noqa: E402
from core.jsonl import read_json  # noqa: E402
from policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402

ENVS = {"Reflection-Arithmetic-v0": None, "Reflection-GSM8K-v0": "train", "Reflection-MATH-v0": "test"}  # -> split
PRESETS = {
    # sized for 2 CPU cores (a few minutes): a short look at each stage, not a result
    "cpu": dict(eval_episodes=32, max_new_tokens=48, sft_examples=512, pair_problems=32, pair_samples=2,
                sft=dict(train_iterations=20, examples_per_iteration=16, micro_batch_size=8, max_length=256,
                         learning_rate=5e-5, eval_every=0, eval_at_start=True),
                dpo=dict(train_iterations=10, pairs_per_iteration=16, micro_batch_size=8, max_length=512,
                         learning_rate=5e-7, beta=0.1, eval_every=0)),
    # about 4 minutes on one H100 with the embedded 135M model (3.9 at level 3, 3.4 at level 4, measured)
    "gpu": dict(eval_episodes=256, max_new_tokens=64, sft_examples=0, pair_problems=512, pair_samples=4,
                sft=dict(train_iterations=150, examples_per_iteration=64, micro_batch_size=64, max_length=256,
                         learning_rate=5e-5, eval_every=50, eval_at_start=True),
                dpo=dict(train_iterations=60, pairs_per_iteration=64, micro_batch_size=32, max_length=768,
                         learning_rate=1e-6, beta=0.1, eval_every=0)),
}
ROWS = (("base", "base"), ("SFT", "sft"), ("SFT+DPO", "dpo"))  # table row -> stage folder


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--preset", choices=sorted(PRESETS), default=None, help="cpu or gpu (default: gpu when CUDA is available)")
    add("--model", default=EMBEDDED_MODEL, help="hub name, local path, or the embedded default")
    add("--env", choices=sorted(ENVS), default="Reflection-Arithmetic-v0", help="the reflection env")
    add("--level", type=int, default=3, help="Arithmetic-v0 level (default 3)")
    add("--data_path", default=None, help="GSM8K / MATH: the data file or folder (None: the hub)")
    add("--subset", default=None, help="GSM8K / MATH: START,STOP rows held back for evaluation, never trained on "
                                       "(default: the last min(500, half) rows)")
    add("--turns", type=int, default=5, help="actor answers per episode (the T of m1@tT, p1@tT; default 5)")
    add("--eval_episodes", type=int, default=None, help="held-back problems evaluated (preset)")
    add("--max_new_tokens", type=int, default=None, help="tokens per turn, both roles (preset)")
    add("--sft_examples", type=int, default=None, help="Arithmetic: train problems drawn for SFT (0: all; preset)")
    add("--pair_problems", type=int, default=None, help="train problems the SFT model plays for pairs (preset)")
    add("--pair_samples", type=int, default=None, help="episodes per pair problem (preset)")
    add("--pair_temperature", type=float, default=1.0, help="sampling temperature of those episodes, > 0 (default 1)")
    add("--actor_context", choices=ACTOR_CONTEXTS, default="question",
        help="an actor pair's prompt: the question, or the transcript up to the feedback (default question)")
    add("--critic_pairs", action=argparse.BooleanOptionalAction, default=True,
        help="train on the critic's pairs too (the one model plays both roles; default on)")
    add("--triples", default=None, help="a JSONL file of recorded (question, initial, feedback, refined, gold) "
                                        "triples whose pairs join the rollout pairs")
    add("--loss", choices=sorted(VARIANTS), default="sigmoid", help="DPO loss (default sigmoid)")
    add("--sft_config", default=None, help="YAML file of SFTConfig fields (flags override it)")
    add("--dpo_config", default=None, help="YAML file of DPOConfig fields (flags override it)")
    add("--sft_iterations", type=int, default=None, help="SFT train_iterations (preset)")
    add("--sft_learning_rate", type=float, default=None, help="SFT learning_rate (preset)")
    add("--dpo_iterations", type=int, default=None, help="DPO train_iterations (preset)")
    add("--dpo_learning_rate", type=float, default=None, help="DPO learning_rate (preset)")
    add("--beta", type=float, default=None, help="DPO beta (preset)")
    add("--batch_prompts", type=int, default=64, help="problems per rollout batch (default 64)")
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
    for name in ("eval_episodes", "max_new_tokens", "sft_examples", "pair_problems", "pair_samples"):
        if getattr(args, name) is None:
            setattr(args, name, preset[name])
    for name in ("turns", "eval_episodes", "max_new_tokens", "pair_problems", "pair_samples", "batch_prompts"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.sft_examples < 0:
        raise ValueError(f"--sft_examples must be >= 0, got {args.sft_examples}")
    if not args.pair_temperature > 0:
        raise ValueError(f"--pair_temperature must be > 0 (the pair episodes must differ), got {args.pair_temperature}")
    if ENVS[args.env] is None and (args.data_path or args.subset):
        raise ValueError(f"--data_path and --subset are for Reflection-GSM8K-v0 / Reflection-MATH-v0, not {args.env}")
    args.output_dir = args.output_dir or f"runs/reflection-dpo-{args.preset}"
    return args


def trainer_configs(args: argparse.Namespace) -> tuple[SFTConfig, DPOConfig]:
    """SFTConfig and DPOConfig: the preset < --sft_config / --dpo_config < the flags; run folders under
    --output_dir."""
    out, preset = Path(args.output_dir), PRESETS[args.preset]
    common = dict(seed=args.seed, progress=args.progress)
    sft = load_config(SFTConfig, args.sft_config, {
        "train_iterations": args.sft_iterations, "learning_rate": args.sft_learning_rate, **common,
        "output_dir": str(out / "sft")}, preset["sft"])
    dpo = load_config(DPOConfig, args.dpo_config, {
        "train_iterations": args.dpo_iterations, "learning_rate": args.dpo_learning_rate, "beta": args.beta,
        **common, "output_dir": str(out / "dpo")}, preset["dpo"])
    return sft, dpo


def check_settings(args: argparse.Namespace) -> None:
    """Write <output_dir>/settings.json; a folder run with other settings needs --restart (one line)."""
    path = Path(args.output_dir) / "settings.json"
    settings = {k: v for k, v in sorted(vars(args).items()) if k not in ("restart", "progress")}
    if path.is_file() and not args.restart:
        before = read_json(path)  # one-line ValueError for an unreadable file
        if not isinstance(before, dict):
            raise ValueError(f"{path}: expected a JSON object of settings, got {type(before).__name__}")
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


def train_indices(num_problems: int, held: tuple[int, int] | None) -> list[int]:
    """Problem indices that may be trained on: all of a train split, or the rows outside the held-back ones."""
    return [i for i in range(num_problems) if held is None or not held[0] <= i < held[1]]


def sft_examples(args: argparse.Namespace, held: tuple[int, int] | None) -> tuple[list, list]:
    """(train, held-out) gold solutions as the actor's first answer: Arithmetic's train / test split, or the
    rows outside / inside the held-back subset of GSM8K or MATH."""
    if ENVS[args.env] is None:
        train = arithmetic_sft_examples(args.level, "train", args.sft_examples or None, args.seed)
        return train, arithmetic_sft_examples(args.level, "test", min(args.eval_episodes, 256), args.seed)
    if args.env == "Reflection-GSM8K-v0":
        gold = gsm8k_sft_examples(args.data_path, None, "single", "train")
    else:
        gold = math_sft_examples(args.data_path, None, "test")
    keep = set(train_indices(len(gold), held))
    return [e for k, e in enumerate(gold) if k in keep], [e for k, e in enumerate(gold) if k not in keep][:256]


# ---------------------------------------------------------------------------------------------- stages
class Pipeline:
    """The stages of the module docstring over one run folder."""

    def __init__(self, args: argparse.Namespace):
        self.args, self.out = args, Path(args.output_dir)
        self.sft_config, self.dpo_config = trainer_configs(args)
        self.held = held_back(args)
        self.eval_env = make(args.env, max_turns=args.turns, **task_kwargs(args, True, self.held))
        self.train_env = make(args.env, max_turns=args.turns, **task_kwargs(args, False, self.held))
        self.stages: tuple[tuple[str, Path, tuple[str, ...], Callable[[bool], None]], ...] = (
            ("base", self.out / "base" / "eval.json", (), lambda resume: self.evaluate("base", args.model)),
            ("sft", self.out / "sft" / "model" / "config.json", (), self.sft),
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
        """Greedy reflection metrics of the stage's model on the held-back problems -> <stage>/eval.json."""
        a = self.args
        policy = HFPolicy(model) if model is not None else self.policy(stage)
        result = evaluate_reflection(policy, self.eval_env, a.eval_episodes, a.max_new_tokens, 0.0, a.turns,
                                     a.batch_prompts, a.seed)
        write_json(self.out / stage / "eval.json", result)

    def sft(self, resume: bool) -> None:
        train, held = sft_examples(self.args, self.held)
        print(f"SFT: {len(train)} gold solutions of train problems, {len(held)} held back for eval_loss")
        trainer = SFT(HFPolicy(self.args.model), train, self.sft_config, held_out=held)
        trainer.train(resume=resume and (self.out / "sft" / "checkpoints").is_dir())
        trainer.save_model(self.out / "sft" / "model")

    def pairs(self) -> None:
        """Pairs from the SFT model's sampled episodes on train problems (+ --triples) -> pairs/."""
        a = self.args
        candidates = train_indices(self.train_env.num_problems, self.held)
        problems = sorted(random.Random(f"{a.seed}:pairs").sample(candidates, min(a.pair_problems, len(candidates))))
        played = reflection_episodes(self.policy("sft"), self.train_env, max_new_tokens=a.max_new_tokens,
                                     temperature=a.pair_temperature, batch_prompts=a.batch_prompts, seed=a.seed,
                                     problems=problems, samples=a.pair_samples)
        pairs = pairs_from_episodes(played, self.train_env, actor_context=a.actor_context)
        counts = {f"{role}_from_episodes": len(found) for role, found in pairs.items()}
        if a.triples is not None:
            recorded = pairs_from_triples(load_triples(a.triples), actor_context=a.actor_context,
                                          env=getattr(self.train_env, "unwrapped", self.train_env))
            counts.update({f"{role}_from_triples": len(found) for role, found in recorded.items()})
            pairs = {role: found + recorded[role] for role, found in pairs.items()}
        for role, found in pairs.items():
            save_preference_pairs(found, self.out / "pairs" / f"{role}.jsonl")
        sampled = reflection_metrics(played, a.turns)
        summary = {**counts, "episodes": len(played), "problems": len(problems),
                   **{f"sampled_{k}": v for k, v in sampled.items() if k != "episodes"}}
        print("pairs: " + ", ".join(f"{k} {v}" for k, v in counts.items()) +
              f" (the SFT model's sampled episodes: p1@t1 {sampled['p1@t1']:.1%})")
        write_json(self.out / "pairs" / "summary.json", summary)

    def dpo(self, resume: bool) -> None:
        roles = ("actor", "critic") if self.args.critic_pairs else ("actor",)
        files = [self.out / "pairs" / f"{role}.jsonl" for role in roles]
        pairs = [pair for path in files if path.stat().st_size for pair in load_preference_pairs(path)]
        if not pairs:
            raise ValueError(f"no preference pairs in {self.out / 'pairs'}: the SFT model's episodes had no round "
                             f"with one answer right and the other wrong; raise --pair_problems or "
                             f"--pair_samples, or give --triples")
        print(f"DPO ({self.args.loss}) on {len(pairs)} pairs ({', '.join(roles)})")
        trainer = VARIANTS[self.args.loss](self.policy("sft"), pairs, self.dpo_config)
        trainer.train(resume=resume and (self.out / "dpo" / "checkpoints").is_dir())
        trainer.save_model(self.out / "dpo" / "model")

    # ------------------------------------------------------------------------------------------ the table
    def report(self) -> dict[str, Any]:
        """reflection.json and reflection.md (rows base, SFT, SFT+DPO); prints the table."""
        a, t = self.args, self.args.turns
        columns = ("p1@t1", f"m1@t{t}", f"p1@t{t}")
        rows = []
        for label, stage in ROWS:
            result = json.loads((self.out / stage / "eval.json").read_text())
            rows.append({"stage": label, **{c: result[c] for c in columns}, "tokens": result["mean_length"]})
        where = (f"{a.env} level {a.level}, test split" if ENVS[a.env] is None
                 else f"{a.env} {a.data_path or '(hub)'} rows {self.held[0]}-{self.held[1]}")
        summary = json.loads((self.out / "pairs" / "summary.json").read_text())
        report = {"env": a.env, "held_back": where, "episodes": a.eval_episodes, "turns": t, "model": a.model,
                  "loss": a.loss, "pairs": summary, "rows": rows}
        lines = [f"# Reflection: SFT then DPO ({a.model})", "",
                 (f"The first {a.eval_episodes} held-back problems ({where}), greedy, {t} actor answers with the "
                  f"critic between them; one model plays both roles. tokens: sampled per episode, both roles."), "",
                 "| stage | " + " | ".join(columns) + " | tokens |", "|---" * (len(columns) + 2) + "|"]
        lines += ["| " + " | ".join([r["stage"], *(f"{r[c]:.1%}" for c in columns), f"{r['tokens']:.0f}"]) + " |"
                  for r in rows]
        table = "\n".join(lines) + "\n"
        write_json(self.out / "reflection.json", report)
        atomic_write_text(self.out / "reflection.md", table)
        print(table)
        return report


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(value, indent=1) + "\n")


def run(args: argparse.Namespace) -> dict[str, Any]:
    args = resolve(args)
    pipeline = Pipeline(args)  # every config and data source checked before any stage runs
    check_settings(args)
    print(f"preset={args.preset} model={args.model} env={args.env} output_dir={args.output_dir}")
    return pipeline.run()


if __name__ == "__main__":
    main()
