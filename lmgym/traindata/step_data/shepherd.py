"""Math-Shepherd-style step labels from the policy itself (Wang et al., 2024), for PRM training data.

For each problem the policy samples `solutions_per_problem` solutions step by step. After each step that
does not end the episode, `rollouts` copies of the branch (Branch.snapshot(): the prefix is never played
again) are played to the end; the step's label is the fraction of them whose answer the env grades
correct (a final step's label is its own verdict). Every prefix of every solution is rolled out in one
batch: all rollouts of all problems advance together, one engine.advance per step.

From the labels:
- a RatedSteps per solution (source "shepherd");
- "shepherd" pairs: sibling steps of the solutions under the same prefix (the same steps before them)
  whose labels differ by at least `margin` (margin of the pair: the difference);
- "policy_sibling" pairs: the sampled next steps under one prefix (the solutions' own steps and each
  rollout's first step), a step whose own continuation reached the right answer against one whose
  continuation reached a wrong answer (a text seen with both outcomes is left out; a pair already made
  as a "shepherd" pair is not repeated).
An empty step (the policy stopped at its end-of-sequence token, which ends a math env's episode) has no
text to score: it is left out of the RatedSteps and of the pairs (the step before it carries its label).
The env's verdict is read here on purpose: this is training data, and the gold is known.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lmgym.buffers.step_pairs import RatedSteps, StepPair
from lmgym.core.checked_config import CheckedConfig, setting
from lmgym.episodes.engine import EpisodeEngine, SamplingSettings
from lmgym.policies.base import Policy
from lmgym.search.search_types import sampled_tokens
from lmgym.traindata.step_data.branch_play import PlayedBranch, ended_right, play_to_end, reset_question


@dataclass
class ShepherdConfig(CheckedConfig):
    """How the policy's solutions are sampled and labelled."""

    solutions_per_problem: int = setting(4, "policy-sampled solutions per problem whose steps are labelled")
    rollouts: int = setting(4, "k: rollouts from each step's prefix; the step's label is the fraction reaching "
                               "the gold answer")
    margin: float = setting(0.5, "sibling steps whose labels differ by at least this become a pair, in (0, 1]")
    policy_siblings: bool = setting(True, "also pair sampled sibling steps whose continuation was right against "
                                          "ones whose continuation was wrong")
    max_new_tokens: int = setting(64, "tokens per step")
    temperature: float = setting(0.8, "sampling temperature of solutions and rollouts, > 0")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("solutions_per_problem", "rollouts", "max_new_tokens"):
            self.require(name, getattr(self, name) >= 1, "an int >= 1")
        self.require("margin", 0 < self.margin <= 1, "in (0, 1]")
        self.require("temperature", self.temperature > 0, "> 0")


@dataclass
class ShepherdData:
    """What `shepherd_data` built, and the tokens the policy sampled for it."""

    pairs: list[StepPair]
    rated: list[RatedSteps]
    tokens: int = 0

    @property
    def items(self) -> list[StepPair | RatedSteps]:
        return [*self.pairs, *self.rated]


