"""The staged pipeline in one command: base CoT -> SFT -> + PPO (ORM) | + GRPO -> + PRM-dense reward -> + MCTS at
inference, every row measured on the same held-back problems; PPO and GRPO both start from SFT, the rows after
GRPO add to it. The PPO, PRM-dense and MCTS rows are each compared with the GRPO row on the same problems (the
paired bootstrap 95% interval of the difference).

    python examples/pipeline.py                       # CPU-sized (2 cores: tens of minutes)
    python examples/pipeline.py --preset gpu          # one H100: 7.8 minutes before the prm stage labelled the
                                                      # policy's samples; with --prm_problems 128, about 10 on an
                                                      # H200 shared with 10 other runs (not yet timed alone)
    python examples/pipeline.py --preset gpu --gsm8k_path ../shared/data/gsm8k/train.jsonl   # + GSM8K column
    python examples/pipeline.py --preset gpu_room     # room to learn: level 4, a budgeted SFT (128 problems,
                                                      # 24 x 32 examples, as reflection's gpu_room)

Stages (each in <output_dir>/<stage>/; a Trainer run folder with its model in model/):
1. base: the starting model (--model), greedy chain of thought.
2. sft: algorithms.SFT on gold step-by-step solutions of Arithmetic-v0 --level train problems
   (--sft_data arithmetic), or GSM8K train solutions (gsm8k; both), in the stepwise env's format.
   prm (no row): a verifier trained on the SFT model's own samples (issue 25, as examples/verifier_loop.py):
   step_data.policy_labels samples --prm_samples solutions to each of the first --prm_problems problems of
   Arithmetic-v0 --level's train split (stepwise, --max_steps) and labels each step by the fraction of
   --prm_rollouts completions from it that end right -> prm/labels.jsonl (reused unless --restart); then
   algorithms.verifier_trainer kind prm_soft (Math-Shepherd's BCE on those soft labels; a few problems held
   back for its evaluation) trains a ProcessRewardModel from the SFT model's weights -> prm/prm. Or a PRM
   folder given with --prm (it must share the model's tokenizer). The labels are Arithmetic-only, with or
   without --gsm8k_path: they need the env's gold verdict on every sample, and GSM8K rows go to SFT and the
   evaluation column only.
   ppo: algorithms.PPO from the SFT model on the stepwise train env with the outcome reward alone (the seed's
   "+ PPO (ORM)" row: the reward is the env's verdict on the final answer, the exact outcome reward a learned
   ORM approximates), a value head on the policy, the same episodes per iteration as GRPO (prompts x samples).
3. grpo: algorithms.GRPO from the SFT model on the stepwise train env (one line per step), env reward only.
4. grpo_prm: GRPO continued from row 3's model with the PRM as a dense reward beside the env's (prm_weight
   > 0): each step earns its PRM score difference (prm_credit "progress", algorithms/prm/step_credit.py), and
   the PRM is refreshed on the policy's own samples every 2 iterations (refresh, algorithms/prm/
   refresh.py; the refreshed weights are kept in grpo_prm's checkpoints only, row 5 loads prm/prm).
   It continues from row 3, not from row 2, because the table's rows each add to the one before (SFT,
   + GRPO, + PRM): row 4 is row 3's model with the PRM reward added, so it has had more RL iterations than
   row 3 as well; retraining from row 2 would isolate the PRM's effect but break the chain the table reports.
5. mcts: row 4's model searched with MCTS (algorithms.run_search method "mcts", the prm stage's PRM scoring
   steps).
The PRM starts from the SFT model's weights and learns from its samples because the steps it must judge are
the SFT and RL models' own, which a verifier trained on gold-vs-corrupted steps scored almost flat (issue 25).

Every row is evaluated with algorithms.evaluate_search (greedy for rows 1-4, mcts for row 5) on the first
--episodes problems of Arithmetic-v0 --level's test split (never trained on) and, with --gsm8k_path, on
--gsm8k_episodes GSM8K rows from --gsm8k_offset (default: the file's last rows), which SFT and the PRM never
see. Accuracy and tokens sampled per problem are printed and written to <output_dir>/pipeline.md and
pipeline.json.

Resuming: --stages runs a subset (comma-separated of base, sft, prm, ppo, grpo, grpo_prm, mcts; default all).
A training stage whose model folder exists is skipped, and one interrupted mid-run continues from its
newest checkpoint; a row's evaluation is saved in <stage>/eval.json (each problem's answer, verdict and
tokens, per suite, in <stage>/eval.problems.jsonl: benchmarks/report.py recomputes the row from them) and
reused while its settings are unchanged. --restart retrains and re-evaluates the stages named (later stages
are not redone unless named). The table shows every row evaluated under the current settings. Per-stage
settings: the preset, then --sft_config / --prm_config / --ppo_config / --grpo_config YAML files (SFTConfig,
PRMConfig, PPOConfig, GRPOConfig fields; the grpo file is read for the grpo and grpo_prm rows, grpo_prm's preset
adds prm_credit and refresh), then the flags below.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from common import add_preset_sizes, example_parser, parse_stages, preset_sizes, release_memory  # noqa: E402
from pipeline_table import EVAL_FILE, ROWS, load_row, save_pipeline, save_row  # noqa: E402

from lmgym.algorithms import GRPO, PPO, SFT, GRPOConfig, PPOConfig, PRMConfig, SFTConfig, verifier_trainer  # noqa: E402
from lmgym.buffers.step_pairs import split_by_problem  # noqa: E402
from lmgym.core.problem_records import problems_path, write_problem_records  # noqa: E402
from lmgym.evaluation.search_eval import search_outcomes  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL  # noqa: E402
from lmgym.search import (
    MCTSConfig,  # noqa: E402
    SearchSettings,  # noqa: E402
)
from lmgym.traindata.sft_data import arithmetic_sft_examples, gsm8k_sft_examples  # noqa: E402
from lmgym.traindata.step_data import LabelledSample, load_policy_labels, policy_labels, save_policy_labels  # noqa: E402
from lmgym.traindata.step_data.policy_labels import PolicyLabelConfig  # noqa: E402
from lmgym.training import load_config  # noqa: E402
from lmgym.training.checkpoints import has_checkpoints  # noqa: E402
from lmgym.training.cli import run_with_clear_errors  # noqa: E402

STAGES = ("base", "sft", "prm", "ppo", "grpo", "grpo_prm", "mcts")
TITLES = dict(ROWS)
PRESETS = {
    "cpu": {
        "sft": dict(train_iterations=20, examples_per_iteration=16, max_length=256, micro_batch_size=8,
                    learning_rate=5e-5, eval_at_start=True),
        "prm": dict(train_iterations=20, pairs_per_iteration=16, micro_batch_size=8, learning_rate=2e-5,
                    eval_at_start=True, pointwise_weight=1.0),
        "grpo": dict(train_iterations=8, prompts_per_iteration=8, samples_per_prompt=6, learning_rate=5e-5,
                     kl_coeff=0.04, micro_batch_size=16, eval_at_start=False),
        # as many episodes an iteration as GRPO's (8 x 6), one a prompt
        "ppo": dict(train_iterations=8, prompts_per_iteration=48, samples_per_prompt=1, learning_rate=5e-5,
                    kl_coeff=0.04, micro_batch_size=16, minibatch_size=16, update_epochs=2, eval_at_start=False),
        # row 4 only, over "grpo": step credit from PRM score differences, the PRM refreshed every 2 iterations
        "grpo_prm": dict(prm_credit="progress", refresh=dict(every=2, steps=1, labels="outcome_steps",
                                                             samples_per_step=8, micro_batch_size=8)),
        "run": dict(episodes=64, max_new_tokens=32, prm_weight=0.3, simulations=8, sft_examples=400,
                    prm_problems=2, prm_samples=2, prm_rollouts=1, gsm8k_rows=200),
    },
    "gpu": {  # sized for one H100 with the embedded 135M model (7.8 minutes measured, see benchmarks/RESULTS.md)
        "sft": dict(train_iterations=60, examples_per_iteration=64, max_length=512, micro_batch_size=64,
                    learning_rate=5e-5, eval_at_start=True),
        "prm": dict(train_iterations=200, pairs_per_iteration=64, micro_batch_size=64, learning_rate=1e-5,
                    eval_at_start=True, pointwise_weight=1.0),
        # GRPO starts from the SFT model, whose distribution is sharp (entropy ~0.06 nats a token): at the
        # quickstart's 5e-5 (tuned from the base model) it collapsed on an H100 (KL 0.17 after 4 updates,
        # train reward 0.51 -> 0.27, greedy 90.2% -> 57.4%); 2e-6 is the usual range for RL after SFT.
        "grpo": dict(train_iterations=40, prompts_per_iteration=16, samples_per_prompt=8, learning_rate=2e-6,
                     kl_coeff=0.04, micro_batch_size=128, eval_at_start=False),
        # GRPO's 128 episodes an iteration, one a prompt; the fresh value head learns at its own, higher rate
        "ppo": dict(train_iterations=40, prompts_per_iteration=128, samples_per_prompt=1, learning_rate=2e-6,
                    value_learning_rate=5e-5, kl_coeff=0.04, micro_batch_size=128, minibatch_size=32,
                    update_epochs=2, eval_at_start=False),
        # as benchmarks/dense_vs_outcome.py's dense runs (config_for): progress credit, refresh every 2 iterations,
        # its 64 samples a step in two passes (eight at the refresh's default micro-batch)
        "grpo_prm": dict(prm_credit="progress", refresh=dict(every=2, steps=4, labels="outcome_steps",
                                                             samples_per_step=64, micro_batch_size=32)),
        "run": dict(episodes=256, max_new_tokens=64, prm_weight=0.3, simulations=24, sft_examples=4000,
                    prm_problems=512, prm_samples=8, prm_rollouts=4, gsm8k_rows=0),
    },
}
# room to learn (issue 36): after SFT on every problem the gpu preset's GRPO row starts at 91% and reaches 94%, so
# nothing after it can show; reflection's gpu_room budget (128 level-4 problems, 24 x 32 examples) left sampled
# first answers 44-46% right on an H200. Level 4, that SFT, 896 held-out problems; the rest as gpu.
PRESETS["gpu_room"] = {**PRESETS["gpu"],
                       "sft": {**PRESETS["gpu"]["sft"], "train_iterations": 24, "examples_per_iteration": 32,
                               "micro_batch_size": 32},
                       "run": {**PRESETS["gpu"]["run"], "sft_examples": 128, "episodes": 896}}
LEVELS = {"cpu": 3, "gpu": 3, "gpu_room": 4}  # the --level of each preset


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--preset", choices=sorted(PRESETS), default=None,
        help="cpu, gpu or gpu_room (default: gpu when CUDA is available)")
    add("--model", default=EMBEDDED_MODEL, help="the base model: hub name, local path, or the embedded default")
    add("--output_dir", default=None, help="the pipeline folder (default runs/pipeline-<preset>)")
    add("--stages", default="all", help=f"comma-separated stages to run, of {', '.join(STAGES)} (default all)")
    add("--restart", action="store_true", help="retrain and re-evaluate the stages named, even when saved")
    add("--prm", default=None, help="a PRM folder to use instead of training one (the prm stage is then skipped)")
    add("--level", type=int, default=None, help="Arithmetic-v0 level trained on and evaluated (default: 3; 4 for "
                                                 "gpu_room)")
    add("--max_steps", type=int, default=8, help="steps per episode at most, in training and evaluation (default 8)")
    add("--sft_data", choices=("arithmetic", "gsm8k", "both"), default="arithmetic",
        help="SFT's gold solutions: Arithmetic-v0 --level train problems, GSM8K train rows, or both")
    add("--gsm8k_path", default=None, help="GSM8K train.jsonl: SFT data (gsm8k, both) from its rows before "
                                           "--gsm8k_offset, and a GSM8K column evaluated on the rows from it")
    add("--gsm8k_offset", type=int, default=None, help="first held-back GSM8K row (default: the last --gsm8k_episodes)")
    add("--gsm8k_episodes", type=int, default=200, help="held-back GSM8K rows evaluated (default 200)")
    add("--seed", type=int, default=0, help="seeds every stage's training and the evaluation's sampling")
    add("--batch_problems", type=int, default=64,
        help="problems sampled together in the prm stage's labelling and searched together in evaluation (default 64)")
    add("--progress", action=argparse.BooleanOptionalAction, default=True, help="progress bars (default on)")
    for stage, cls in (("sft", SFTConfig), ("prm", PRMConfig), ("ppo", PPOConfig), ("grpo", GRPOConfig)):
        add(f"--{stage}_config", default=None, help=f"YAML file of {cls.__name__} fields for the {stage} stage"
                                                    + (" (and grpo_prm)" if stage == "grpo" else ""))
        add(f"--{stage}_iterations", type=int, default=None, help=f"{stage}'s train_iterations (default: the preset's)")
    sizes = parser.add_argument_group("sizes (default: the preset's; --help shows them)")
    add_preset_sizes(sizes, PRESETS, {
        "episodes": "Arithmetic-v0 test problems evaluated per row",
        "max_new_tokens": "tokens per step, in GRPO and evaluation",
        "prm_weight": "weight of the PRM's step credit in row 4's reward (> 0; <= 1 with prm_credit progress)",
        "simulations": "MCTS leaf evaluations per problem (row 5)",
        "sft_examples": "Arithmetic-v0 train problems drawn for SFT (0: all)",
        "prm_problems": "Arithmetic-v0 train problems whose policy samples label the PRM",
        "prm_samples": "solutions the SFT model samples per PRM problem",
        "prm_rollouts": "completions from each step of a sample: its soft Monte-Carlo label",
        "gsm8k_rows": "GSM8K rows (before the offset) for SFT data (0: all)"}, floats=("prm_weight",))
    return parser


def main(argv: list[str] | None = None) -> None:
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


class Plan:
    """Every setting, folder and config of a pipeline run, checked before any model loads."""

    def __init__(self, args: argparse.Namespace, preset: str):
        self.args, self.preset = args, preset
        if args.level is None:
            args.level = LEVELS[preset]
        values = PRESETS[preset]
        self.run = preset_sizes(args, values["run"])
        self.out = Path(args.output_dir or f"runs/pipeline-{preset}")
        self.stages = parse_stages(args.stages, STAGES)
        for name in ("episodes", "max_new_tokens", "simulations", "prm_problems", "prm_samples", "prm_rollouts",
                     "max_steps", "batch_problems", "gsm8k_episodes"):
            value = self.run.get(name, getattr(args, name, None))
            if value < 1:
                raise ValueError(f"--{name} must be >= 1, got {value}")
        for name in ("sft_examples", "gsm8k_rows"):
            if self.run[name] < 0:
                raise ValueError(f"--{name} must be >= 0, got {self.run[name]}")
        if self.run["prm_weight"] <= 0:
            raise ValueError(f"--prm_weight must be > 0 (row 4 adds the PRM's reward), got {self.run['prm_weight']}")
        if args.sft_data != "arithmetic" and not args.gsm8k_path:
            raise ValueError(f"--sft_data {args.sft_data} needs --gsm8k_path")
        self.gsm8k = self.gsm8k_split() if args.gsm8k_path else None
        self.configs = {stage: self.config(stage, cls) for stage, cls in
                        (("sft", SFTConfig), ("prm", PRMConfig), ("ppo", PPOConfig), ("grpo", GRPOConfig),
                         ("grpo_prm", GRPOConfig))}
        self.prm_path = Path(args.prm) if args.prm else self.out / "prm" / "prm"
        self.labels_path = self.out / "prm" / "labels.jsonl"
        if "prm" in self.stages and not args.prm:
            self.check_prm_problems()
        self.labels = PolicyLabelConfig(problems=self.run["prm_problems"], samples_per_problem=self.run["prm_samples"],
                                        rollouts=self.run["prm_rollouts"], max_new_tokens=self.run["max_new_tokens"],
                                        batch_size=args.batch_problems)

    def check_prm_problems(self) -> None:
        """--prm_problems fits the train split of Arithmetic-v0 --level (the labels' problems)."""
        from lmgym.envs.arithmetic import split_indices

        have = len(split_indices(self.args.level, "train"))
        if self.run["prm_problems"] > have:
            raise ValueError(f"--prm_problems is {self.run['prm_problems']}, but the train split of Arithmetic-v0 "
                             f"level {self.args.level} has {have} problems")

    def problems(self) -> dict[str, str]:
        """Each evaluation suite's name and the held-back problems it holds."""
        level, episodes = self.args.level, self.run["episodes"]
        out = {f"arithmetic_L{level}": f"Arithmetic-v0 level {level} test split, problems 0..{episodes - 1}"}
        if self.gsm8k:
            first, count = self.gsm8k
            out["gsm8k"] = f"{self.args.gsm8k_path} rows {first}..{first + count - 1}"
        return out

    def gsm8k_split(self) -> tuple[int, int]:
        """(first held-back row, rows evaluated) of the GSM8K file."""
        from lmgym.envs import make

        rows = make("GSM8K-v0", data_path=self.args.gsm8k_path, split="train").num_problems
        offset = self.args.gsm8k_offset if self.args.gsm8k_offset is not None else rows - self.args.gsm8k_episodes
        if not 1 <= offset < rows:
            raise ValueError(f"--gsm8k_offset must leave rows both to train on and to evaluate: got {offset} "
                             f"with {rows} rows in {self.args.gsm8k_path}")
        return offset, min(self.args.gsm8k_episodes, rows - offset)

    def config(self, stage: str, cls: type):
        """The stage's config: the preset < its YAML file < the flags (output_dir: <output_dir>/<stage>)."""
        family = "grpo" if stage == "grpo_prm" else stage
        overrides = {"output_dir": str(self.out / stage), "seed": self.args.seed, "progress": self.args.progress,
                     "train_iterations": getattr(self.args, f"{family}_iterations")}
        defaults = dict(PRESETS[self.preset][family])
        if stage == "grpo_prm":
            defaults.update(PRESETS[self.preset]["grpo_prm"])
        if family in ("grpo", "ppo"):
            defaults["max_new_tokens"] = self.run["max_new_tokens"]
            if self.args.max_new_tokens is not None:
                overrides["max_new_tokens"] = self.args.max_new_tokens
            if stage == "grpo_prm":
                overrides["prm_weight"] = self.run["prm_weight"]
        return load_config(cls, getattr(self.args, f"{family}_config"), overrides, defaults)

    def model(self, stage: str) -> Path | str:
        """The model a row evaluates, or a training stage writes."""
        return {"base": self.args.model, "mcts": self.out / "grpo_prm" / "model"}.get(stage, self.out / stage / "model")

    def check_inputs(self) -> None:
        """Each stage run needs its input saved, or made by a stage run before it; one line otherwise."""
        made = set()
        needs = {"sft": [], "prm": [] if self.args.prm else ["sft"], "ppo": ["sft"], "grpo": ["sft"],
                 "grpo_prm": ["grpo", "prm"],
                 "mcts": ["grpo_prm", "prm"]}
        for stage in STAGES:
            if stage not in self.stages:
                continue
            for need in needs.get(stage, []):
                path = self.prm_path if need == "prm" else self.model(need)
                if need not in made and not Path(path).is_dir():
                    raise ValueError(f"stage {stage} needs {path}, which does not exist: add {need} to --stages")
            made.add(stage)


def resuming(plan: Plan, stage: str) -> bool:
    """Continue an interrupted stage from its newest checkpoint (never under --restart: it starts over)."""
    return not plan.args.restart and has_checkpoints(plan.out / stage)


def sft_examples(plan: Plan) -> tuple[list, list]:
    """(training examples, held-out examples) of the SFT stage, in the stepwise env's format."""
    run, args, level = plan.run, plan.args, plan.args.level
    train = []
    if args.sft_data in ("arithmetic", "both"):
        train += arithmetic_sft_examples(level, "train", run["sft_examples"] or None, args.seed, "stepwise")
    if args.sft_data in ("gsm8k", "both"):
        offset = plan.gsm8k[0]
        train += gsm8k_sft_examples(args.gsm8k_path, (0, min(run["gsm8k_rows"] or offset, offset)), "stepwise")
    return train, arithmetic_sft_examples(level, "test", 64, args.seed, "stepwise")


def train_sft(plan: Plan) -> None:
    from lmgym.policies import HFPolicy

    train, held = sft_examples(plan)
    trainer = SFT(HFPolicy(plan.args.model), train, plan.configs["sft"], held_out=held)
    rows = trainer.train(resume=resuming(plan, "sft"))
    trainer.save_model(plan.model("sft"))
    losses = [r["eval_loss"] for r in rows if "eval_loss" in r]
    print(f"sft: {len(train)} examples; held-out loss " + " -> ".join(f"{x:.4f}" for x in losses[:1] + losses[-1:]))


def prm_labels(plan: Plan, policy) -> list[LabelledSample]:
    """The SFT model's own samples of the first --prm_problems Arithmetic-v0 train problems, with soft step
    labels, saved in prm/labels.jsonl (reused when present, unless --restart)."""
    from lmgym.envs import make

    path = plan.labels_path
    if path.is_file() and not plan.args.restart:
        labels = load_policy_labels(path)
        print(f"prm: labels {path} exist, reused ({len(labels.samples)} samples; --restart labels again)")
        return labels.samples
    env = make("Arithmetic-v0", level=plan.args.level, split="train", mode="stepwise", max_steps=plan.args.max_steps)
    labels = policy_labels(policy, env, plan.labels, sample_key=plan.args.seed)
    save_policy_labels(path, labels)
    print(f"prm: labels of {labels.describe()} -> {path}")
    return labels.samples


def train_prm(plan: Plan) -> None:
    from lmgym.policies import HFPolicy
    from lmgym.policies.prm import ProcessRewardModel

    policy = HFPolicy(str(plan.model("sft")))
    samples = prm_labels(plan, policy)
    # a few training problems held back for the trainer's own evaluation (the test split stays untouched)
    train, held = split_by_problem(samples, 0.1, plan.args.seed)
    prm = ProcessRewardModel.from_policy(policy)
    del policy
    trainer = verifier_trainer(prm, train, "prm_soft", plan.configs["prm"], held_out=held)
    rows = trainer.train(resume=resuming(plan, "prm"))
    trainer.save_model(plan.prm_path)
    held_out = [(name, [r[f"eval_{name}"] for r in rows if f"eval_{name}" in r])
                for name in ("rated_accuracy", "rated_auc")]
    print(f"prm: prm_soft verifier on {len(train)} samples ({len(held)} held back) -> {plan.prm_path}"
          + "".join(f"; held-out step {name.removeprefix('rated_')} " + " -> ".join(f"{x:.3f}" for x in v[:1] + v[-1:])
                    for name, v in held_out if v))


def train_grpo(plan: Plan, stage: str) -> None:
    from lmgym.envs import make
    from lmgym.policies import HFPolicy
    from lmgym.policies.prm import ProcessRewardModel

    start = plan.model("sft" if stage == "grpo" else "grpo")
    policy = HFPolicy(str(start))
    prm = ProcessRewardModel.from_pretrained(plan.prm_path, device=policy.device) if stage == "grpo_prm" else None
    env = make("Arithmetic-v0", level=plan.args.level, split="train", mode="stepwise", max_steps=plan.args.max_steps)
    algo = GRPO(policy, env, plan.configs[stage], prm=prm)
    rows = algo.train(resume=resuming(plan, stage))
    algo.save_model(plan.model(stage))
    rewards = [r["reward_mean"] for r in rows if "reward_mean" in r]
    print(f"{stage}: from {start}; mean reward " + " -> ".join(f"{x:.3f}" for x in rewards[:1] + rewards[-1:]))


def train_ppo(plan: Plan) -> None:
    """+ PPO (ORM): PPO from the SFT model, the env's outcome reward alone -> ppo/model."""
    from lmgym.envs import make
    from lmgym.policies import HFPolicy

    policy = HFPolicy(str(plan.model("sft")))
    env = make("Arithmetic-v0", level=plan.args.level, split="train", mode="stepwise", max_steps=plan.args.max_steps)
    algo = PPO(policy, env, plan.configs["ppo"])
    rows = algo.train(resume=resuming(plan, "ppo"))
    algo.save_model(plan.model("ppo"))
    rewards = [r["reward_mean"] for r in rows if "reward_mean" in r]
    print(f"ppo: from {plan.model('sft')}; mean reward " + " -> ".join(f"{x:.3f}" for x in rewards[:1] + rewards[-1:]))


TRAINERS = {"sft": train_sft, "prm": train_prm, "ppo": train_ppo, "grpo": lambda p: train_grpo(p, "grpo"),
            "grpo_prm": lambda p: train_grpo(p, "grpo_prm")}


def search_settings(plan: Plan, stage: str, aggregation: str = "min") -> SearchSettings:
    """Greedy for rows 1-4; MCTS with --simulations for row 5 (`aggregation`: the PRM's own)."""
    if stage != "mcts":
        return SearchSettings(method="greedy", max_new_tokens=plan.run["max_new_tokens"])
    return SearchSettings(method="mcts", max_new_tokens=plan.run["max_new_tokens"], aggregation=aggregation,
                          mcts=MCTSConfig(simulations=plan.run["simulations"]))


def eval_settings(plan: Plan, stage: str) -> dict:
    """What a row's evaluation depends on: a saved row is reused only under the same."""
    settings = {"model": str(plan.model(stage)), "search": search_settings(plan, stage).label,
                "level": plan.args.level, "episodes": plan.run["episodes"], "max_steps": plan.args.max_steps,
                "max_new_tokens": plan.run["max_new_tokens"], "seed": plan.args.seed,
                "gsm8k": [str(plan.args.gsm8k_path), *plan.gsm8k] if plan.gsm8k else None}
    return {**settings, "prm": str(plan.prm_path)} if stage == "mcts" else settings


def suites(plan: Plan) -> dict[str, tuple]:
    """name -> (env, first problem, problems): the held-back problems every row is evaluated on."""
    from lmgym.envs import make

    steps = {"mode": "stepwise", "max_steps": plan.args.max_steps}
    names = list(plan.problems())
    out = {names[0]: (make("Arithmetic-v0", level=plan.args.level, split="test", **steps),
                                              0, plan.run["episodes"])}
    if plan.gsm8k:
        out["gsm8k"] = (make("GSM8K-v0", data_path=plan.args.gsm8k_path, split="train", **steps), *plan.gsm8k)
    return out


def evaluate_row(plan: Plan, stage: str) -> tuple[dict, list[dict]]:
    """The stage's row (accuracy and tokens per problem on each suite) and its per-problem records: each
    suite's `search_outcomes` records, tagged with the `suite`."""
    from lmgym.policies import HFPolicy
    from lmgym.policies.prm import ProcessRewardModel

    policy = HFPolicy(str(plan.model(stage)))
    scorer = ProcessRewardModel.from_pretrained(plan.prm_path, device=policy.device) if stage == "mcts" else None
    settings = search_settings(plan, stage, scorer.aggregation if scorer is not None else "min")
    results, records = {}, []
    for name, (env, offset, episodes) in suites(plan).items():
        [row], problems = search_outcomes(policy, env, [settings], scorer, episodes=episodes, offset=offset,
                                          batch_problems=plan.args.batch_problems, seed=plan.args.seed,
                                          progress=plan.args.progress)
        results[name] = {k: row[k] for k in ("accuracy", "tokens_per_problem", "problems", "seconds")}
        records += [{"suite": name, **problem} for problem in problems]
    return {"stage": stage, "title": TITLES[stage], "method": settings.label, "model": str(plan.model(stage)),
            "results": results}, records


def run_stage(plan: Plan, stage: str) -> None:
    """Train the stage unless its model is saved (or --restart), then evaluate its row unless saved."""
    trained = False
    if stage in TRAINERS:
        folder = plan.prm_path if stage == "prm" else Path(plan.model(stage))
        if stage == "prm" and plan.args.prm:
            print(f"prm: using {plan.prm_path} (--prm)")
        elif folder.is_dir() and not plan.args.restart:
            print(f"{stage}: {folder} exists, skipped (--restart retrains it)")
        else:
            TRAINERS[stage](plan)
            trained = True
            release_memory()
    if stage not in TITLES:
        return
    settings, folder = eval_settings(plan, stage), plan.out / stage
    if not (trained or plan.args.restart) and load_row(folder, settings) is not None:
        print(f"{stage}: evaluation saved in {folder / 'eval.json'}, reused")
        return
    row, records = evaluate_row(plan, stage)
    write_problem_records(problems_path(folder / EVAL_FILE), "pipeline", records)
    save_row(folder, row, settings)
    release_memory()
    print(f"{stage}: " + ", ".join(f"{name} {r['accuracy']:.1%} ({r['tokens_per_problem']:.1f} tokens/problem)"
                                   for name, r in row["results"].items()))


def run(args: argparse.Namespace) -> None:
    import torch

    preset = args.preset or ("gpu" if torch.cuda.is_available() else "cpu")
    plan = Plan(args, preset)
    plan.check_inputs()
    names = list(plan.problems())
    print(f"preset={preset} model={args.model} stages={','.join(plan.stages)} output={plan.out}")
    for stage in STAGES:
        if stage in plan.stages:
            run_stage(plan, stage)
    rows = [row for stage, _ in ROWS if (row := load_row(plan.out / stage, eval_settings(plan, stage))) is not None]
    missing = [stage for stage, _ in ROWS if stage not in {r["stage"] for r in rows}]
    about = {**vars(args), **plan.run, "preset": preset, "problems": plan.problems()}
    markdown, data = save_pipeline(rows, names, plan.out, about)
    print(markdown.read_text().split("\n\n", 1)[-1], end="")
    if missing:
        print(f"rows not evaluated under these settings: {', '.join(missing)} (add them to --stages)")
    print(f"table: {markdown} and {data}")


if __name__ == "__main__":
    main()
