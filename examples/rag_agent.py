"""A searching agent in one command (issue 24): tool-use transcripts -> SFT -> GRPO (one run per seed), then
one table of base, SFT, SFT + GRPO and three references, every row evaluated greedily on the same held-out
HotpotQA questions.

    python examples/rag_agent.py --preset cpu --data_path ../shared/data/hotpotqa/hotpot_dev_distractor_v1_first53.json
    python examples/rag_agent.py --preset gpu --data_path ../shared/data/hotpotqa --seeds 3

Questions: every question of --data_path (a HotpotQA file in either layout, or a folder of them). The last
--hold_out (`lmgym.envs.hotpotqa.data.held_out_ranges`) are held out: never trained on, never in a transcript,
evaluated in every row. The first --train_questions of the others (0: all) are trained on. Every
paragraph of every question, held-out ones included, is in the store, as in open-domain QA.
Store: --index (a folder examples/build_index.py or examples/rag_grpo.py wrote), else <output_dir>/index,
built once from the questions' paragraphs: BM25 in the cpu preset; in the gpu preset BM25 + dense
embeddings (hybrid search) when an embedder is installed (--embedder, default the offline MiniLM), else
BM25 with a note (--no_dense: BM25). --k passages per search, --max_searches per episode (default 3: the
question, then both entities of a comparison), --search_method, in every stage.

Stages (each in <output_dir>/<stage>/, a Trainer run folder with its model in model/):
1. sft: a tool-use transcript of each training question (`lmgym.traindata.tool_transcripts`, written to
   <output_dir>/transcripts.jsonl: search the question, then the missing supporting titles, then the gold
   answer, the tool turns the store's real passages), then `lmgym.algorithms.SFT` of --model on them, every
   weight trained; the loss covers the model's own turns only (the prompt and tool turns are masked). The
   system prompt (--system_prompt_path) comes first, as GRPO and the evaluation prompt with it, and is
   saved with the model. --sft_epochs over the transcripts set its iterations (--sft_iterations: exactly).
2. grpo_seed<S>, for S = --seed ... --seed + --seeds - 1: `lmgym.algorithms.GRPO` from the SFT model (LoRA r
   --lora_r) on RAG-HotpotQA-v0 over the training questions, each seed its own run, rewarded with the env's
   sum under `lmgym.envs.hotpotqa.rewards.DEFAULT_WEIGHTS` (answering pays more than finding paragraphs; reward
   combination "env"). Each run folder keeps metrics.jsonl, reward_components.png (each component's batch
   mean per iteration) and reward_distribution.png.

Rows, each evaluated greedily (--max_new_tokens a turn) on the held-out questions, in table order:
- base: --model as the agent in RAG-HotpotQA-v0, with the system prompt; SFT: the SFT model, the same way;
- SFT + GRPO: each seed's model, then the mean of the seeds' numbers;
- question_search (reference): one scripted search with the question as the query (top --k passages, no
  agent), then the model answers (`lmgym.envs.hotpotqa.retrieved.QuestionSearchHotpotQAEnv`);
- closed_book (reference): the model answers the question alone (HotpotQA-v0 closed book);
- gold_context (reference): the model answers given the record's own context paragraphs, the supporting
  ones among its distractors (HotpotQA-v0 distractor).
The references are answered by --reference_model (default --model, the base model), with no system prompt:
they tell what retrieval, no retrieval and the gold paragraphs give an untrained reader.
Columns (`lmgym.evaluation.rag_evaluate`): MRR of the episode's own searches (the first supporting title's reciprocal
rank among everything it retrieved), recall@3 (the share of the supporting titles among the first 3
passages it retrieved: its first search's), recall over every passage it retrieved, EM, F1, the same two with
an untagged reply's first line read as its answer (what an untrained reader knew, apart from the format),
searches and generated tokens per episode. Retrieval columns are "-" for rows that do not search. Written to
<output_dir>/rag_agent.md and rag_agent.json (every number; each row's episodes in <row>/eval.problems.jsonl).

Resuming (each command may be cut short): --stages runs some of sft, grpo, base, question_search,
closed_book, gold_context (default all). A training stage whose model folder exists is skipped, one cut
mid-run continues from its newest checkpoint (--restart starts the named stages over); a row's evaluation is
saved in <row>/eval.json and reused while its settings are unchanged. Per-stage settings: the preset, then
--sft_config / --grpo_config YAML files (SFTConfig, GRPOConfig fields), then the flags.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from common import add_preset_sizes, example_parser, parse_stages, preset_sizes, release_memory  # noqa: E402
from pipeline_table import EVAL_FILE, load_row, save_row  # noqa: E402

from lmgym.algorithms import GRPO, SFT, GRPOConfig, SFTConfig  # noqa: E402
from lmgym.core.atomic_io import atomic_write_text  # noqa: E402
from lmgym.core.problem_records import write_problem_records  # noqa: E402
from lmgym.envs.hotpotqa.data import held_out_ranges, load_hotpotqa  # noqa: E402
from lmgym.evaluation.rag_evaluate import METRICS, evaluate_rag  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL  # noqa: E402
from lmgym.policies.few_shot import PROMPTS_DIR, read_system_prompt  # noqa: E402
from lmgym.training import load_config  # noqa: E402
from lmgym.training.checkpoints import has_checkpoints  # noqa: E402
from lmgym.training.cli import run_with_clear_errors  # noqa: E402

STAGES = ("sft", "grpo", "base", "question_search", "closed_book", "gold_context")
REFERENCES = {"question_search": "question as the only query, top {k}, then answer",
              "closed_book": "closed book", "gold_context": "gold distractor context"}
PRESETS = {
    "cpu": {  # the embedded model on 2 CPU cores, to see every stage run: SFT on 2 transcripts (one
        # iteration: ~100 s on 2 loaded cores at ~800 tokens a transcript), one GRPO iteration of 2 x 2 episodes
        "sft": dict(examples_per_iteration=2, max_length=2048, micro_batch_size=1, learning_rate=1e-4,
                    eval_at_start=False),
        "grpo": dict(train_iterations=1, prompts_per_iteration=2, samples_per_prompt=2, temperature=1.0,
                     learning_rate=5e-5, kl_coeff=0.04, micro_batch_size=4, eval_at_start=False,
                     reward_combination="env"),
        "run": dict(hold_out=2, train_questions=2, sft_epochs=1.0, max_new_tokens=24, dense=False, eval_batch=8),
    },
    "gpu": {  # one GPU, the embedded SmolLM2-135M
        # transcripts average ~900 tokens with the system prompt (3 passages a search, up to 3 searches):
        # rows of 2048 tokens hold the longest, and packing fills them
        "sft": dict(examples_per_iteration=32, max_length=2048, micro_batch_size=8, learning_rate=1e-4,
                    warmup_iterations=5, eval_at_start=False),
        # GRPO sized as examples/rag_grpo.py's gpu preset (16 questions x 8 episodes an iteration, LoRA, and a
        # token budget per micro-batch: contexts grow every tool turn; no checkpointing: see there). From an SFT model,
        # whose distribution is sharp, a lower learning rate than rag_grpo's 2e-4 (examples/pipeline.py saw
        # GRPO after SFT collapse at the base model's rate) and temperature 1.0 (its samples vary less).
        "grpo": dict(train_iterations=50, prompts_per_iteration=16, samples_per_prompt=8, temperature=1.0,
                     learning_rate=5e-5, kl_coeff=0.04, micro_batch_size=32, eval_at_start=False, save_every=10,
                     gradient_checkpointing=False, max_tokens_per_microbatch=32768, reward_combination="env"),
        "run": dict(hold_out=150, train_questions=0, sft_epochs=3.0, max_new_tokens=64, dense="auto", eval_batch=64),
    },
}
RUN_HELP = {"hold_out": "last questions held out, evaluated in every row",
            "train_questions": "training questions used, the first ones of the rest (0: all)",
            "sft_epochs": "passes over the transcripts in SFT (sets its iterations)",
            "max_new_tokens": "tokens per turn, in GRPO and evaluation",
            "eval_batch": "questions evaluated per batch"}


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--preset", choices=sorted(PRESETS), default=None, help="cpu or gpu (default: gpu when CUDA is available)")
    add("--data_path", required=True, help="HotpotQA file (either layout) or a folder of them")
    add("--model", default=EMBEDDED_MODEL, help="the base model: hub name, local folder, or the embedded default")
    add("--reference_model", default=None, help="the model answering the reference rows (default --model)")
    add("--output_dir", default=None, help="the run folder (default runs/rag_agent-<preset>)")
    add("--stages", default="all", help=f"comma-separated stages to run, of {', '.join(STAGES)} (default all)")
    add("--restart", action="store_true", help="retrain and re-evaluate the stages named, even when saved")
    add("--seeds", type=int, default=1, help="GRPO runs from the SFT model, seeds --seed, --seed + 1, ... (default 1)")
    add("--seed", type=int, default=0, help="seed of SFT and of the first GRPO run (default 0)")
    add("--system_prompt_path", default=str(PROMPTS_DIR / "rag_sys.txt"),
        help="the agent's system prompt (default lmgym/prompts/rag_sys.txt; 'none': no system turn)")
    add("--index", default=None, help="a saved index folder to search (default: <output_dir>/index, built once)")
    add("--rebuild_index", action="store_true", help="build <output_dir>/index again even if it holds one")
    add("--no_dense", action="store_true", help="a new index is BM25 only (the gpu preset adds embeddings)")
    add("--embedder", default=None, help="embedder of a new dense index: hashing-<dim> or a sentence-transformers "
                                         "folder or name (default: the offline MiniLM)")
    add("--search_method", choices=("hybrid", "bm25", "dense"), default=None,
        help="how queries are searched (default: the index's, hybrid when dense)")
    add("--k", type=int, default=3, help="passages per search (default 3)")
    add("--max_searches", type=int, default=3, help="searches per episode (default 3)")
    add("--lora_r", type=int, default=16, help="GRPO's LoRA rank (default 16)")
    add("--lora_alpha", type=int, default=32, help="GRPO's LoRA alpha (default 32)")
    add("--progress", action=argparse.BooleanOptionalAction, default=True, help="progress bars (default on)")
    for stage, cls in (("sft", SFTConfig), ("grpo", GRPOConfig)):
        add(f"--{stage}_config", default=None, help=f"YAML file of {cls.__name__} fields for the {stage} stage")
        add(f"--{stage}_iterations", type=int, default=None,
            help=f"{stage}'s train_iterations (default: " + ("from --sft_epochs)" if stage == "sft" else
                                                           "the preset's: " + ", ".join(
                                                               f"{p} {PRESETS[p]['grpo']['train_iterations']}"
                                                               for p in PRESETS) + ")"))
    sizes = parser.add_argument_group("sizes (default: the preset's)")
    add_preset_sizes(sizes, PRESETS, RUN_HELP, floats=("sft_epochs",))
    return parser


def main(argv: list[str] | None = None) -> None:
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


class Plan:
    """Every setting, folder, question split and config of a run, checked before any model loads."""

    def __init__(self, args: argparse.Namespace, preset: str):
        self.args, self.preset = args, preset
        self.run = preset_sizes(args, PRESETS[preset]["run"])
        self.out = Path(args.output_dir or f"runs/rag_agent-{preset}")
        self.stages = parse_stages(args.stages, STAGES)
        for name in ("k", "max_searches", "lora_r", "lora_alpha", "seeds", "max_new_tokens", "eval_batch"):
            value = self.run.get(name, getattr(args, name, None))
            if value < 1:
                raise ValueError(f"--{name} must be >= 1, got {value}")
        if self.run["train_questions"] < 0:
            raise ValueError(f"--train_questions must be >= 0, got {self.run['train_questions']}")
        if not (math.isfinite(self.run["sft_epochs"]) and self.run["sft_epochs"] > 0):
            raise ValueError(f"--sft_epochs must be > 0, got {self.run['sft_epochs']}")
        if args.no_dense and args.search_method in ("dense", "hybrid"):
            raise ValueError(f"--search_method {args.search_method} needs dense embeddings, but --no_dense makes a "
                             f"BM25-only index; drop --no_dense or use --search_method bm25")
        self.system_prompt = (None if args.system_prompt_path.lower() == "none"
                              else read_system_prompt(args.system_prompt_path))
        if self.run["hold_out"] < 1:
            raise ValueError(f"--hold_out must be >= 1 (the rows are evaluated on the held-out questions), got "
                             f"{self.run['hold_out']}")
        self.records = load_hotpotqa(args.data_path)
        (_, stop), (held_start, held_stop) = held_out_ranges(len(self.records), self.run["hold_out"])
        used = min(stop, self.run["train_questions"] or stop)
        self.train_records, self.held_out = self.records[:used], self.records[held_start:held_stop]
        self.seeds = [args.seed + i for i in range(args.seeds)]
        self.sft_config = self.config("sft", SFTConfig, {"seed": args.seed})
        if args.sft_iterations is None:  # --sft_epochs passes over the transcripts (one per training question)
            iterations = math.ceil(self.run["sft_epochs"] * len(self.train_records)
                                   / self.sft_config.examples_per_iteration)
            self.sft_config = self.config("sft", SFTConfig, {"seed": args.seed, "train_iterations": iterations})
        self.grpo_configs = {seed: self.config(f"grpo_seed{seed}", GRPOConfig, {"seed": seed})
                             for seed in self.seeds}

    def config(self, stage: str, cls: type, overrides: dict[str, Any]):
        """The stage's config: the preset < its YAML file < the flags (output_dir: <output_dir>/<stage>)."""
        family = "sft" if stage == "sft" else "grpo"
        defaults = dict(PRESETS[self.preset][family])
        if family == "grpo":
            defaults["max_new_tokens"] = self.run["max_new_tokens"]
        flags = {"output_dir": str(self.out / stage), "progress": self.args.progress,
                 "train_iterations": getattr(self.args, f"{family}_iterations"), **overrides}
        return load_config(cls, getattr(self.args, f"{family}_config"), flags, defaults)

    def model(self, row: str) -> str:
        """The model a row evaluates, or a training stage writes."""
        if row == "base":
            return self.args.model
        if row in REFERENCES:
            return self.args.reference_model or self.args.model
        return str(self.out / row / "model")

    def rows(self) -> list[str]:
        """Every evaluated row, in table order (the mean of the GRPO seeds is computed, not evaluated)."""
        return ["base", "sft", *(f"grpo_seed{seed}" for seed in self.seeds), *REFERENCES]

    def check_inputs(self) -> None:
        """Each stage run needs the models it starts from or evaluates, saved or made by an earlier stage."""
        made = set(self.stages)
        if "grpo" in made and "sft" not in made and not Path(self.model("sft")).is_dir():
            raise ValueError(f"stage grpo needs {self.model('sft')}, which does not exist: add sft to --stages")


