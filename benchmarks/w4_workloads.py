"""The W4 workloads of benchmarks/w4_multistep.py, each run as chunks: a warm-up, the measured ones, a profiled one.

- W4a (`LabelWorkload`): `policy_labels` at LABEL_PRESETS["gpu"] (N = 8 samples, k = 4 rollouts from every
  step prefix, 64 tokens a step, T = 0.8) on stepwise Arithmetic-v0 level 3 train problems (at most
  examples/verifier_loop.py's 8 steps); a chunk is `batch` problems (one policy_labels batch).
- W4b (`RagWorkload`): GRPO iterations at examples/rag_agent.py's gpu preset (16 questions x 8 episodes, LoRA r
  16, checkpointing, 3 passages a search, at most 3 searches, 64 tokens a turn) from the base model with the
  agent's system prompt (no SFT first: a speed benchmark), over the training questions of --data_path, with
  the preset's index (BM25 + MiniLM embeddings; BM25 alone with a note when no embedder is installed); a
  chunk is one iteration.
- W4c (`ReflectionWorkload`): greedy reflection episodes at examples/reflection_dpo.py's gpu preset
  (Reflection-Arithmetic-v0 level 3 test problems, 5 actor answers with the critic between them, 64 tokens a
  turn, 64 problems a batch); a chunk is one batch.

Every chunk reports its generated tokens (the workload's own count) and its context tokens: for every action
the engine sampled, the tokens it was conditioned on (prompt and episode so far), counted around
`EpisodeEngine.advance` (`EngineCounter`), the same for any engine: one that reads a shared prefix once does
the same work in less time.
"""
from __future__ import annotations

import functools
import gc
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from w4_phases import GcPauses, NvmlBusy, RangeClock, named_range, profile_chunk, shares, synchronize


class EngineCounter:
    """Context and generated tokens of every action the engine steps, counted around `EpisodeEngine._settle` (one
    call per engine round, or per host sync of continuous play), or around `advance` in a tree without it."""

    def __init__(self) -> None:
        self.context = self.generated = self.advances = 0
        self.error: str | None = None

    def install(self) -> None:
        from lmgym.episodes.engine import EpisodeEngine

        name = "_settle" if hasattr(EpisodeEngine, "_settle") else "advance"
        original = getattr(EpisodeEngine, name)
        if getattr(original, "_w4_counter", None) is not None:
            original = original._w4_original
        counter = self

        @functools.wraps(original)
        def counted(engine, branches, *args, **kwargs):
            before = counter.before(engine, branches)
            result = original(engine, branches, *args, **kwargs)
            counter.after(before)
            return result

        counted._w4_counter, counted._w4_original = counter, original
        setattr(EpisodeEngine, name, counted)

    def before(self, engine, branches) -> list | None:
        if self.error is not None:
            return None
        try:
            live = [(b, len(b.ids)) for b in engine.live(branches)]
            self.context += sum(len(b.prompt_ids) + n for b, n in live)
            return live
        except Exception as err:  # noqa: BLE001 - an engine of another shape: stop counting, say so
            self.error = f"{type(err).__name__}: {err}"
            return None

    def after(self, live: list | None) -> None:
        self.advances += 1
        if live is None:
            return
        try:
            self.generated += sum(sum(b.mask[n:]) for b, n in live)
        except Exception as err:  # noqa: BLE001
            self.error = f"{type(err).__name__}: {err}"

    def snapshot(self) -> tuple[int, int, int]:
        return self.context, self.generated, self.advances


@dataclass
class Context:
    """What every workload shares: the device, model, seed, clocks and the harness's settings."""

    device: torch.device
    model: str
    seed: int
    measure_s: float
    profile: bool
    clock: RangeClock
    counter: EngineCounter
    save: Callable[[], None]
    log: Callable[[str], None] = print
    notes: list[str] = field(default_factory=list)
    deadline: float | None = None  # time.perf_counter() after which no chunk starts (but a workload's first)
    gc: GcPauses = field(default_factory=GcPauses)  # the garbage collector's pauses, per chunk

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.perf_counter() >= self.deadline


