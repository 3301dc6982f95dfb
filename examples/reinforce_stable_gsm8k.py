"""REINFORCE-stable on GSM8K, one reasoning step per env step, with a few-shot policy (seed 002).

Seed 002's flags are this script's flags (mapping below). Offline, with the embedded model:

    python examples/reinforce_stable_gsm8k.py --train_data_file ../shared/data/gsm8k/train.jsonl \\
        --n_few_shot_examples 2 --num_iterations 4 --num_collection_episodes 8 --n_eval_steps 50

The policy sees a system prompt, `--n_few_shot_examples` solved GSM8K problems and the question; each
action is one line, and the episode ends at a line with "####" (or after --max_trajectory_steps).
The reward is 1 for a correct final answer. The reference model for the KL term is re-synced to the
policy every --update_ref_iterations iterations (that re-sync is what makes REINFORCE "stable").

How seed 002's flags map onto ReinforceStableConfig (fields can also come from --config FILE.yaml;
flags override the file):

    --num_iterations N               train_iterations
    --num_collection_episodes N      prompts_per_iteration (samples_per_prompt=1): episodes per iteration
    --max_trajectory_steps N         the env's max_steps: steps (lines) before truncation (default 10)
    --gradient_accumulation_steps G  one optimizer step = G micro-batches of --micro_batch_size M
                                     trajectories: minibatch_size = G * M (seed 002: M = 1)
    --num_update_steps U             at most U micro-batches per iteration: U * M trajectories, drawn at
                                     random from the iteration's episodes, are trained on (seed 002:
                                     min(U, buffer size) single-sample backward passes)
    --kl_coeff B                     kl_coeff (KL to the reference, in the loss)
    --update_ref_iterations K        ref_sync_every
    --evaluation_iterations K        eval_every (the last iteration is always evaluated)
    --n_eval_steps N                 eval_episodes (greedy, on the test file or the held-back rows)
    --evaluation_at_start            eval_at_start
    --save_path DIR                  output_dir: metrics.jsonl, metrics.png, config.json, checkpoint-N/ and,
                                     at the end, the trained model in Hugging Face format in DIR/model
    --n_save_iterations K            save_every (the last iteration always saves)
    --cache_buffer --buffer_cache_path F
                                     every collection is saved to F (a ReplayBuffer JSONL file); if F exists
                                     at start, the first iteration trains on it instead of collecting, and
                                     later collections go to F_updated (F itself is kept, as in seed 002)

Differences from seed 002: episodes are whole trajectories trained on-policy (the buffer holds the
current iteration's episodes, not every step ever collected); data files are GSM8K JSONL (one
{"question", "answer"} object per line, the answer ending in "#### n"), not seed 002's JSON arrays of
{"problem", "solution"}. Set RLGYM_TRACEBACK=1 to see tracebacks instead of one-line errors.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

from common import example_parser  # noqa: E402

from lmgym.algorithms import ReinforceStable, ReinforceStableConfig  # noqa: E402
from lmgym.buffers import ReplayBuffer  # noqa: E402
from lmgym.envs import DataFileNotFoundError, GSM8KEnv  # noqa: E402
from lmgym.envs.data import load_rows  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy, LoraSettings  # noqa: E402
from lmgym.policies.few_shot import DEFAULT_SYSTEM_PROMPT_PATH, FewShotStepwisePolicy  # noqa: E402
from lmgym.training import ConfigError  # noqa: E402
from lmgym.training.cli import (  # noqa: E402
    config_from_arguments,
    gsm8k_train_test,
    run_with_clear_errors,
    same_file,
    train_and_report,
)
from lmgym.training.distributed import init_from_env  # noqa: E402

# the script's defaults (seed 002's where it had one); a --config file and then flags override them
DEFAULTS = dict(
    train_iterations=10, prompts_per_iteration=16, samples_per_prompt=1, max_new_tokens=64,
    learning_rate=1e-5, kl_coeff=0.25, ref_sync_every=2, micro_batch_size=1, minibatch_size=16,
    eval_every=0, eval_episodes=20, eval_at_start=False, save_every=0, output_dir="runs/reinforce_stable_gsm8k",
    wandb=os.environ.get("WANDB_MODE") if os.environ.get("WANDB_MODE") in ("offline", "online") else "off",
    wandb_project=os.environ.get("WANDB_PROJECT") or "rlgym",
)
# seed 002's flag -> ReinforceStableConfig field (flags with the field's own name map to themselves)
FLAG_TO_FIELD = {
    "num_iterations": "train_iterations", "num_collection_episodes": "prompts_per_iteration",
    "kl_coeff": "kl_coeff", "update_ref_iterations": "ref_sync_every",
    "evaluation_iterations": "eval_every", "n_eval_steps": "eval_episodes", "evaluation_at_start": "eval_at_start",
    "save_path": "output_dir", "n_save_iterations": "save_every", "seed": "seed", "learning_rate": "learning_rate",
    "max_new_tokens": "max_new_tokens", "micro_batch_size": "micro_batch_size", "wandb": "wandb",
}
MAX_TRAJECTORY_STEPS = 10  # seed 002's default for --max_trajectory_steps (the env's max_steps)


class CachedBufferReinforceStable(ReinforceStable):
    """ReinforceStable plus seed 002's buffer cache (--cache_buffer) and update cap (--num_update_steps)."""

    def __init__(self, *args, buffer_cache_path: str | None = None, max_update_trajectories: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_update_trajectories = max_update_trajectories
        self.cache_path = Path(buffer_cache_path) if buffer_cache_path else None
        self.cached: list | None = None
        self.used_cache = False
        if self.cache_path is not None and self.cache_path.is_file():
            self.cached = list(ReplayBuffer.load(self.cache_path)) or None
            self._check_cached(self.cached or [])
            # keep the cache the user asked to reuse; later collections go next to it (seed 002 does the same)
            self.cache_path = self.cache_path.with_name(f"{self.cache_path.stem}_updated{self.cache_path.suffix}")

    def _check_cached(self, trajectories) -> None:
        """Refuse token ids this tokenizer lacks; warn when the cache was collected with another prompt."""
        vocab = len(self.policy.tokenizer)
        for t in trajectories:
            top = max(t.prompt_ids + t.completion_ids, default=0)
            if top >= vocab:
                raise ValueError(f"the cached buffer holds token id {top}, beyond this tokenizer's {vocab} tokens: "
                                 f"it was collected with another model; delete it or pass another --buffer_cache_path")
        if not trajectories or not isinstance(trajectories[0].info.get("question"), str):
            return
        first = trajectories[0]
        if self.policy.format_prompt(first.info["question"] + self.policy.question_suffix) != first.prompt_ids:
            print(f"warning: {self.cache_path} was collected with another prompt (model, system prompt, few-shot "
                  f"examples or --sym_calc differ); its episodes are still trained on as they were sampled")

    def collect(self):
        if self.cached is not None and self.iteration == 0:
            trajectories, self.cached, self.used_cache = self.cached, None, True
            for t in trajectories:
                t.reset_run_data()  # reference log-probs, advantages and KL shaping are computed per run
            return trajectories
        self.cached = None  # resumed past the first iteration: the cache is not used
        trajectories = super().collect()
        if self.cache_path is not None:
            buffer = ReplayBuffer(max(len(trajectories), 1))
            buffer.extend(trajectories)  # saved before prepare(), so rewards are the env's own
            buffer.save(self.cache_path)
        return trajectories

    def select_for_update(self, trajectories):
        cap = self.max_update_trajectories
        if cap and len(trajectories) > cap:
            chosen = sorted(self.rng.choice(len(trajectories), size=cap, replace=False))
            return [trajectories[i] for i in chosen]
        return trajectories

    def train_iteration(self) -> dict:
        metrics = super().train_iteration()
        metrics["buffer_from_cache"] = float(self.used_cache)
        self.used_cache = False
        return metrics

    def describe(self) -> dict:
        return {**super().describe(), "max_update_trajectories": self.max_update_trajectories,
                "buffer_cache_path": str(self.cache_path) if self.cache_path else None}


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=None, help="YAML file of ReinforceStableConfig fields (flags override it)")
    data = parser.add_argument_group("data")
    data.add_argument("--train_data_file", default=None,
                      help="GSM8K JSONL to train on (default: openai/gsm8k's train split from the hub)")
    data.add_argument("--test_gsm8k_path", default=None,
                      help="GSM8K JSONL to evaluate on; absent or the train file: the last --holdout rows of the "
                           "train data are held back (never trained on) and evaluated")
    data.add_argument("--holdout", type=int, default=500, help="rows held back when there is no separate test file")
    data.add_argument("--gsm8k_path", default=None,
                      help="GSM8K JSONL the few-shot examples come from (default: the training rows)")
    data.add_argument("--sym_calc", action=argparse.BooleanOptionalAction, default=False,
                      help="the env completes '<<a*b=' calculator requests; examples keep GSM8K's <<...>> notes")
    model = parser.add_argument_group("model and prompt")
    model.add_argument("--model_name_or_path", default=EMBEDDED_MODEL,
                       help="hub name, local folder, or the embedded default")
    model.add_argument("--ref_model_name", default=None,
                       help="KL reference model; absent or the policy's model: a frozen copy of the policy")
    model.add_argument("--cache_dir", default=None, help="Hugging Face hub cache folder for downloads")
    model.add_argument("--sys_prompt_path", default=str(DEFAULT_SYSTEM_PROMPT_PATH), help="system prompt file")
    model.add_argument("--n_few_shot_examples", type=int, default=5, help="solved examples in every prompt")
    model.add_argument("--lora_r", type=int, default=0, help="train LoRA adapters of this rank (0: every weight)")
    model.add_argument("--load_in_4bit", action="store_true",
                       help="QLoRA: the base in 4-bit (needs --lora_r, bitsandbytes)")
    model.add_argument("--gradient_checkpointing", action="store_true",
                       help="recompute activations: less memory, more time")
    loop = parser.add_argument_group("training (see the mapping above)")
    for flag, kind, text in [
        ("num_iterations", int, "collect -> update rounds"),
        ("num_collection_episodes", int, "episodes collected per iteration"),
        ("max_trajectory_steps", int, f"steps (lines) per episode before it is truncated: the env's max_steps "
                                      f"(default {MAX_TRAJECTORY_STEPS})"),
        ("num_update_steps", int, "cap on micro-batches trained per iteration (default: all episodes)"),
        ("gradient_accumulation_steps", int, "micro-batches per optimizer step (default 16)"),
        ("micro_batch_size", int, "trajectories per forward/backward pass (default 1)"),
        ("kl_coeff", float, "weight of the KL to the reference model (default 0.25)"),
        ("update_ref_iterations", int, "copy the policy into the reference every K iterations (0: never)"),
        ("learning_rate", float, "AdamW learning rate (default 1e-5)"),
        ("max_new_tokens", int, "tokens per step (default 64)"),
        ("seed", int, "random seed (also picks the few-shot examples)"),
        ("evaluation_iterations", int, "evaluate every K iterations (default: only at the end)"),
        ("n_eval_steps", int, "evaluation episodes (default 20)"),
        ("n_save_iterations", int, "checkpoint every K iterations (default: only at the end)"),
    ]:
        loop.add_argument(f"--{flag}", type=kind, default=None, help=text)
    loop.add_argument("--evaluation_at_start", action=argparse.BooleanOptionalAction, default=None,
                      help="evaluate before training (default off)")
    out = parser.add_argument_group("output")
    out.add_argument("--save_path", default=None, help=f"run folder (default {DEFAULTS['output_dir']})")
    out.add_argument("--cache_buffer", action="store_true", help="save/reuse collections at --buffer_cache_path")
    out.add_argument("--buffer_cache_path", default=None, help="replay buffer file for --cache_buffer")
    out.add_argument("--resume", action="store_true",
                     help="continue from the newest complete checkpoint in <save_path>/checkpoints if there is one")
    out.add_argument("--wandb", choices=["off", "offline", "online"], default=None,
                     help="mirror metrics to wandb (default: off, or WANDB_MODE when it is offline/online)")
    return parser