def device_name() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def open_store(plan: Plan):
    """(the store, its description): --index loaded, else <output_dir>/index loaded or built (see the
    module docstring)."""
    from lmgym.core.extras import MissingExtraError
    from lmgym.retrieval import (
        EMBEDDED_EMBEDDER,
        DocumentStore,
        EmbedderNotFoundError,
        StoreConfig,
        documents_from_hotpotqa,
        embedder_from_name,
    )
    from lmgym.retrieval.index_files import IndexNotFoundError

    args, device = plan.args, device_name()
    folder = Path(args.index) if args.index else plan.out / "index"
    if args.index or not args.rebuild_index:
        try:
            store = DocumentStore.load(folder, device=device)
            return store, f"{folder} (loaded)"
        except IndexNotFoundError:
            if args.index:
                raise ValueError(f"--index {folder}: no saved index there (examples/build_index.py writes "
                                 f"one)") from None
    documents = documents_from_hotpotqa(plan.records)
    if plan.run["dense"] and not args.no_dense:
        try:
            embedder = embedder_from_name(args.embedder or EMBEDDED_EMBEDDER, device=device)
            store = DocumentStore.build(documents, StoreConfig(dense=True), embedder=embedder, progress=args.progress)
            store.save(folder)
            return store, f"{folder} (built: BM25 + {embedder.name})"
        except (MissingExtraError, EmbedderNotFoundError) as err:
            print(f"note: no embedder ({' '.join(str(err).split())[:200]}); the index is BM25 only")
    store = DocumentStore.build(documents, StoreConfig(dense=False), progress=False)
    store.save(folder)
    return store, f"{folder} (built: BM25)"