# ---------------------------------------------------------------------------------------------- the harness
def measure(work, ctx: Context, record: dict) -> None:
    """Run `work`'s warm-up, measured and profiled chunks, filling `record` as they finish (ctx.save() after
    each): measured chunks run in order until all ran or `ctx.measure_s` seconds of them did (or the run's
    deadline passed: the first always runs, the profiled one is then skipped)."""
    if ctx.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(ctx.device)
    record["settings"] = work.settings
    record.update(getattr(work, "extras", {}))
    for spec in work.warmup:
        record.setdefault("warmup", []).append(_chunk(work, spec, ctx, "warm-up"))
        ctx.save()
    record["chunks"], spent, before = [], 0.0, ctx.clock.snapshot()
    with NvmlBusy(ctx.device) as nvml:
        for spec in work.measured:
            if record["chunks"] and (spent >= ctx.measure_s or ctx.past_deadline()):
                why = "the time limit passed" if spent < ctx.measure_s else f">= --measure_s {ctx.measure_s:g}"
                ctx.log(f"[{work.name}] measured {spent:.0f} s, {why}: {len(record['chunks'])} of "
                        f"{len(work.measured)} chunks")
                break
            record["chunks"].append(_chunk(work, spec, ctx, "measured"))
            spent += record["chunks"][-1]["seconds"]
            ctx.save()
    plain = RangeClock.split(before, ctx.clock.snapshot(), spent)
    record["measured"] = summary(record["chunks"], work.unit, plain, nvml.share)
    record["quality"] = work.quality()
    if ctx.profile and work.profiled is not None and ctx.past_deadline():
        record["profile"] = {"error": "skipped: the time limit passed"}
    elif ctx.profile and work.profiled is not None:
        try:
            counted = ctx.counter.snapshot()
            chunk, report = profile_chunk(lambda: work.run(work.profiled), ctx.device)
            chunk["context_tokens"] = ctx.counter.snapshot()[0] - counted[0]
            report["chunk"] = {k: v for k, v in chunk.items() if k != "quality"}
            record["profile"] = report
        except Exception as err:  # noqa: BLE001 - the measured figures stand without it
            record["profile"] = {"error": f"{type(err).__name__}: {err}"}
        ctx.log(f"[{work.name}] profiled: " + (f"GPU busy {record['profile'].get('gpu_busy_share')}"
                                               if "error" not in record["profile"] else record["profile"]["error"]))
    record["peak_mem_gb"] = torch.cuda.max_memory_allocated(ctx.device) / 1e9 if ctx.device.type == "cuda" else None
    record["peak_reserved_gb"] = (torch.cuda.max_memory_reserved(ctx.device) / 1e9 if ctx.device.type == "cuda"
                                  else None)
    ctx.save()


def workload_policy(work):
    """The policy a workload samples with (its own, or its algorithm's); None without one."""
    return getattr(work, "policy", None) or getattr(getattr(work, "algo", None), "policy", None)


def decoder_stats(work) -> dict[str, int]:
    """The workload's fast decoder's counters (FastDecoder.stats: prefilled, shared and extended tokens, graph
    captures, buckets made, weight copies); empty without one, or for older code whose decoder keeps none."""
    decoder = getattr(workload_policy(work), "fast_decoder", None)
    return dict(getattr(decoder, "stats", {}))