def resolve_config(args: argparse.Namespace) -> tuple[ReinforceStableConfig, int]:
    """The config (defaults < --config file < flags) and the cap on trajectories per update (0: none)."""
    overrides = {field: getattr(args, flag) for flag, field in FLAG_TO_FIELD.items() if getattr(args, flag) is not None}
    config = config_from_arguments(ReinforceStableConfig, argparse.Namespace(config=args.config, **overrides), DEFAULTS)
    for flag in ("gradient_accumulation_steps", "num_update_steps", "max_trajectory_steps"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise ConfigError(f"--{flag} must be >= 1, got {value}")
    if args.gradient_accumulation_steps is not None:
        config = dataclasses.replace(config, minibatch_size=args.gradient_accumulation_steps * config.micro_batch_size)
    cap = args.num_update_steps * config.micro_batch_size if args.num_update_steps else 0
    if args.n_few_shot_examples < 0:
        raise ConfigError(f"--n_few_shot_examples must be >= 0, got {args.n_few_shot_examples}")
    if args.holdout < 1:
        raise ConfigError(f"--holdout must be >= 1, got {args.holdout}")
    if args.lora_r < 0 or (args.load_in_4bit and not args.lora_r):
        raise ConfigError(f"--lora_r must be >= 0 (and > 0 with --load_in_4bit), got {args.lora_r}")
    if args.cache_buffer and not args.buffer_cache_path:
        raise ConfigError("--cache_buffer needs --buffer_cache_path FILE")
    return config, cap


def trajectory_steps(args: argparse.Namespace) -> int:
    """Steps per episode before truncation (--max_trajectory_steps): the env's own limit, its max_steps."""
    return args.max_trajectory_steps if args.max_trajectory_steps is not None else MAX_TRAJECTORY_STEPS


def few_shot_pool(args, train_rows) -> list[dict]:
    """Rows the few-shot examples come from: --gsm8k_path, else the training rows (held-back rows excluded)."""
    path = args.gsm8k_path if args.gsm8k_path is not None else args.train_data_file
    if args.n_few_shot_examples == 0:
        return []
    rows = load_rows("GSM8K", path, "train", GSM8KEnv.HUB_ID, GSM8KEnv.HUB_CONFIG, ("question", "answer"))
    if train_rows is not None and (args.gsm8k_path is None or same_file(args.gsm8k_path, args.train_data_file)):
        rows = rows[train_rows[0]:train_rows[1]]
    return rows


def build_reference(args, policy, config):
    """A separate frozen reference when --ref_model_name names another model; None: a frozen copy of the policy."""
    name = args.ref_model_name
    if config.kl_coeff == 0 or not name or name == args.model_name_or_path or same_file(name, args.model_name_or_path):
        return None
    ref = HFPolicy(name, device=policy.device)
    if ref.tokenizer.get_vocab() != policy.tokenizer.get_vocab():
        raise ValueError(f"--ref_model_name {name} has a different tokenizer from --model_name_or_path "
                         f"{args.model_name_or_path}; the KL term compares log-probs of the same token ids")
    ref.model.requires_grad_(False)
    ref.model.eval()
    if config.ref_sync_every:
        ours = {k: v.shape for k, v in policy.model.state_dict().items()}
        if ours != {k: v.shape for k, v in ref.model.state_dict().items()}:
            raise ConfigError(f"--update_ref_iterations copies the policy into the reference, but {name} has another "
                              f"architecture than {args.model_name_or_path}; pass --update_ref_iterations 0")
    return ref


def run(args: argparse.Namespace) -> None:
    config, cap = resolve_config(args)
    if args.cache_dir:
        import huggingface_hub.constants

        os.environ["HF_HUB_CACHE"] = huggingface_hub.constants.HF_HUB_CACHE = args.cache_dir
    try:
        train_env, test_env, train_rows, eval_note = gsm8k_train_test(
            args.train_data_file, args.test_gsm8k_path, args.holdout, "--test_gsm8k_path", mode="stepwise",
            sym_calc=args.sym_calc, max_steps=trajectory_steps(args))
    except DataFileNotFoundError as err:  # from the hub (offline): name this script's flag
        raise DataFileNotFoundError(str(err).replace("data_path=", "--train_data_file ")) from None
    examples = few_shot_pool(args, train_rows)
    suffix = train_env.instruction if train_env.instruction.endswith("\n") else train_env.instruction + "\n"
    policy = FewShotStepwisePolicy(args.model_name_or_path, system_prompt_path=args.sys_prompt_path,
                                   examples=examples, n_few_shot=args.n_few_shot_examples, seed=config.seed,
                                   keep_annotations=args.sym_calc, question_suffix=suffix,
                                   lora=LoraSettings(r=args.lora_r, alpha=2 * args.lora_r,
                                                     load_in_4bit=args.load_in_4bit) if args.lora_r else None,
                                   gradient_checkpointing=args.gradient_checkpointing)
    ref_policy = build_reference(args, policy, config)
    cache_path = args.buffer_cache_path if args.cache_buffer else None
    algo = CachedBufferReinforceStable(policy, train_env, config, ref_policy=ref_policy, eval_env=test_env,
                                       buffer_cache_path=cache_path, max_update_trajectories=cap)

    print(f"device={policy.device} model={args.model_name_or_path} few-shot={args.n_few_shot_examples} "
          f"sym_calc={args.sym_calc} train problems={train_env.num_problems}")
    print(f"note: {eval_note}")
    print(f"{config.prompts_per_iteration} episodes/iteration, optimizer step = {config.minibatch_size} trajectories "
          f"in micro-batches of {config.micro_batch_size}" + (f", at most {cap} trajectories trained per iteration"
                                                               if cap else ""))
    if algo.cached is not None:
        print(f"buffer cache: first iteration trains on {len(algo.cached)} cached episodes from "
              f"{args.buffer_cache_path}; new collections go to {algo.cache_path}")
    elif cache_path:
        print(f"buffer cache: every collection is saved to {cache_path}")
    train_and_report(algo, args.resume)


def main(argv: list[str] | None = None) -> None:
    init_from_env()  # a torchrun launch joins its process group here (rank 0 alone prints and writes)
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


if __name__ == "__main__":
    main()