class Stages:
    """The run's store and envs, and each stage's training and evaluation."""

    def __init__(self, plan: Plan):
        from lmgym.envs.hotpotqa.rag import rag_reward_weights

        self.plan = plan
        self.store, self.store_about = open_store(plan)
        method = {"method": plan.args.search_method} if plan.args.search_method else None
        self.rag_kwargs = dict(store=self.store, k=plan.args.k, max_searches=plan.args.max_searches,
                               search_kwargs=method, reward_weights=rag_reward_weights(self.store.embedder))
        self.search_label = plan.args.search_method or self.store.config.default_method

    def rag_env(self, records):
        from lmgym.envs.hotpotqa.rag import RAGHotpotQAEnv

        return RAGHotpotQAEnv(records=records, **self.rag_kwargs)

    def reference_env(self, row: str):
        """The env of a reference row over the held-out questions."""
        from lmgym.envs.hotpotqa.env import HotpotQAEnv
        from lmgym.envs.hotpotqa.retrieved import QuestionSearchHotpotQAEnv

        if row == "question_search":
            return QuestionSearchHotpotQAEnv(records=self.plan.held_out, store=self.store, k=self.plan.args.k,
                                             search_kwargs=self.rag_kwargs["search_kwargs"])
        return HotpotQAEnv(records=self.plan.held_out, context="closed_book" if row == "closed_book" else "distractor")

    # ------------------------------------------------------------------ training
    def write_transcripts(self) -> list:
        """The training questions' transcripts, written to <output_dir>/transcripts.jsonl (the held-out ids
        beside them); their chat examples."""
        from lmgym.traindata.tool_transcripts import tool_transcripts

        out = self.plan.out / "transcripts.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        transcripts = list(tool_transcripts(self.rag_env(self.plan.train_records)))  # the SFT policy's system prompt
        atomic_write_text(out, "".join(json.dumps(t.to_row(), ensure_ascii=False) + "\n" for t in transcripts))
        atomic_write_text(out.with_suffix(".held_out_ids.txt"), "".join(f"{r.id}\n" for r in self.plan.held_out))
        found = sum(t.found_all for t in transcripts) / len(transcripts)
        searches = sum(len(t.queries) for t in transcripts) / len(transcripts)
        print(f"transcripts: {len(transcripts)} in {out} ({searches:.2f} searches each; every supporting paragraph "
              f"retrieved in {found:.1%})")
        return [t.example for t in transcripts]

    def train_sft(self) -> None:
        from lmgym.policies import HFPolicy

        examples = self.write_transcripts()
        policy = HFPolicy(self.plan.args.model, system_prompt=self.plan.system_prompt or "")
        trainer = SFT(policy, examples, self.plan.sft_config)
        rows = trainer.train(resume=resuming(self.plan, "sft"))
        trainer.save_model(self.plan.model("sft"))
        losses = [r["loss"] for r in rows if "loss" in r]
        print(f"sft: {len(examples)} transcripts, {len(rows)} iterations; loss "
              + " -> ".join(f"{x:.4f}" for x in losses[:1] + losses[-1:]))

    def train_grpo(self, seed: int) -> None:
        from lmgym.policies import HFPolicy, LoraSettings

        stage = f"grpo_seed{seed}"
        lora = LoraSettings(r=self.plan.args.lora_r, alpha=self.plan.args.lora_alpha)
        policy = HFPolicy(self.plan.model("sft"), lora=lora)  # the SFT model's saved system prompt
        algo = GRPO(policy, self.rag_env(self.plan.train_records), self.plan.grpo_configs[seed])
        rows = algo.train(resume=resuming(self.plan, stage))
        algo.save_model(self.plan.model(stage))
        rewards = [r["reward_mean"] for r in rows if "reward_mean" in r]
        print(f"{stage}: from {self.plan.model('sft')}; mean reward "
              + " -> ".join(f"{x:.3f}" for x in rewards[:1] + rewards[-1:]))

    # ------------------------------------------------------------------ evaluation
    def settings(self, row: str) -> dict[str, Any]:
        """What a row's evaluation depends on: a saved row is reused only under the same."""
        plan = self.plan
        agent = row not in REFERENCES
        return {"model": plan.model(row), "env": "RAG-HotpotQA-v0" if agent else row,
                "system_prompt": plan.system_prompt if agent else None, "data_path": str(plan.args.data_path),
                "held_out": [r.id for r in plan.held_out], "index": self.store_about.split(" (")[0],
                "search": self.search_label, "k": plan.args.k, "max_searches": plan.args.max_searches,
                "max_new_tokens": plan.run["max_new_tokens"]}

    def evaluate(self, row: str) -> dict[str, Any]:
        from lmgym.policies import HFPolicy

        plan = self.plan
        if row in REFERENCES:
            policy, env = HFPolicy(plan.model(row), system_prompt=""), self.reference_env(row)
        else:  # base gets the system prompt; the trained models carry it (saved with them)
            prompt = (plan.system_prompt or "") if row == "base" else None
            policy, env = HFPolicy(plan.model(row), system_prompt=prompt), self.rag_env(plan.held_out)
        means, episodes = evaluate_rag(policy, env, max_new_tokens=plan.run["max_new_tokens"],
                                       batch_prompts=plan.run["eval_batch"], seed=plan.args.seed)
        write_problem_records(plan.out / row / EVAL_FILE, "rag", episodes)  # <row>/eval.problems.jsonl
        return {"row": row, "title": title(row, plan), "model": plan.model(row), "questions": len(episodes),
                "metrics": means}