def shepherd_data(policy: Policy, env, starts: Sequence[dict], config: ShepherdConfig | None = None,
                  generator: torch.Generator | None = None, sample_key: int | None = None) -> ShepherdData:
    """Label the steps of the policy's solutions to the problems of `starts` (env.reset kwargs, e.g.
    {"options": {"index": 3}}) by rollouts, and build the pairs (see the module docstring)."""
    config = config if config is not None else ShepherdConfig()
    engine = EpisodeEngine(env, policy, SamplingSettings(config.max_new_tokens, config.temperature))
    solutions = [PlayedBranch(b) for b in engine.start(starts, config.solutions_per_problem)]
    questions = {p.branch.group_id: reset_question(env, p.branch) for p in solutions}
    prefixes: list[tuple[int, int, PlayedBranch]] = []  # (solution, step index, the branch right after that step)
    owner = {id(p): index for index, p in enumerate(solutions)}
    play_to_end(engine, solutions, generator, sample_key,
          lambda p: prefixes.append((owner[id(p)], len(p.steps) - 1, p.copy(p.branch.member))))

    next_member = {group: config.solutions_per_problem for group in questions}
    rollouts: list[tuple[int, int, PlayedBranch]] = []
    tokens = sum(sampled_tokens(p.branch) for p in solutions)
    for solution, step, prefix in prefixes:
        if engine.is_live(prefix.branch):
            tokens -= config.rollouts * sampled_tokens(prefix.branch)  # the rollouts' own tokens are counted below
            for _ in range(config.rollouts):
                group = prefix.branch.group_id
                rollouts.append((solution, step, prefix.copy(next_member[group])))
                next_member[group] += 1
    play_to_end(engine, [r for _, _, r in rollouts], generator, sample_key)
    tokens += sum(sampled_tokens(r.branch) for _, _, r in rollouts)

    outcomes: dict[tuple[int, int], list[bool]] = {}
    for solution, step, rollout in rollouts:
        outcomes.setdefault((solution, step), []).append(ended_right(rollout.branch))
    rated, labels_at, results_at = [], {}, {}
    for index, p in enumerate(solutions):
        labels = [sum(outcomes[(index, j)]) / len(outcomes[(index, j)]) if (index, j) in outcomes
                  else float(ended_right(p.branch)) for j in range(len(p.steps))]
        kept = [(text, label) for text, label in zip(p.steps, labels) if text]
        rated.append(RatedSteps(questions[p.branch.group_id], tuple(t for t, _ in kept),
                                tuple(label for _, label in kept), "shepherd", p.branch.outcome.problem_id))
        for j, (text, label) in enumerate(zip(p.steps, labels)):
            if not text:
                continue
            key = (p.branch.group_id, tuple(p.steps[:j]))
            labels_at.setdefault(key, {}).setdefault(text, []).append(label)
            results_at.setdefault(key, {}).setdefault(text, []).append(ended_right(p.branch))
    for solution, step, rollout in rollouts:
        prefix_steps = solutions[solution].steps[:step + 1]
        key = (rollout.branch.group_id, tuple(prefix_steps))
        first = rollout.steps[len(prefix_steps)] if len(rollout.steps) > len(prefix_steps) else ""
        if first:
            results_at.setdefault(key, {}).setdefault(first, []).append(ended_right(rollout.branch))

    problem_ids = {p.branch.group_id: p.branch.outcome.problem_id for p in solutions}
    pairs = _label_pairs(labels_at, config.margin, questions, problem_ids)
    if config.policy_siblings:
        made = {(p.prefix, p.chosen, p.rejected) for p in pairs}
        pairs += [p for p in _outcome_pairs(results_at, questions, problem_ids)
                  if (p.prefix, p.chosen, p.rejected) not in made]
    return ShepherdData(pairs, rated, tokens)


def _label_pairs(labels_at: dict, margin: float, questions: dict, problem_ids: dict) -> list[StepPair]:
    pairs = []
    for (group, prefix), texts in labels_at.items():
        means = {text: sum(values) / len(values) for text, values in texts.items()}
        for (a, label_a), (b, label_b) in itertools.combinations(means.items(), 2):
            if abs(label_a - label_b) >= margin - 1e-9:
                (better, high), (worse, low) = sorted([(a, label_a), (b, label_b)], key=lambda t: -t[1])
                pairs.append(StepPair(questions[group], prefix, better, worse, high - low, "shepherd",
                                      problem_ids[group]))
    return pairs


def _outcome_pairs(results_at: dict, questions: dict, problem_ids: dict) -> list[StepPair]:
    pairs = []
    for (group, prefix), texts in results_at.items():
        right = [text for text, results in texts.items() if all(results)]
        wrong = [text for text, results in texts.items() if not any(results)]
        pairs += [StepPair(questions[group], prefix, good, bad, 1.0, "policy_sibling", problem_ids[group])
                  for good in right for bad in wrong]
    return pairs