def _chunk(work, spec, ctx: Context, kind: str) -> dict:
    context, generated, advances = ctx.counter.snapshot()
    synchronize(ctx.device)
    paused, decoded = ctx.gc.snapshot(), decoder_stats(work)
    with ctx.gc:
        start = time.perf_counter()
        result = work.run(spec)
        synchronize(ctx.device)
        seconds = time.perf_counter() - start
    after, now = ctx.counter.snapshot(), ctx.gc.snapshot()
    result.update(seconds=seconds, context_tokens=after[0] - context, engine_generated_tokens=after[1] - generated,
                  engine_advances=after[2] - advances,
                  gc={"seconds": now["seconds"] - paused["seconds"],
                      "full_seconds": now["full_seconds"] - paused["full_seconds"],
                      "collections": [b - a for a, b in zip(paused["collections"], now["collections"])],
                      "full": now["full"][len(paused["full"]):]},
                  decoder={name: value - decoded.get(name, 0) for name, value in decoder_stats(work).items()})
    buckets = result["decoder"]
    made = (f"; buckets made {buckets['buckets_made']}, evicted {buckets.get('buckets_evicted', '-')}, "
            f"transient {buckets.get('buckets_transient', '-')}" if "buckets_made" in buckets else "")
    if buckets.get("playing_row_steps"):  # continuous play's decode steps put to use: sampled tokens (first tokens
        # sampled from a prefill's logits included) over bucket rows x steps, and the rows playing or fed among them
        made += (f"; tokens / bucket rows x steps {result['generated_tokens'] / buckets['row_steps']:.0%} "
                 f"(rows playing {buckets['playing_row_steps'] / buckets['row_steps']:.0%}, fed "
                 f"{buckets['fed_tokens'] / buckets['row_steps']:.0%}; {buckets['row_steps']:,} row steps, "
                 f"{buckets.get('rows_joined', 0):,} rows joined)")
    ctx.log(f"[{work.name}] {kind} chunk {spec}: {seconds:.1f} s, {result['generated_tokens']:,} generated and "
            f"{result['context_tokens']:,} context tokens, {result['generated_tokens'] / max(seconds, 1e-9):,.0f} "
            f"generated tokens/s{made}")
    return result


def summary(chunks: list[dict], unit: str, plain: dict[str, float], nvml_share: float | None) -> dict:
    """The measured chunks' totals and rates, and the host-clock split of their wall time."""
    seconds = sum(c["seconds"] for c in chunks)
    generated = sum(c["generated_tokens"] for c in chunks)
    context = sum(c["context_tokens"] for c in chunks)
    episodes = sum(c["episodes"] for c in chunks)
    out = {"chunks": len(chunks), "seconds": seconds, "generated_tokens": generated, "context_tokens": context,
           "episodes": episodes, "generated_tok_per_s": generated / seconds if seconds else 0.0,
           "context_tok_per_s": context / seconds if seconds else 0.0,
           "s_per_1000_episodes": 1000 * seconds / episodes if episodes else None,
           "s_per_iteration": seconds / len(chunks) if unit == "iteration" and chunks else None,
           "phases_plain": shares(plain, seconds), "phases_plain_s": plain, "nvml_gpu_busy": nvml_share,
           "gc_s": sum(c["gc"]["seconds"] for c in chunks), "gc_full_s": sum(c["gc"]["full_seconds"] for c in chunks),
           "gc_full_collections": sum(c["gc"]["collections"][2] for c in chunks)}
    if unit == "problems":
        problems = sum(c["problems"] for c in chunks)
        out["problems"] = problems
        out["s_per_problem"] = seconds / problems if problems else None
        out["projected_2000_problems_min"] = 2000 * seconds / problems / 60 if problems else None
    return out


def release(*objects: Any) -> None:
    """Drop a finished workload's models and return the GPU's cached blocks."""
    del objects
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _spans(first: int, count: int, size: int) -> list[tuple[int, int]]:
    """(first index, problems) chunks of at most `size` covering [first, first + count)."""
    return [(s, min(size, first + count - s)) for s in range(first, first + count, size)]