def title(row: str, plan: Plan) -> str:
    if row in REFERENCES:
        return "reference: " + REFERENCES[row].format(k=plan.args.k)
    if row.startswith("grpo_seed"):
        return f"SFT + GRPO, seed {row[len('grpo_seed'):]}"
    return {"base": "base", "sft": "SFT", "grpo_mean": f"SFT + GRPO, mean of {len(plan.seeds)} seeds"}[row]


def resuming(plan: Plan, stage: str) -> bool:
    """Continue an interrupted stage from its newest checkpoint (never under --restart: it starts over)."""
    return not plan.args.restart and has_checkpoints(plan.out / stage)


def mean_row(rows: list[dict], plan: Plan) -> dict:
    """The mean of the GRPO seeds' rows (each metric over the seeds that have it)."""
    metrics = {}
    for name in METRICS:
        values = [r["metrics"][name] for r in rows if r["metrics"].get(name) is not None]
        metrics[name] = sum(values) / len(values) if values else None
    return {"row": "grpo_mean", "title": title("grpo_mean", plan), "model": [r["model"] for r in rows],
            "questions": rows[0]["questions"], "metrics": metrics}


COLUMNS = (("MRR", "mrr", "{:.3f}"), ("recall@3", "recall@3", "{:.3f}"), ("recall, all searches", "recall", "{:.3f}"),
           ("EM", "em", "{:.1%}"), ("F1", "f1", "{:.1%}"), ("EM, untagged replies read", "em_reply", "{:.1%}"),
           ("F1, untagged replies read", "f1_reply", "{:.1%}"), ("searches/episode", "searches", "{:.2f}"),
           ("tokens/episode", "tokens", "{:.1f}"))


