"""Monte Carlo tree search over reasoning steps on stepwise envs, every problem's tree searched together.

Each wave selects up to `wave_size` leaves in every tree (virtual loss spreads them), expands each by
`expand_k` candidate next steps (snapshots of the leaf's branch) sampled for all trees in ONE
`EpisodeEngine.advance` call, evaluates every new child in one scorer call (value = the scorer's score
of the child's last step) or by a rollout to the end (value = the env's reward; this reads the outcome,
so it is for training only), and backs the values up (mean backup). A selection that reaches a terminal
leaf (the env ended it, or a step or depth limit) backs its value up again, without sampling. Branches
carry their env state and token ids, so no prefix is ever played twice.

The answer is chosen without the env's verdict: by the most-visited path (finished greedily when its
leaf is not), by the best-valued finished leaf, or by a visit-weighted vote over finished leaves'
parsed answers. Every token sampled for a problem counts: each node's step, rollouts, greedy finishing.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from lmgym.core.checked_config import CheckedConfig, setting
from lmgym.episodes.engine import Branch, EpisodeEngine, SamplingSettings
from lmgym.search.mcts_tree import SELECTIONS, Node, add_virtual_loss, backup, select_leaf, walk
from lmgym.search.search_play import parsed_answer, result_of, step_scores
from lmgym.search.search_types import SearchResult, StepScorer, sampled_tokens

EVALUATIONS = ("prm", "rollout")
ANSWERS = ("visits", "value", "vote")


@dataclass
class MCTSConfig(CheckedConfig):
    """Settings of one tree search (per problem). Bad values are one-line ConfigErrors."""

    simulations: int = setting(32, "leaf evaluations per problem: each new child evaluated counts one, and so "
                                    "does each revisit of a terminal leaf")
    expand_k: int = setting(4, "candidate next steps sampled per expanded leaf")
    wave_size: int = setting(4, "leaves selected per tree per wave (virtual loss spreads them); one wave is one "
                                "sampling call for every tree")
    selection: str = setting("puct", "puct (prior: softmax of the candidates' mean token log-probs) | ucb1")
    exploration: float = setting(1.0, "c, the exploration weight of the selection rule (>= 0)")
    evaluation: str = setting("prm", "prm (the scorer's score of the new step) | rollout (play on to the end with "
                                     "the policy; value = the env's reward: it reads the outcome, training only)")
    max_depth: int | None = setting(None, "most steps below the root (None: the env's step limit)")
    max_tokens: int | None = setting(None, "sampled tokens per problem after which no wave starts (the wave under "
                                           "way finishes; None: no limit)")
    token_cap: str = setting("soft", "soft (max_tokens stops new waves) | hard (tokens are charged in the wave's "
                                     "order and the child that crosses max_tokens is cut there: its tokens up to "
                                     "the cap count, it and later children of the wave are dropped; the visits "
                                     "answer's greedy finishing is capped too; evaluation prm only)")
    answer: str = setting("visits", "visits (most-visited path, finished greedily) | value (best finished leaf) | "
                                    "vote (visit-weighted majority of finished leaves' answers)")
    temperature: float = setting(0.8, "sampling temperature of the candidate steps and rollouts (> 0)")
    max_new_tokens: int = setting(64, "generation cap per step")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("simulations", "expand_k", "wave_size", "max_new_tokens"):
            self.require(name, getattr(self, name) > 0, "a positive integer")
        for name in ("max_depth", "max_tokens"):
            self.require(name, getattr(self, name) is None or getattr(self, name) > 0, "a positive integer or None")
        self.require("selection", self.selection in SELECTIONS, f"one of {', '.join(SELECTIONS)}")
        self.require("evaluation", self.evaluation in EVALUATIONS, f"one of {', '.join(EVALUATIONS)}")
        self.require("answer", self.answer in ANSWERS, f"one of {', '.join(ANSWERS)}")
        self.require("exploration", self.exploration >= 0, ">= 0")
        self.require("token_cap", self.token_cap in ("soft", "hard"), "soft | hard")
        self.require("token_cap", self.token_cap == "soft" or self.evaluation == "prm",
                     "soft with evaluation 'rollout' (a rollout cannot be cut mid-way and still give a value)")
        self.require("temperature", self.temperature > 0, "> 0 (candidates must differ)")


@dataclass(eq=False)
class SearchTree:
    """One problem's tree and its spending: tokens sampled (nodes, rollouts, greedy finishing) and
    simulations (leaf evaluations) so far."""

    root: Node
    tokens: int = 0
    simulations: int = 0
    finish_tokens: int = 0  # of `tokens`: the greedy finishing of the visits answer
    _members: int = 0  # members handed to snapshots (each keys its own sampling noise)

    def next_member(self) -> int:
        self._members += 1
        return self._members

    def nodes(self) -> list[Node]:
        return list(walk(self.root))

    def finished_leaves(self) -> list[Node]:
        """Leaves whose episode the env ended, in tree order."""
        return [n for n in walk(self.root) if n.finished and not n.children]


@dataclass(eq=False)
class _Job:
    tree: SearchTree
    leaf: Node
    children: list[Node] = field(default_factory=list)


class MCTS:
    """Tree search with `policy` on `env` (stepwise), evaluating with `scorer` (a StepScorer; needed for
    evaluation "prm") or rollouts. `search(starts)` returns one SearchResult per start."""

    def __init__(self, policy, env, scorer: StepScorer | None = None, config: MCTSConfig | None = None):
        self.config = config if config is not None else MCTSConfig()
        if not isinstance(self.config, MCTSConfig):
            raise TypeError(f"MCTS takes an MCTSConfig, got a {type(self.config).__name__}")
        if self.config.evaluation == "prm" and scorer is None:
            raise ValueError("MCTS: evaluation 'prm' needs a scorer (a StepScorer such as a ProcessRewardModel); "
                             "pass scorer= or set evaluation='rollout'")
        if scorer is not None and not isinstance(scorer, StepScorer):
            raise TypeError(f"MCTS: scorer must have score_branches(branches); got a {type(scorer).__name__}")
        self.scorer = scorer
        c = self.config
        self.engine = EpisodeEngine(env, policy, SamplingSettings(c.max_new_tokens, c.temperature))
        self.greedy = EpisodeEngine(env, policy, SamplingSettings(c.max_new_tokens, 0.0))

    # ------------------------------------------------------------------ the search
    def search(self, starts: list[dict], generator: torch.Generator | None = None, sample_key: int | None = None,
               first_group_id: int = 0) -> list[SearchResult]:
        """Search every start's tree together and answer each (see the module docstring)."""
        return self.answer(self.grow(starts, generator, sample_key, first_group_id))

    def grow(self, starts: list[dict], generator: torch.Generator | None = None, sample_key: int | None = None,
             first_group_id: int = 0) -> list[SearchTree]:
        """One tree per start (kwargs for env.reset; group id first_group_id + its index), grown wave by
        wave until each has spent its simulations (or tokens, or cannot go on)."""
        roots = self.engine.start(starts, 1, first_group_id)
        trees = [SearchTree(Node(b, terminal=not self.engine.is_live(b))) for b in roots]
        while active := [t for t in trees if not self._spent(t)]:
            jobs = [job for tree in active for job in self._select(tree)]
            if jobs:
                self._expand(jobs, generator, sample_key)
        return trees

    def _spent(self, tree: SearchTree) -> bool:
        c = self.config
        return (tree.root.terminal or tree.simulations >= c.simulations
                or (c.max_tokens is not None and tree.tokens >= c.max_tokens))

    def _select(self, tree: SearchTree) -> list[_Job]:
        """Up to wave_size distinct leaves to expand (virtual loss on each); terminal leaves reached are
        backed up again on the spot. Never plans more evaluations than the simulations left."""
        c = self.config
        jobs: list[_Job] = []
        left = c.simulations - tree.simulations
        for _ in range(c.wave_size):
            if left <= 0:
                break
            leaf = select_leaf(tree.root, c.exploration, c.selection)
            if leaf.terminal:
                backup(leaf, leaf.score)
                tree.simulations += 1
                left -= 1
                continue
            if any(job.leaf is leaf for job in jobs):
                continue
            k = min(c.expand_k, left)
            add_virtual_loss(leaf)
            jobs.append(_Job(tree, leaf, [Node(self._child_branch(tree, leaf)) for _ in range(k)]))
            left -= k
        return jobs

    @staticmethod
    def _child_branch(tree: SearchTree, leaf: Node) -> Branch:
        branch = leaf.branch.snapshot()
        branch.member = tree.next_member()  # its own sampling key: siblings must not sample alike
        return branch

    def _expand(self, jobs: list[_Job], generator, sample_key) -> None:
        """Advance every job's children one step in one engine call, evaluate them all, back up."""
        children = [child for job in jobs for child in job.children]
        self.engine.advance([child.branch for child in children], generator, sample_key)
        hard = self.config.token_cap == "hard" and self.config.max_tokens is not None
        for job in jobs:
            kept = []
            for child in job.children:
                child.tokens = sampled_tokens(child.branch) - sampled_tokens(job.leaf.branch)
                if hard and job.tree.tokens + child.tokens > self.config.max_tokens:
                    job.tree.tokens = self.config.max_tokens  # cut at the cap: neither added nor evaluated
                    break
                if hard and job.tree.tokens >= self.config.max_tokens:
                    break  # sampled after the cap: not counted, not used
                job.leaf.add_child(child)
                job.tree.tokens += child.tokens
                child.terminal = not self.engine.is_live(child.branch) or (
                    self.config.max_depth is not None and child.depth >= self.config.max_depth)
                kept.append(child)
            job.children = kept
            if kept:
                _set_priors(job.leaf)
        values = self._evaluate([(job.tree, child) for job in jobs for child in job.children], generator, sample_key)
        position = 0
        for job in jobs:
            add_virtual_loss(job.leaf, -1)
            for child in job.children:
                child.score = values[position]
                position += 1
                backup(child, child.score)
                job.tree.simulations += 1

    def _evaluate(self, children: list[tuple[SearchTree, Node]], generator, sample_key) -> list[float]:
        """The value of each new child: its last step's score, or its rollout's reward (tokens counted)."""
        branches = [child.branch for _, child in children]
        if self.config.evaluation == "prm":
            return [scores[-1] for scores in step_scores(self.scorer, branches)]
        rollouts = [b.snapshot() if not b.done else b for b in branches]
        self.engine.play([r for r in rollouts if not r.done], generator, sample_key)
        for (tree, _), branch, rollout in zip(children, branches, rollouts):
            tree.tokens += sampled_tokens(rollout) - sampled_tokens(branch)
        return [float(sum(r.step_rewards)) for r in rollouts]

    # ------------------------------------------------------------------ the answer
    def answer(self, trees: Sequence[SearchTree]) -> list[SearchResult]:
        """Each tree's answer by `config.answer` (no env verdict read); unfinished visits answers are
        finished greedily, all in one batch."""
        chosen = [self._choose(tree) for tree in trees]
        branches = [node.branch if node.finished else node.branch.snapshot() for node in chosen]
        unfinished = [b for b, node in zip(branches, chosen) if not node.finished]
        self.greedy.play(unfinished)
        results = []
        hard = self.config.token_cap == "hard" and self.config.max_tokens is not None
        for tree, node, branch in zip(trees, chosen, branches):
            extra = sampled_tokens(branch) - sampled_tokens(node.branch)
            cut = hard and tree.tokens + extra > self.config.max_tokens
            if cut:  # the finishing crossed the cap: stopped there, unanswered
                extra = self.config.max_tokens - tree.tokens
            tree.tokens += extra
            tree.finish_tokens += extra
            nodes = tree.nodes()
            finished = tree.finished_leaves()
            details = {"simulations": tree.simulations, "nodes": len(nodes), "finished_leaves": len(finished),
                       "depth": max(n.depth for n in nodes), "finish_tokens": extra, "chosen_depth": node.depth,
                       # the env's verdict on each finished leaf, read only to report (was a right answer in
                       # the tree?); the choice above never reads it
                       "finished_right": sum(bool(n.branch.outcome.correct) for n in finished)}
            if cut:
                results.append(SearchResult(node.branch.to_trajectory(), None, False, tree.tokens,
                                            {**details, "cut": True}))
            else:
                results.append(result_of(branch, tree.tokens, details))
        return results

    def _choose(self, tree: SearchTree) -> Node:
        rule = self.config.answer
        finished = tree.finished_leaves()
        if rule == "value" and finished:
            return max(finished, key=lambda n: n.q)
        voters = [n for n in finished if parsed_answer(n.branch) is not None]
        if rule == "vote" and voters:
            weights: dict[str, int] = {}
            for n in voters:
                answer = parsed_answer(n.branch)
                weights[answer] = weights.get(answer, 0) + n.visits
            best = max(weights, key=weights.get)
            return max((n for n in voters if parsed_answer(n.branch) == best), key=lambda n: n.q)
        return most_visited_leaf(tree.root)


def most_visited_leaf(root: Node) -> Node:
    """Descend from `root` by the most-visited child (ties: the higher Q, then the first) to a leaf."""
    node = root
    while node.children:
        node = max(node.children, key=lambda n: (n.visits, n.q))
    return node


def _set_priors(node: Node) -> None:
    """PUCT priors of `node`'s children: softmax over siblings of each step's mean sampled-token log-prob."""
    start = len(node.branch.ids)
    means = []
    for child in node.children:
        lps = [lp for lp, m in zip(child.branch.logprobs[start:], child.branch.mask[start:]) if m]
        means.append(sum(lps) / len(lps) if lps else 0.0)
    top = max(means)
    weights = [math.exp(m - top) for m in means]
    for child, w in zip(node.children, weights):
        child.prior = w / sum(weights)