# ---------------------------------------------------------------------------------------------- W4a
class LabelWorkload:
    """W4a: Monte-Carlo step labels (see the module docstring)."""

    name, unit = "w4a", "problems"

    def __init__(self, ctx: Context, problems: int, warmup: int, profiled: int, batch: int | None,
                 samples: int | None, rollouts: int | None, max_new_tokens: int | None, max_steps: int | None,
                 kept_cache_share: float | None = None, overrides: dict | None = None, chunk: int | None = None):
        from lmgym.envs import make
        from lmgym.envs.arithmetic import split_indices
        from lmgym.policies import HFPolicy
        from lmgym.traindata.step_data.policy_labels import LABEL_PRESETS

        preset = dict(LABEL_PRESETS["gpu"])
        for key, value in (("batch_size", batch), ("samples_per_problem", samples), ("rollouts", rollouts),
                           ("max_new_tokens", max_new_tokens), ("kept_cache_share", kept_cache_share)):
            if value is not None:
                preset[key] = value
        preset.pop("problems")
        self.preset, self.ctx, self.level = preset, ctx, 3
        self.overrides = dict(overrides or {})  # over each call's config only: a chunk stays `batch` problems
        steps = max_steps or _verifier_loop_max_steps()
        self.env = make("Arithmetic-v0", level=self.level, split="train", mode="stepwise", max_steps=steps)
        have = len(split_indices(self.level, "train"))
        if warmup + problems + profiled > have:
            raise ValueError(f"w4a: {warmup + problems + profiled} problems asked for, the train split of "
                             f"Arithmetic-v0 level {self.level} has {have}")
        self.policy = HFPolicy(ctx.model, device=ctx.device, fast_decode=True)
        # a chunk is one policy_labels call over its batches, as a labelling run makes one call over all of its
        # problems (kept buckets live across batches; overlap_batches joins them); None: a batch a call
        size = max(chunk or preset["batch_size"], preset["batch_size"])
        self.warmup = _spans(problems + profiled, warmup, size) if warmup else []
        self.measured = _spans(0, problems, size)
        self.profiled = (problems, min(profiled, size)) if profiled else None
        self.settings = {**preset, "level": self.level, "split": "train", "mode": "stepwise", "max_steps": steps,
                         "problems": problems, "warmup_problems": warmup, "profiled_problems": profiled,
                         "chunk_problems": size,
                         **({"call_overrides": self.overrides} if self.overrides else {})}
        self.stats: list[dict] = []

    def run(self, spec: tuple[int, int]) -> dict:
        from lmgym.traindata.step_data.policy_labels import PolicyLabelConfig, policy_labels

        first, count = spec
        config = PolicyLabelConfig(problems=count, first_problem=first, **{**self.preset, **self.overrides})
        stats = policy_labels(self.policy, self.env, config, sample_key=self.ctx.seed).stats
        self.stats.append(stats)
        return {"problems": count, "episodes": stats["samples"] + stats["rollouts"], "solutions": stats["samples"],
                "rollouts": stats["rollouts"], "engine_rounds": stats["engine_rounds"],
                "generated_tokens": stats["sampled_tokens"], "env_s": stats["env_seconds"],
                "quality": {"sample_accuracy": stats["sample_accuracy"], "pass_at_n": stats["pass_at_n"]}}

    def quality(self) -> dict:
        measured = self.stats[len(self.warmup):len(self.warmup) + len(self.measured)]
        samples = sum(s["samples"] for s in measured)
        return {"sample_accuracy": sum(s["sample_accuracy"] * s["samples"] for s in measured) / samples
                if samples else None, "problems": sum(s["problems"] for s in measured)}


def _verifier_loop_max_steps() -> int:
    """examples/verifier_loop.py's gpu steps per episode."""
    import verifier_loop

    return verifier_loop.SIZES["max_steps"][2]


