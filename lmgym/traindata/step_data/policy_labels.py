"""Labels from the policy's own samples, batched on the episode engine: outcome labels and Monte-Carlo step
labels (Math-Shepherd, Wang et al., 2024), for training verifiers on the distribution they will judge.

Problems are labelled `batch_size` at a time. For a batch, the policy samples `samples_per_problem`
solutions per problem, step by step (all of them advance together: one engine.advance per round); each
solution's outcome label is the env's verdict on its final answer. With `rollouts` = k > 0, the branch
right after each step that leaves the episode live is saved (Branch.snapshot(): the prefix is never
played again) and k copies of it are played to the end; every copy of every prefix of every solution of
the batch advances together, one engine.advance per round. A step's soft label is the fraction of its k
completions that end correct, its hard label 1.0 when any does; a final step (or one at the env's step
limit) is labelled by its own verdict. An empty step (the policy stopped at end-of-sequence) has no text
to score and is left out with its labels (the step before it carries its own).

The budget is in tokens: every sampled token (solutions and rollouts; env-injected text excluded) is
counted, `token_budget` stops before a batch once it is reached, and the stats report the tokens with
the throughput (tokens/s of the whole labelling, env time included). The env's verdict is read on
purpose: this is training data, and the gold is known.
"""
from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch

from lmgym.core.checked_config import CheckedConfig, setting
from lmgym.episodes.engine import EpisodeEngine, SamplingSettings
from lmgym.policies.base import Policy
from lmgym.search.search_types import sampled_tokens
from lmgym.traindata.step_data.branch_play import PlayedBranch, ended_right, play_to_end, reset_question
from lmgym.traindata.step_data.labelled_samples import LabelledSample, PolicyLabels


@dataclass
class PolicyLabelConfig(CheckedConfig):
    """What is sampled and how it is labelled (see the module docstring)."""

    problems: int = setting(64, "problems labelled when no starts are given: reset option indices first_problem, "
                                "first_problem + 1, ...")
    first_problem: int = setting(0, "the first problem index when no starts are given, >= 0")
    samples_per_problem: int = setting(8, "N: solutions the policy samples per problem, each graded by the env")
    rollouts: int = setting(4, "k: completions from each step's prefix (0: outcome labels only)")
    max_new_tokens: int = setting(64, "tokens per step")
    temperature: float = setting(0.8, "sampling temperature of solutions and rollouts, > 0")
    batch_size: int = setting(16, "problems per batch: their solutions, then all rollouts of all their step "
                                  "prefixes, advance together")
    token_budget: int = setting(0, "stop before the next batch once this many tokens were sampled (0: no limit)")
    # on one H200, W4a: 1.06x in chunks of two batches, 1.10x in chunks of four (benchmarks/RESULTS.md, 25th session)
    overlap_batches: bool = setting(True, "play a batch's rollouts together with the next batch's solutions (one "
                                          "engine call, one tail, instead of two; the same labels with a "
                                          "sample_key)")
    kept_cache_share: float = setting(0.4, "share of the GPU's memory the fast decoder may keep in reusable KV "
                                           "buckets while labelling (nothing trains beside it), in [0, 1); 0: its "
                                           "usual sixteenth, which made most of W4a's buckets and graphs anew each "
                                           "batch (benchmarks/RESULTS.md, nineteenth session)")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("problems", "samples_per_problem", "max_new_tokens", "batch_size"):
            self.require(name, getattr(self, name) >= 1, "an int >= 1")
        for name in ("first_problem", "rollouts", "token_budget"):
            self.require(name, getattr(self, name) >= 0, "an int >= 0")
        self.require("temperature", self.temperature > 0, "> 0")
        self.require("kept_cache_share", 0 <= self.kept_cache_share < 1, "a share in [0, 1)")


# cpu: a smoke run of the tiny pipeline; gpu: the scale per Arithmetic-v0 level (2,000 problems of
# levels 2-4 -> about 667 a level) x 8 samples x k = 4 rollouts per step, 64 problems (512 solutions) a batch
LABEL_PRESETS: dict[str, dict] = {
    "cpu": dict(problems=8, samples_per_problem=4, rollouts=2, max_new_tokens=32, temperature=0.8, batch_size=8),
    "gpu": dict(problems=667, samples_per_problem=8, rollouts=4, max_new_tokens=64, temperature=0.8, batch_size=64),
}


@dataclass
class _Totals:
    solution_tokens: int = 0
    rollout_tokens: int = 0
    rollouts: int = 0
    rounds: int = 0

    @property
    def tokens(self) -> int:
        return self.solution_tokens + self.rollout_tokens


