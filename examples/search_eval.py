"""Search at inference, side by side: greedy, maj@n, best-of-n with a PRM, step-level beam search with a
PRM and MCTS with a PRM, on the same held-out problems of a stepwise env, each with its accuracy and the
tokens it sampled.

    python examples/search_eval.py --model runs/quickstart-gpu/model --prm runs/prm/prm --level 3 --n 8
    python examples/search_eval.py --env GSM8KStepwise-v0 --data_path train.jsonl --split train \\
        --offset 7273 --episodes 200 --prm runs/prm/prm

Equal-budget curves (accuracy against tokens per problem; every method at every budget, each run capped
hard at the budget's tokens per problem, see lmgym/evaluation/curves.py), written as <output>.md/.json/.png:

    python examples/search_eval.py --preset gpu --model runs/quickstart-gpu/model --prm runs/verifier/prm
    python examples/search_eval.py --prm runs/prm/prm --level 2 --budgets 96,192,384,768 --episodes 256

Methods default to greedy and maj (curves: maj only), plus weighted_maj, best_of_n, beam and mcts when a
verifier folder is given (--prm, as `ProcessRewardModel.save` writes it; any StepScorer fits the search). The
budget is stated by --n (maj, best_of_n), --beam_width x --beam_expand (beam) and --simulations (mcts;
--max_tokens caps its tokens per problem); every row reports the tokens it really sampled per problem,
discarded candidates included. The table is printed and written as <output>.md and <output>.json, each
problem's outcome under every method (and budget) beside it in <output>.problems.jsonl (benchmarks/report.py
recomputes the table from it).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from common import example_parser  # noqa: E402

from lmgym.core.problem_records import problems_path  # noqa: E402
from lmgym.evaluation.curves import curves_table, evaluate_curves, save_curves  # noqa: E402
from lmgym.evaluation.search_eval import evaluate_search, markdown_table, save_table  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL  # noqa: E402
from lmgym.policies.prm import AGGREGATIONS  # noqa: E402
from lmgym.search.mcts import MCTSConfig  # noqa: E402
from lmgym.search.methods import search_methods  # noqa: E402
from lmgym.search.settings import SearchSettings  # noqa: E402
from lmgym.training.cli import run_with_clear_errors  # noqa: E402

# --preset: flag defaults for the curves (explicit flags still win); gpu: L2 test problems, budgets around
# maj@8's 366 tokens per problem there (benchmarks/RESULTS.md)
PRESETS = {
    "cpu": dict(level=1, episodes=8, budgets="32,64,128,256", max_new_tokens=16, batch_problems=8, simulations=8,
                expand_k=2, wave_size=2, beam_width=2, output="runs/search_curves-cpu/curves"),
    "gpu": dict(level=2, episodes=256, budgets="96,192,384,768,1536", max_new_tokens=64, batch_problems=64,
                mcts_answer="vote", output="runs/search_curves-gpu/curves"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help="curve defaults: cpu (tiny) or gpu (L2, 256 problems, budgets 96..1536); "
                             "explicit flags override it")
    parser.add_argument("--budgets", default=None,
                        help="comma-separated tokens per problem: draw accuracy-vs-tokens curves, every method "
                             "capped at each budget (greedy has no budget)")
    parser.add_argument("--model", default=EMBEDDED_MODEL,
                        help="policy: hub name, local folder, or the embedded default")
    parser.add_argument("--prm", default=None,
                        help="a PRM folder (ProcessRewardModel.save); needed by best_of_n, beam and mcts")
    parser.add_argument("--env", default="Arithmetic-v0", help="env id, played in stepwise mode")
    parser.add_argument("--level", type=int, default=3, help="Arithmetic level (Arithmetic ids only)")
    parser.add_argument("--split", default="test", help="the env's split")
    parser.add_argument("--data_path", default=None, help="local data file for dataset envs (GSM8K, MATH)")
    parser.add_argument("--max_steps", type=int, default=8, help="steps per episode at most")
    parser.add_argument("--episodes", type=int, default=256, help="problems evaluated")
    parser.add_argument("--offset", type=int, default=0, help="first problem index (e.g. a held-back slice)")
    parser.add_argument("--methods", default=None,
                        help=f"comma-separated, of {', '.join(search_methods())} (default: greedy,maj and, with --prm, "
                             f"best_of_n,beam,mcts)")
    parser.add_argument("--n", type=int, default=8, help="samples per problem of maj and best_of_n")
    parser.add_argument("--beam_width", type=int, default=4, help="beams kept per problem")
    parser.add_argument("--beam_expand", type=int, default=2, help="candidates per beam per step")
    parser.add_argument("--simulations", type=int, default=32, help="leaf evaluations per problem (mcts)")
    parser.add_argument("--expand_k", type=int, default=4, help="candidate steps per expanded leaf (mcts)")
    parser.add_argument("--wave_size", type=int, default=4, help="leaves expanded per tree per wave (mcts)")
    parser.add_argument("--selection", default="puct", help="puct | ucb1 (mcts)")
    parser.add_argument("--exploration", type=float, default=1.0, help="exploration weight c (mcts)")
    parser.add_argument("--mcts_answer", default="visits", help="visits | value | vote (mcts)")
    parser.add_argument("--max_tokens", type=int, default=None,
                        help="sampled tokens per problem (mcts; default: no cap)")
    parser.add_argument("--temperature", type=float, default=0.8, help="sampling temperature (greedy: 0)")
    parser.add_argument("--max_new_tokens", type=int, default=64, help="tokens per step")
    parser.add_argument("--aggregation", choices=AGGREGATIONS, default=None,
                        help="solution score from step scores (default: the PRM's own)")
    parser.add_argument("--batch_problems", type=int, default=64, help="problems searched together")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (the same for every method)")
    parser.add_argument("--output", default="runs/search_eval/table", help="writes <output>.md and <output>.json")
    return parser


def main(argv: list[str] | None = None) -> None:
    run_with_clear_errors(lambda: run(parse(argv)))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags, with the --preset's defaults under the explicit ones."""
    parser = build_parser()
    preset = parser.parse_args(argv).preset
    if preset is not None:
        parser.set_defaults(**PRESETS[preset])
    return parser.parse_args(argv)


