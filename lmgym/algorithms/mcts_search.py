"""MCTSSearch: collect by tree search, train on step-level advantages from the tree's Q-values.

Each iteration grows one MCTS tree per problem (search/mcts.py; all trees together), evaluated by
rollouts to the end with the env's reward (default) or by a process reward model (`prm=`). The
trajectories are root-to-finished-leaf paths (the most visited first, at most `samples_per_prompt` per
problem; group id = the problem; a tree with no finished leaf gives its most-visited path); each step's
tokens get the advantage Q(node) - Q(parent), the mean backed-up values of the step's node and of the
node it was taken from, as they are or scaled over the iteration's batch (`advantage_scaling`: none by
default; rms divides them by their root mean square, whiten is PPO's), and the loss is GRPO's clipped
policy loss. Sibling steps whose Q differ by at least `pair_margin` become `StepPair`s for the PRM
(`self.step_pairs`, the latest iteration's); with `prm_updates > 0` the PRM takes that many Bradley-Terry
steps on them each iteration, so the policy and the PRM improve together.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import torch

from lmgym.algorithms.advantages import rms_scale, whiten
from lmgym.algorithms.base import RLAlgorithm
from lmgym.algorithms.config import RLConfig
from lmgym.algorithms.losses import clipped_ratio_loss
from lmgym.algorithms.prm.trainer import bradley_terry_loss
from lmgym.buffers import TokenField, Trajectory
from lmgym.buffers.step_pairs import StepPair
from lmgym.policies.decoding.generation import row_key
from lmgym.policies.prompting import pad_id
from lmgym.search.mcts import MCTS, MCTSConfig, SearchTree, most_visited_leaf
from lmgym.search.mcts_tree import Node, walk
from lmgym.training import distributed as dist
from lmgym.training.config import ConfigError, setting

ADVANTAGE_SCALINGS = {"rms": rms_scale, "whiten": whiten, "none": lambda values, mask: values * mask}
STEP_ADVANTAGES = TokenField("step_advantages", "Q(node) - Q(parent) of the tree step each token belongs to "
                                                "(0 after the last step)")


@dataclass
class MCTSSearchConfig(RLConfig):
    """MCTSSearch settings: the tree search (`mcts`, an MCTSConfig: `mcts: {simulations: 24}` in YAML,
    `--mcts.simulations 24` as a flag), the clipped loss and the PRM's share. The search samples at this
    config's `temperature` with its `max_new_tokens` per step (`passed_down`)."""

    passed_down = {"mcts": ("temperature", "max_new_tokens")}

    samples_per_prompt: int = setting(8, "most root-to-finished-leaf paths trained on per problem (the most "
                                         "visited first)")
    temperature: float = setting(0.8, "sampling temperature of the search's candidate steps and rollouts (> 0)")
    mcts: MCTSConfig = setting(MCTSConfig(evaluation="rollout"), "the tree search (evaluation rollout by default: "
                                                                 "prm needs prm=); it samples at temperature and "
                                                                 "max_new_tokens")
    # none: the raw Q differences (PRM-value sized: a tenth of GRPO's step); rms: divided by their root mean square
    # over the batch's trained tokens (signs and ratios kept); whiten: PPO's (minus the mean, over the std). Measured
    # on an H200 (RESULTS.md, 31st session), PRM values, level 2 after SFT, 5 seeds: none held the start (29.8% ->
    # 30.0%), rms moved ten times GRPO's KL and lost (-> 26.2%); none stays the default
    advantage_scaling: str = setting("none", "step advantages over the batch: none (raw Q differences) | rms (sign "
                                             "kept) | whiten")
    clip_low: float = setting(0.2, "ratio lower bound is 1 - clip_low")
    clip_high: float = setting(0.2, "ratio upper bound is 1 + clip_high")
    pair_margin: float = setting(0.25, "sibling steps whose Q differ by at least this become PRM pairs (> 0)")
    prm_updates: int = setting(0, "Bradley-Terry steps the PRM takes per iteration on the new pairs (needs prm=; "
                                  "0: the PRM stays as it is)")
    prm_pairs_per_update: int = setting(16, "pairs per PRM step, drawn from the iteration's pairs")
    prm_learning_rate: float = setting(1e-5, "AdamW step size of the PRM updates")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("temperature", self.temperature > 0, "> 0 (a tree search needs differing candidates)")
        self.require("advantage_scaling", self.advantage_scaling in ADVANTAGE_SCALINGS,
                     f"one of {', '.join(ADVANTAGE_SCALINGS)}")
        self.require("clip_low", 0 <= self.clip_low < 1, "in [0, 1)")
        self.require("clip_high", self.clip_high >= 0, ">= 0")
        self.require("pair_margin", self.pair_margin > 0, "> 0")
        self.require("prm_updates", self.prm_updates >= 0, "an integer >= 0")
        self.require("prm_pairs_per_update", self.prm_pairs_per_update > 0, "a positive integer")
        self.require("prm_learning_rate", self.prm_learning_rate > 0, "> 0")

    def mcts_config(self) -> MCTSConfig:
        """`mcts` sampling at this config's temperature and max_new_tokens: the MCTSConfig the search runs."""
        return dataclasses.replace(self.mcts, temperature=self.temperature, max_new_tokens=self.max_new_tokens)