def policy_labels(policy: Policy, env, config: PolicyLabelConfig | None = None, starts: Sequence[dict] | None = None,
                  generator: torch.Generator | None = None, sample_key: int | None = None,
                  on_batch: Callable[[int, int, int, float], None] | None = None) -> PolicyLabels:
    """Sample and label solutions to the problems of `starts` (env.reset kwargs, e.g. {"options": {"index": 3}};
    None: `config.problems` problems from index `config.first_problem`). Noise as in EpisodeEngine.advance:
    keyed by `sample_key`, else drawn from `generator`. `on_batch(problems done, problems in all, tokens
    sampled, seconds)` is called after every batch (progress of a long labelling)."""
    config = config if config is not None else PolicyLabelConfig()
    if starts is None:
        starts = [{"options": {"index": config.first_problem + i}} for i in range(config.problems)]
    starts = list(starts)
    if not starts:
        raise ValueError("policy_labels: no problems to label (starts is empty)")
    engine = EpisodeEngine(env, policy, SamplingSettings(config.max_new_tokens, config.temperature))
    totals, samples, labelled, stopped = _Totals(), [], 0, False
    clock = time.perf_counter()
    decoder = getattr(policy, "fast_decoder", None)
    with (nullcontext() if decoder is None else decoder.keeping(decoder.device_bytes(config.kept_cache_share)),
          frozen_heap()):
        pending: _Batch | None = None  # a batch whose rollouts play with the next batch's solutions

        def complete(done: _Batch) -> None:  # its rollouts played: its samples, and progress
            nonlocal labelled
            samples.extend(done.finish(totals))
            labelled += len(done.starts)
            if on_batch is not None:
                on_batch(labelled, len(starts), totals.tokens, time.perf_counter() - clock)

        for first in range(0, len(starts), config.batch_size):
            if config.token_budget and totals.tokens >= config.token_budget:
                stopped = True
                break
            batch = _Batch(engine, env, starts[first:first + config.batch_size], first, config)
            carried = pending.rollout_branches() if pending is not None else []
            totals.rounds += play_to_end(engine, batch.solutions + carried, generator, sample_key, batch.keep_prefix)
            totals.solution_tokens += sum(sampled_tokens(p.branch) for p in batch.solutions)
            batch.make_rollouts()
            if pending is not None:
                complete(pending)
            pending = batch
            if not (config.overlap_batches and config.rollouts):  # without rollouts there is nothing to overlap
                totals.rounds += play_to_end(engine, batch.rollout_branches(), generator, sample_key)
                complete(batch)
                pending = None
        if pending is not None:
            totals.rounds += play_to_end(engine, pending.rollout_branches(), generator, sample_key)
            complete(pending)
    seconds = time.perf_counter() - clock
    return PolicyLabels(samples, _stats(samples, labelled, totals, seconds, engine.env_seconds, stopped))


# Objects in the permanent generation when this module was imported: the interpreter's own, unless something froze
# objects earlier. Python 3.12 starts with a few hundred there (375 on 3.12.1; none on 3.11 or 3.13): counting them as
# someone else's freeze made `frozen_heap` a no-op on the H200 hosts' Python 3.12, where W4a then paid three full
# collections of the whole heap in a 10.6 s chunk (benchmarks/RESULTS.md, twenty-fifth session).
INTERPRETER_FROZEN = gc.get_freeze_count()
# Inside `frozen_heap`: at least this many young (generation-1) collections between two full ones. With CPython's
# default, 10, a scripted labelling on a 2-core host made about two full collections a 64-problem batch with the
# heap frozen, each walking the labelling's own live objects (80-160 thousand) and finding no garbage.
FULL_COLLECTION_SPACING = 100


@contextmanager
def frozen_heap() -> Iterator[bool]:
    """Within the block, the cyclic garbage collector skips every object that exists when it starts, and full
    collections come at most once every FULL_COLLECTION_SPACING young ones; yields whether it froze the heap (not
    when the collector is off, or when something else froze objects: theirs; the interpreter's own frozen objects,
    INTERPRETER_FROZEN, do not count, and leave the permanent generation with the rest at the end, as CPython's own
    `gc.unfreeze()` tests have them do).

    Labelling makes many small objects (branches and their snapshots, token lists, env states) in a process
    that already holds millions (the model's modules, compiled graphs, the tokenizer, data), and each full
    collection walks all of them. `gc.freeze()` moves the objects tracked now into the permanent generation, which
    collections ignore; `gc.unfreeze()` puts them back into the oldest generation at the end, so nothing
    outlives the block on its account: garbage left among them goes at the next full collection after it.
    Measured (benchmarks/RESULTS.md, twenty-second session): on a 2-core host a scripted 64-problem batch spent
    7 s in collections instead of 41; on an H200 host W4a still paid one full collection a batch, 0.37-0.42 s
    against 0.47-0.59 s. In the scripted run they came inside the block: with the heap frozen the oldest
    generation holds only the labelling's own objects, so CPython's rule (a full collection once they grew by a
    quarter) fires every batch, and labelling leaves no cyclic garbage for it to find (0 objects collected after
    six batches). So the block also spaces full collections out (the threshold is put back after it): the same
    run of six 64-problem batches went from 11 full collections (0.8 s) to none. On leaving, one full collection
    runs with the heap still frozen (it walks the block's objects only): the young collections counted inside the
    block would otherwise make the first full collection after it walk the whole heap (0.44 s a W4a batch on an
    H200 host, after the spacing above)."""
    if not gc.isenabled() or gc.get_freeze_count() > INTERPRETER_FROZEN:
        yield False
        return
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(thresholds[0], thresholds[1], max(thresholds[2], FULL_COLLECTION_SPACING))
    try:
        yield True
    finally:
        gc.collect()  # the heap still frozen: it walks only the block's objects, and resets the full-collection count
        gc.set_threshold(*thresholds)
        gc.unfreeze()