def markdown_table(rows: list[dict]) -> str:
    """The rows as a markdown table ("-": a retrieval column of a row that does not search)."""
    lines = ["| row | " + " | ".join(name for name, _, _ in COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
    for row in rows:
        values = row["metrics"]
        cells = ["-" if values.get(key) is None else form.format(values[key]) for _, key, form in COLUMNS]
        lines.append(f"| {row['title']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def run_stage(stages: Stages, stage: str) -> None:
    """Train the stage unless its model is saved (or --restart); evaluate its rows unless saved."""
    plan = stages.plan
    trainers = {"sft": [("sft", stages.train_sft)],
                "grpo": [(f"grpo_seed{s}", lambda s=s: stages.train_grpo(s)) for s in plan.seeds]}
    trained = set()
    for name, train in trainers.get(stage, []):
        if Path(plan.model(name)).is_dir() and not plan.args.restart:
            print(f"{name}: {plan.model(name)} exists, skipped (--restart retrains it)")
        else:
            train()
            trained.add(name)
            release_memory()
    rows = [name for name, _ in trainers[stage]] if stage in trainers else [stage]
    for row in rows:
        folder, settings = plan.out / row, stages.settings(row)
        if row not in trained and not plan.args.restart and load_row(folder, settings) is not None:
            print(f"{row}: evaluation saved in {folder / 'eval.json'}, reused")
            continue
        result = stages.evaluate(row)
        save_row(folder, result, settings)
        release_memory()
        shown = ", ".join(f"{key} {value:.3f}" for key, value in result["metrics"].items() if value is not None)
        print(f"{row}: {shown}")


def run(args: argparse.Namespace) -> None:
    preset = args.preset or ("gpu" if device_name() == "cuda" else "cpu")
    plan = Plan(args, preset)
    plan.check_inputs()
    stages = Stages(plan)
    print(f"preset={preset} model={args.model} stages={','.join(plan.stages)} output={plan.out}")
    print(f"questions: {len(plan.train_records)} trained on, {len(plan.held_out)} held out (the last of "
          f"{len(plan.records)}); index {stages.store_about}, search {stages.search_label}")
    for stage in STAGES:
        if stage in plan.stages:
            run_stage(stages, stage)
    saved = {row: load_row(plan.out / row, stages.settings(row)) for row in plan.rows()}
    rows = [saved[row] for row in plan.rows() if saved[row] is not None]
    seeds = [saved[f"grpo_seed{s}"] for s in plan.seeds if saved[f"grpo_seed{s}"] is not None]
    if seeds:
        at = max(i for i, r in enumerate(rows) if r["row"].startswith("grpo_seed")) + 1
        rows.insert(at, mean_row(seeds, plan))
    missing = [row for row in plan.rows() if saved[row] is None]
    table = markdown_table(rows)
    about = {**vars(args), **plan.run, "preset": preset, "index": stages.store_about, "search": stages.search_label,
             "train_questions": [r.id for r in plan.train_records], "held_out": [r.id for r in plan.held_out]}
    header = (f"Held-out questions: the last {len(plan.held_out)} of {args.data_path} (greedy, {args.k} passages a "
              f"search, at most {args.max_searches} searches, {plan.run['max_new_tokens']} tokens a turn)\n\n")
    plan.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(plan.out / "rag_agent.md", header + table)
    atomic_write_text(plan.out / "rag_agent.json", json.dumps({"about": about, "rows": rows}, indent=2) + "\n")
    print(table, end="")
    if missing:
        print(f"rows not evaluated under these settings: {', '.join(missing)} (add their stages to --stages)")
    print(f"table: {plan.out / 'rag_agent.md'} and {plan.out / 'rag_agent.json'}")


if __name__ == "__main__":
    main()