# ---------------------------------------------------------------------------------------------- W4b
class RagWorkload:
    """W4b: GRPO iterations of the searching agent (see the module docstring)."""

    name, unit = "w4b", "iteration"

    def __init__(self, ctx: Context, data_path: str, iterations: int, questions: int | None, episodes: int | None,
                 max_new_tokens: int | None, dense: bool, overrides: dict | None = None):
        import rag_agent

        from lmgym.algorithms import GRPOConfig
        from lmgym.envs.hotpotqa.data import held_out_ranges, load_hotpotqa
        from lmgym.envs.hotpotqa.rag import RAGHotpotQAEnv, rag_reward_weights
        from lmgym.policies import HFPolicy, LoraSettings
        from lmgym.policies.few_shot import read_system_prompt

        preset, flags = rag_agent.PRESETS["gpu"], rag_agent.build_parser()
        self.ctx = ctx
        records = load_hotpotqa(data_path)
        hold_out = min(preset["run"]["hold_out"], max(len(records) // 2, 1))
        (_, stop), _ = held_out_ranges(len(records), hold_out)
        train = records[:stop]
        start = time.perf_counter()
        store, index = build_store(records, dense and bool(preset["run"]["dense"]), ctx)
        self.index_s = time.perf_counter() - start
        k, searches = flags.get_default("k"), flags.get_default("max_searches")
        env = RAGHotpotQAEnv(records=train, store=store, k=k, max_searches=searches, search_kwargs=None,
                             reward_weights=rag_reward_weights(store.embedder))
        lora = LoraSettings(r=flags.get_default("lora_r"), alpha=flags.get_default("lora_alpha"))
        system_prompt = read_system_prompt(flags.get_default("system_prompt_path"))
        policy = HFPolicy(ctx.model, lora=lora, system_prompt=system_prompt, device=ctx.device, fast_decode=True)
        grpo = dict(preset["grpo"], max_new_tokens=max_new_tokens or preset["run"]["max_new_tokens"],
                    **(overrides or {}))
        if questions is not None:
            grpo["prompts_per_iteration"] = questions
        if episodes is not None:
            grpo["samples_per_prompt"] = episodes
        self.folder = tempfile.TemporaryDirectory(prefix="w4b_")
        config = GRPOConfig(**{**grpo, "train_iterations": iterations + 2, "output_dir": self.folder.name,
                               "progress": False, "seed": ctx.seed})
        self.algo = bench_grpo_class()(policy, env, config)
        self.warmup, self.measured = [0], list(range(1, iterations + 1))
        self.profiled = iterations + 1
        self.settings = {**grpo, "k": k, "max_searches": searches, "lora_r": lora.r, "lora_alpha": lora.alpha,
                         "index": index, "questions": len(records),
                         "train_questions": len(train), "iterations": iterations, "start": "base model (no SFT)",
                         "overrides": overrides or {},
                         "torch_compile": self.algo.config.torch_compile}
        self.metrics: list[dict] = []
        self.extras = {"index_build_s": self.index_s}

    def run(self, spec: int) -> dict:
        metrics = self.algo.train_iteration()
        self.algo.iteration += 1
        self.metrics.append(metrics)
        trajectories = self.algo.w4_collected
        return {"iteration": spec, "episodes": len(trajectories),
                "generated_tokens": sum(t.num_generated_tokens for t in trajectories),
                "trainer_s": {k: metrics.get(k) for k in ("time_sample", "time_score", "time_prepare", "time_update")},
                "quality": {"reward_mean": metrics.get("reward_mean")}}

    def quality(self) -> dict:
        measured = self.metrics[1:1 + len(self.measured)]
        rewards = [m.get("reward_mean") for m in measured if m.get("reward_mean") is not None]
        return {"reward_mean": sum(rewards) / len(rewards) if rewards else None}


def build_store(records, dense: bool, ctx: Context):
    """(the store of every question's paragraphs, its description): BM25 + the offline MiniLM's embeddings
    when `dense` and an embedder is installed, else BM25 (with a printed note when dense was wanted)."""
    from lmgym.core.extras import MissingExtraError
    from lmgym.retrieval import (
        EMBEDDED_EMBEDDER,
        DocumentStore,
        EmbedderNotFoundError,
        StoreConfig,
        documents_from_hotpotqa,
        embedder_from_name,
    )

    documents = documents_from_hotpotqa(records)
    if dense:
        try:
            embedder = embedder_from_name(EMBEDDED_EMBEDDER, device=ctx.device.type)
            store = DocumentStore.build(documents, StoreConfig(dense=True), embedder=embedder, progress=False)
            return store, f"hybrid: BM25 + {embedder.name}"
        except (MissingExtraError, EmbedderNotFoundError) as err:
            note = f"note: no embedder ({' '.join(str(err).split())[:200]}); W4b's index is BM25 only"
            ctx.log(note)
            ctx.notes.append(note)
    return DocumentStore.build(documents, StoreConfig(dense=False), progress=False), "BM25"


@functools.cache
def bench_grpo_class():
    """GRPO keeping each iteration's trajectories, its reference pass and update inside w4.train ranges."""
    from lmgym.algorithms import GRPO

    class BenchGRPO(GRPO):
        def collect(self):
            self.w4_collected = super().collect()
            return self.w4_collected

        def prepare(self, trajectories):
            with named_range("w4.train"):
                return super().prepare(trajectories)

        def update(self, trajectories):
            with named_range("w4.train"):
                return super().update(trajectories)

    return BenchGRPO


# ---------------------------------------------------------------------------------------------- W4c
class ReflectionWorkload:
    """W4c: greedy reflection evaluation (see the module docstring)."""

    name, unit = "w4c", "episodes"

    def __init__(self, ctx: Context, problems: int, warmup: int, profiled: int, batch: int | None, turns: int | None,
                 max_new_tokens: int | None):
        import reflection_dpo

        from lmgym.envs import make
        from lmgym.policies import HFPolicy

        preset, flags = reflection_dpo.PRESETS["gpu"], reflection_dpo.build_parser()
        self.ctx, self.turns = ctx, turns or flags.get_default("turns")
        self.batch = batch or preset.get("batch_prompts") or flags.get_default("batch_prompts")  # older trees: a flag
        self.max_new_tokens = max_new_tokens or preset["max_new_tokens"]
        self.env = make("Reflection-Arithmetic-v0", max_turns=self.turns, level=preset["level"], split="test")
        have = self.env.num_problems
        if problems + warmup + profiled > have:
            raise ValueError(f"w4c: {problems + warmup + profiled} problems asked for, the test split has {have}")
        self.policy = HFPolicy(ctx.model, device=ctx.device, fast_decode=True)
        self.warmup = _spans(problems, warmup, self.batch) if warmup else []
        self.measured = _spans(0, problems, self.batch)
        self.profiled = (problems + warmup, min(profiled, self.batch)) if profiled else None
        self.settings = {"env": "Reflection-Arithmetic-v0", "level": preset["level"], "split": "test",
                         "turns": self.turns, "max_new_tokens": self.max_new_tokens, "temperature": 0.0,
                         "batch_prompts": self.batch, "problems": problems, "warmup_problems": warmup,
                         "profiled_problems": profiled}
        self.played: list = []

    def run(self, spec: tuple[int, int]) -> dict:
        from lmgym.evaluation.reflection_metrics import reflection_episodes

        first, count = spec
        played = reflection_episodes(self.policy, self.env, max_new_tokens=self.max_new_tokens, temperature=0.0,
                                     batch_prompts=self.batch, seed=self.ctx.seed,
                                     problems=list(range(first, first + count)))
        if spec in self.measured:
            self.played += played
        return {"problems": count, "episodes": len(played),
                "generated_tokens": sum(t.num_generated_tokens for t in played)}

    def quality(self) -> dict:
        from lmgym.evaluation.reflection_metrics import reflection_metrics

        if not self.played:
            return {}
        return reflection_metrics(self.played, self.turns)


# ---------------------------------------------------------------------------------------------- W1
def run_w1(w1_module, ctx: Context, gsm8k: str, steps: int, warmup: int, prompts: int | None, group: int | None,
           max_new: int | None) -> dict:
    """benchmarks/w1_benchmark.py's own side (`run_toolkit`), with --model as its model."""
    w1_module.EMBEDDED_MODEL = ctx.model  # build() reads the module's name
    with NvmlBusy(ctx.device) as nvml:
        start = time.perf_counter()
        report = w1_module.run_toolkit(gsm8k, steps, warmup, 32, ctx.device.type == "cuda",
                                       prompts=prompts or w1_module.PROMPTS, group=group or w1_module.GROUP,
                                       max_new=max_new or w1_module.MAX_NEW)
        report["seconds"] = time.perf_counter() - start
    report["nvml_gpu_busy"] = nvml.share
    return report


def module_from(path: Path, name: str):
    """Import the file at `path` as module `name`."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