class _Batch:
    """One batch of problems: its solutions (played first; each live step's prefix kept by `keep_prefix`), then
    k rollouts from every kept prefix, then its labelled samples (`finish`)."""

    def __init__(self, engine: EpisodeEngine, env, starts: list[dict], first_group: int, config: PolicyLabelConfig):
        self.engine, self.starts, self.config = engine, starts, config
        self.solutions = [PlayedBranch(b) for b in engine.start(starts, config.samples_per_problem, first_group)]
        self.questions = {p.branch.group_id: reset_question(env, p.branch) for p in self.solutions}
        self.owner = {id(p): index for index, p in enumerate(self.solutions)}
        self.prefixes: list[tuple[int, int, PlayedBranch]] = []  # (solution, step index, the branch after it)
        self.rollouts: list[tuple[int, int, PlayedBranch]] = []

    def keep_prefix(self, p: PlayedBranch) -> None:
        """After each step of one of this batch's solutions (others played beside them are not its): keep the
        branch right after it, when the episode goes on and rollouts are asked for."""
        if self.config.rollouts and id(p) in self.owner and self.engine.is_live(p.branch):
            self.prefixes.append((self.owner[id(p)], len(p.steps) - 1, p.copy(p.branch.member)))

    def make_rollouts(self) -> None:
        """k copies of every kept prefix, each with its own member (its sampling key)."""
        next_member = {group: self.config.samples_per_problem for group in self.questions}
        for solution, step, prefix in self.prefixes:
            group = prefix.branch.group_id
            for _ in range(self.config.rollouts):
                self.rollouts.append((solution, step, prefix.copy(next_member[group])))
                next_member[group] += 1

    def rollout_branches(self) -> list[PlayedBranch]:
        return [r for _, _, r in self.rollouts]

    def finish(self, totals: _Totals) -> list[LabelledSample]:
        """The batch's samples, its rollouts played: each step's soft and hard labels from its k rollouts."""
        prefix_tokens = {(s, j): sampled_tokens(p.branch) for s, j, p in self.prefixes}
        totals.rollout_tokens += sum(sampled_tokens(r.branch) - prefix_tokens[(s, j)] for s, j, r in self.rollouts)
        totals.rollouts += len(self.rollouts)
        outcomes: dict[tuple[int, int], list[bool]] = {}
        for solution, step, rollout in self.rollouts:
            outcomes.setdefault((solution, step), []).append(ended_right(rollout.branch))
        return [_sample(index, p, self.questions[p.branch.group_id], outcomes, self.config.rollouts > 0)
                for index, p in enumerate(self.solutions)]


def _sample(index: int, played: PlayedBranch, question: str, outcomes: dict, rolled: bool) -> LabelledSample:
    right = ended_right(played.branch)
    soft, hard = [], []
    for j in range(len(played.steps)):
        results = outcomes.get((index, j))
        soft.append(sum(results) / len(results) if results else float(right))
        hard.append(float(any(results)) if results else float(right))
    kept = [j for j, text in enumerate(played.steps) if text]
    outcome = played.branch.outcome
    return LabelledSample(question, outcome.problem_id, tuple(played.steps[j] for j in kept), right,
                          outcome.parsed_answer, tuple(soft[j] for j in kept) if rolled else (),
                          tuple(hard[j] for j in kept) if rolled else (), sampled_tokens(played.branch))


def _stats(samples: list[LabelledSample], problems: int, totals: _Totals, seconds: float, env_seconds: float,
           stopped: bool) -> dict[str, float | int | bool]:
    """The run's numbers: counts, tokens (solutions, rollouts, all), seconds, tokens/s, accuracy and pass@N."""
    by_problem: dict[str, bool] = {}
    for s in samples:
        key = s.problem_id or s.question
        by_problem[key] = by_problem.get(key, False) or s.correct
    return {"problems": problems, "samples": len(samples), "rollouts": totals.rollouts,
            "engine_rounds": totals.rounds, "solution_tokens": totals.solution_tokens,
            "rollout_tokens": totals.rollout_tokens, "sampled_tokens": totals.tokens,
            "seconds": seconds, "env_seconds": env_seconds,
            "tokens_per_second": totals.tokens / seconds if seconds > 0 else 0.0,
            "sample_accuracy": sum(s.correct for s in samples) / len(samples) if samples else 0.0,
            "pass_at_n": sum(by_problem.values()) / len(by_problem) if by_problem else 0.0,
            "stopped_by_budget": stopped}