class MCTSSearch(RLAlgorithm):
    """Tree-search collection with step-level advantages (see the module docstring). `prm`: a process reward
    model (policies.ProcessRewardModel) for evaluation "prm" and/or the pair updates."""

    config_class = MCTSSearchConfig
    token_fields = (STEP_ADVANTAGES,)

    def __init__(self, policy, env=None, config: MCTSSearchConfig | None = None, ref_policy=None, buffer=None,
                 eval_env=None, prm=None, callbacks=None, **data: Any):
        config = self.checked_config(config)
        if prm is None and config.mcts.evaluation == "prm":
            raise ConfigError.of_field(type(config).__name__, "mcts.evaluation", "is 'prm', but no PRM is given: "
                                       "pass prm= or use 'rollout'")
        if prm is None and config.prm_updates > 0:
            raise ConfigError(f"MCTSSearchConfig.prm_updates is {config.prm_updates}, but no PRM is given: pass prm= "
                              f"or set it to 0", "prm_updates")
        if config.prm_updates > 0 and dist.world_size() > 1:
            raise ConfigError("MCTSSearchConfig.prm_updates needs a single process for now: each rank would train "
                              "its own PRM on its own pairs", "prm_updates")
        super().__init__(policy, env, config, ref_policy, buffer, eval_env, prm=prm, callbacks=callbacks, **data)
        self.step_pairs: list[StepPair] = []
        self.prm_optimizer = (torch.optim.AdamW(prm.parameters(), lr=config.prm_learning_rate)
                              if config.prm_updates > 0 else None)
        if config.gradient_checkpointing and self.prm_optimizer is not None:
            self.prm.enable_gradient_checkpointing()  # trained here too (the Trainer's set-up ran before self.prm)

    # ------------------------------------------------------------------ collection
    def collect(self) -> list[Trajectory]:
        """This rank's share of the problems (as RLAlgorithm.collect draws them), searched together; the
        trees' paths to finished leaves, with their step advantages."""
        c = self.config
        share, total = self.prompts_per_rank, c.prompts_per_iteration
        seeds = self.rng.integers(0, 2**31 - 1, total)[dist.rank() * share:(dist.rank() + 1) * share]
        starts = [{"seed": int(s)} for s in seeds]
        mcts = MCTS(self.policy, self.env, self.prm if c.mcts.evaluation == "prm" else None, c.mcts_config())
        clock = time.perf_counter()
        trees = mcts.grow(starts, sample_key=row_key(c.seed, self.iteration),
                          first_group_id=self.iteration * total + dist.rank() * share)
        seconds = time.perf_counter() - clock
        self._times["score"] = self._times.get("score", 0.0) + mcts.engine.env_seconds
        trajectories = []
        for tree in trees:
            for leaf in tree_paths(tree, c.samples_per_prompt):
                trajectory = leaf.branch.to_trajectory()
                STEP_ADVANTAGES.set(trajectory, step_advantages(leaf, len(trajectory.completion_ids)))
                trajectories.append(trajectory)
        questions = [self.env.reset(**start)[0] for start in starts]  # the reset observation, verbatim
        self.step_pairs = [p for tree, q in zip(trees, questions) for p in sibling_pairs(tree, q, c.pair_margin)]
        tokens = sum(t.tokens for t in trees)
        self.record("search_tokens", tokens)
        self.record("search_tokens_per_second", tokens / max(seconds - mcts.engine.env_seconds, 1e-9))
        self.record("tree_nodes", sum(len(t.nodes()) for t in trees) / len(trees))
        self.record("finished_leaves", sum(len(t.finished_leaves()) for t in trees) / len(trees))
        self.record("step_pairs", len(self.step_pairs))
        return trajectories

    # ------------------------------------------------------------------ advantages and loss
    def advantages(self, batch):
        """The step advantages of the trained tokens, scaled as `advantage_scaling` says; their root mean square
        before scaling is recorded (`step_advantage_rms`)."""
        mask = batch.loss_mask
        raw = batch[STEP_ADVANTAGES] * mask
        self.record("step_advantage_rms", ((raw * raw).sum() / mask.sum().clamp(min=1.0)).sqrt())
        return ADVANTAGE_SCALINGS[self.config.advantage_scaling](raw, mask)

    def loss(self, batch, logprobs, entropy):
        c = self.config
        return clipped_ratio_loss(batch, logprobs, c.clip_low, c.clip_high, self.record)  # GRPO's

    # ------------------------------------------------------------------ the PRM's share
    def train_iteration(self) -> dict:
        """RLAlgorithm's iteration, then `prm_updates` Bradley-Terry steps of the PRM on the new pairs."""
        metrics = super().train_iteration()
        if self.prm_optimizer is not None and self.step_pairs:
            metrics.update(self.update_prm(self.step_pairs))
        return metrics

    def update_prm(self, pairs: list[StepPair]) -> dict[str, float]:
        """`prm_updates` AdamW steps of the Bradley-Terry loss on draws of `prm_pairs_per_update` pairs;
        returns the mean loss and the pairwise accuracy before each step."""
        c, prm = self.config, self.prm
        losses, accuracies = [], []
        prm.train()
        for _ in range(c.prm_updates):
            chosen = self.local_rng.choice(len(pairs), size=min(c.prm_pairs_per_update, len(pairs)), replace=False)
            drawn = [pairs[i] for i in chosen]
            good = last_step_logits(prm, [(p.question, p.prefix + (p.chosen,)) for p in drawn])
            bad = last_step_logits(prm, [(p.question, p.prefix + (p.rejected,)) for p in drawn])
            loss = bradley_terry_loss(good, bad)
            self.prm_optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if c.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(list(prm.parameters()), c.max_grad_norm)
            self.prm_optimizer.step()
            losses.append(float(loss.detach()))
            accuracies.append(float((good > bad).float().mean()))
        prm.eval()
        return {"prm_bt_loss": sum(losses) / len(losses), "prm_pair_accuracy": sum(accuracies) / len(accuracies)}

    # ------------------------------------------------------------------ checkpoints
    def extra_state(self) -> dict:
        if self.prm_optimizer is None:
            return {}
        return {"prm": self.prm.state_dict(), "prm_optimizer": self.prm_optimizer.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        if self.prm_optimizer is not None and "prm" in state:
            self.prm.load_state_dict(state["prm"])
            self.prm_optimizer.load_state_dict(state["prm_optimizer"])


def tree_paths(tree: SearchTree, limit: int) -> list[Node]:
    """Up to `limit` finished leaves of `tree`, the most visited first (ties: tree order); a tree without
    one gives its most-visited path (an unfinished episode), a tree never expanded nothing."""
    finished = sorted(tree.finished_leaves(), key=lambda n: -n.visits)[:limit]
    if finished or not tree.root.children:
        return finished
    return [most_visited_leaf(tree.root)]


def step_advantages(leaf: Node, tokens: int) -> list[float]:
    """Per completion token of `leaf`'s episode: Q(node) - Q(parent) of the step (node on the path) it
    belongs to; a step's tokens run from just after the previous step's last token (so text the env wrote
    between steps, never trained on, goes with the next step) to its own last token; 0.0 after the last."""
    path, ends = leaf.path(), leaf.branch.step_ends
    if len(path) - 1 != len(ends):
        raise ValueError(f"step_advantages: the path has {len(path) - 1} steps but the branch {len(ends)}")
    values, start = [0.0] * tokens, 0
    for parent, node, end in zip(path, path[1:], ends):
        values[start:end + 1] = [node.q - parent.q] * (end + 1 - start)
        start = end + 1
    return values


def step_text(node: Node) -> str:
    """The text `node`'s step added to its parent's episode (the action and what the env wrote after it)."""
    return node.branch.text[len(node.parent.branch.text):]


def sibling_pairs(tree: SearchTree, question: str, margin: float) -> list[StepPair]:
    """A StepPair for every two sibling steps of different text whose Q differ by at least `margin` (the
    higher one chosen; the pair's margin is the difference); source "mcts". A step without text (the
    policy's end-of-sequence token alone) is in no pair: a PRM has nothing to read there."""
    pairs = []
    problem_id = tree.root.branch.outcome.problem_id
    for node in walk(tree.root):
        if len(node.children) < 2:
            continue
        prefix = tuple(step_text(n) for n in node.path()[1:])
        for i, a in enumerate(node.children):
            for b in node.children[i + 1:]:
                better, worse = (a, b) if a.q >= b.q else (b, a)
                texts = step_text(a), step_text(b)
                if better.q - worse.q >= margin and texts[0] != texts[1] and all(texts):
                    pairs.append(StepPair(question, prefix, step_text(better), step_text(worse),
                                          margin=better.q - worse.q, source="mcts", problem_id=problem_id))
    return pairs


def last_step_logits(prm, items: list[tuple[str, tuple[str, ...]]]) -> torch.Tensor:
    """The PRM's logit [N] at the last step of each (question, steps), with gradients, in one right-padded
    batch (contract: prm.encode_steps and prm.step_logits)."""
    encoded = [prm.encode_steps(question, steps) for question, steps in items]
    pad = pad_id(prm.tokenizer)
    width = max(len(ids) for ids, _ in encoded)
    ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in encoded], device=prm.device)
    mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in encoded], device=prm.device)
    positions = torch.tensor([[positions[-1]] for _, positions in encoded], device=prm.device)
    return prm.step_logits(ids, mask, positions)[:, 0]