def budgets_of(args: argparse.Namespace) -> list[int] | None:
    """--budgets as integers (None: no curves); a bad list is one ValueError."""
    if args.budgets is None:
        return None
    try:
        budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    except ValueError:
        raise ValueError(f"--budgets must be comma-separated integers (tokens per problem), got {args.budgets!r}") \
            from None
    if not budgets or min(budgets) < 1:
        raise ValueError(f"--budgets must be integers >= 1, got {args.budgets!r}")
    return budgets


def chosen_methods(args: argparse.Namespace) -> list[str]:
    """The methods asked for (checked before any model loads)."""
    curves, registered = args.budgets is not None, search_methods()
    if args.methods is None:
        scored = [name for name, method in registered.items() if method.needs_scorer]
        return (["maj"] if curves else ["greedy", "maj"]) + (scored if args.prm else [])
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if curves and "greedy" in methods:
        raise ValueError("--methods greedy has no token budget; leave it out with --budgets")
    unknown = [m for m in methods if m not in registered]
    if unknown or not methods:
        raise ValueError(f"--methods: {', '.join(map(repr, unknown)) or 'none given'}; "
                         f"choose from {', '.join(registered)}")
    scored = [m for m in methods if registered[m].needs_scorer]
    if scored and not args.prm:
        raise ValueError(f"--methods {', '.join(scored)} needs a PRM folder: --prm PATH")
    return methods


def run(args: argparse.Namespace) -> None:
    from lmgym.envs import make
    from lmgym.policies import HFPolicy

    methods, budgets = chosen_methods(args), budgets_of(args)
    tree = MCTSConfig(simulations=args.simulations, expand_k=args.expand_k, wave_size=args.wave_size,
                      selection=args.selection, exploration=args.exploration, answer=args.mcts_answer,
                      max_tokens=args.max_tokens)
    common = dict(n=args.n, beam_width=args.beam_width, beam_expand=args.beam_expand, temperature=args.temperature,
                  max_new_tokens=args.max_new_tokens, mcts=tree)
    for m in methods:  # bad settings fail before any model loads
        SearchSettings(method=m, **common, aggregation=args.aggregation or "min")
    env_kwargs = dict(mode="stepwise", split=args.split, max_steps=args.max_steps)
    if args.env.removeprefix("lmgym/").startswith("Arithmetic"):
        env_kwargs["level"] = args.level
    if args.data_path:
        env_kwargs["data_path"] = args.data_path
    env = make(args.env, **env_kwargs)
    policy = HFPolicy(args.model)
    scorer = None
    if args.prm:
        from lmgym.policies.prm import ProcessRewardModel

        scorer = ProcessRewardModel.from_pretrained(args.prm, device=policy.device)
    aggregation = args.aggregation or (scorer.aggregation if scorer is not None else "min")
    settings = [SearchSettings(method=m, **common, aggregation=aggregation) for m in methods]
    print(f"device={policy.device} model={args.model} prm={args.prm} env={args.env} {env_kwargs} "
          f"problems {args.offset}..{args.offset + args.episodes - 1} aggregation={aggregation}")
    about = {**vars(args), "methods": methods, "aggregation": aggregation, "device": str(policy.device)}
    run = dict(episodes=args.episodes, offset=args.offset, batch_problems=args.batch_problems, seed=args.seed,
               progress=True, records_path=problems_path(Path(args.output).with_suffix(".json")))
    if budgets is not None:
        rows = evaluate_curves(policy, env, settings, budgets, scorer, **run)
        print(curves_table(rows), end="")
        markdown, data, png = save_curves(rows, args.output, about)
        print(f"curves: {markdown}, {data} and {png}; per-problem records: {run['records_path']}")
        return
    rows = evaluate_search(policy, env, settings, scorer, **run)
    print(markdown_table(rows), end="")
    markdown, data = save_table(rows, args.output, about)
    print(f"table: {markdown} and {data}; per-problem records: {run['records_path']}")


if __name__ == "__main__":
    main()
