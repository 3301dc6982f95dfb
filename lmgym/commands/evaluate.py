"""`lmgym eval`: a model or checkpoint's accuracy (and pass@k, maj@k) on a registered env or a data set.

    lmgym eval --model runs/grpo/model --env GSM8K-v0 --env_kwargs '{"split": "test"}' --episodes 200
    lmgym eval --model runs/grpo/checkpoint-100 --dataset_name test.jsonl --reward_funcs accuracy_reward
    lmgym eval --model runs/grpo/model --env Arithmetic-v0 --k 4 --temperature 0.8 --output_file eval.json

With --dataset_name, each row needs a "prompt" and its "answer" column is the gold (Dataset-v0; --reward_funcs,
default correctness_reward, adds their means as reward_<name>). Greedy by default (k 1); k > 1 samples --samples
(n >= k) completions a problem at --temperature. It prints the metrics as one JSON object and, with
--output_file, writes them there and each problem's outcome beside it (<name>.problems.jsonl).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lmgym.commands.arguments import add_model_arguments, build_policy, rewards_of
from lmgym.commands.data import load_data
from lmgym.core.atomic_io import atomic_write_text
from lmgym.training.cli import run_with_clear_errors
from lmgym.training.flag_parser import SuggestingParser


def build_parser() -> argparse.ArgumentParser:
    """The flags of `lmgym eval`."""
    parser = SuggestingParser(prog="lmgym eval", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser, lora=False)
    source = parser.add_argument_group("what is evaluated (one of --env and --dataset_name)")
    source.add_argument("--env", default=None, help="a registered env id (Arithmetic-v0, GSM8K-v0, MATH-v0, ...)")
    source.add_argument("--env_kwargs", default="{}", help="the env's keyword arguments as a JSON object")
    source.add_argument("--dataset_name", default=None,
                        help="a hub data set, or a local .jsonl/.json/.csv/.parquet file or saved folder")
    source.add_argument("--dataset_config", default=None, help="the hub data set's configuration (subset) name")
    source.add_argument("--dataset_test_split", default="test", help="the split evaluated (default test)")
    source.add_argument("--reward_funcs", nargs="+", default=["correctness_reward"], metavar="NAME",
                        help="with --dataset_name: reward functions whose means are reported (default "
                             "correctness_reward)")
    sampling = parser.add_argument_group("sampling")
    sampling.add_argument("--episodes", type=int, default=256, help="problems evaluated at most (default 256)")
    sampling.add_argument("--max_new_tokens", type=int, default=256, help="tokens per answer (default 256)")
    sampling.add_argument("--k", type=int, default=1, help="pass@k, maj@k (k > 1 needs --temperature > 0)")
    sampling.add_argument("--samples", type=int, default=None, help="completions a problem, n >= k (default k)")
    sampling.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0: greedy)")
    sampling.add_argument("--batch_prompts", type=int, default=64, help="problems a generation call (default 64)")
    sampling.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--output_file", default=None,
                        help="a .json file for the metrics (each problem's outcome goes beside it)")
    return parser


def env_of(args: argparse.Namespace) -> Any:
    """The env --env or --dataset_name names (exactly one of them)."""
    from lmgym.envs import make

    if (args.env is None) == (args.dataset_name is None):
        raise ValueError("lmgym eval: give one of --env (a registered env id) and --dataset_name (a data set)")
    if args.env is not None:
        try:
            kwargs = json.loads(args.env_kwargs)
        except json.JSONDecodeError as err:
            raise ValueError(f"--env_kwargs is not JSON: {err}") from None
        if not isinstance(kwargs, dict):
            raise ValueError(f"--env_kwargs must be a JSON object, got {args.env_kwargs}")
        return make(args.env, **kwargs)
    reward_funcs = rewards_of(args)
    dataset = load_data(args.dataset_name, args.dataset_config, args.dataset_test_split)
    return make("Dataset-v0", dataset=dataset, reward_fns=reward_funcs)


def run(args: argparse.Namespace) -> dict[str, float]:
    """Evaluate as `args` say; the metrics."""
    from lmgym.evaluation import evaluate

    for name in ("episodes", "max_new_tokens", "k", "batch_prompts"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    output = Path(args.output_file) if args.output_file else None
    if output is not None and output.suffix != ".json":
        raise ValueError(f"--output_file {output}: give a .json path (the per-problem records go beside it)")
    env = env_of(args)
    policy = build_policy(args, lora=False)
    result = evaluate(policy, env, episodes=args.episodes, max_new_tokens=args.max_new_tokens, k=args.k,
                      temperature=args.temperature, batch_prompts=args.batch_prompts, seed=args.seed,
                      progress=True, samples=args.samples, records_path=output)
    text = json.dumps(result, sort_keys=True)
    if output is not None:
        atomic_write_text(output, text + "\n")
    print(text)
    return result


def main(argv: list[str] | None = None, command: str = "eval") -> dict[str, float]:
    """`lmgym eval ...`; bad input exits with one line."""
    return run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))
