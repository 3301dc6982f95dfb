"""`PRMTrainer`: trains a `ProcessRewardModel` on step preferences (Bradley-Terry) and, optionally, on
rated steps (pointwise BCE), as a `Trainer`: same run folder, logging, checkpoints and resume. Its two
losses (`bradley_terry_loss`, `pointwise_loss`) are here too.

Each iteration is one optimizer step over `pairs_per_iteration` items drawn in a seeded order that
cycles through epochs (epoch e's order is a permutation seeded by (seed, e), so a resumed run draws
exactly what an uninterrupted one would). A pair is scored at its chosen and rejected step's last
token, each under the same question and prefix; a rated solution at every rated step.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from lmgym.buffers.step_pairs import RatedSteps, StepPair
from lmgym.evaluation.verifier_metrics import expected_calibration_error, roc_auc
from lmgym.training import distributed as dist
from lmgym.training.config import TrainerConfig, setting
from lmgym.training.token_batches import EpochDraws, same_count_on_every_rank, token_micro_batches
from lmgym.training.trainer import Trainer


def bradley_terry_loss(chosen_logits: torch.Tensor, rejected_logits: torch.Tensor,
                       margin: torch.Tensor | float | None = None) -> torch.Tensor:
    """Mean over pairs of -log sigmoid(chosen - rejected [- margin]): the negative log-likelihood that each
    chosen step beats its rejected sibling (Bradley-Terry), computed in float32. No pairs is a ValueError."""
    if chosen_logits.shape != rejected_logits.shape:
        raise ValueError(f"bradley_terry_loss: chosen {tuple(chosen_logits.shape)} and rejected "
                         f"{tuple(rejected_logits.shape)} logits differ in shape")
    if chosen_logits.numel() == 0:
        raise ValueError("bradley_terry_loss: no pairs")
    difference = chosen_logits.float() - rejected_logits.float()
    if margin is not None:
        difference = difference - margin
    return -F.logsigmoid(difference).mean()


def pointwise_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy with logits (labels in [0, 1], soft labels allowed), averaged over the entries
    where `mask` is set (the rated steps), in float32. No rated entry is a ValueError."""
    if not (logits.shape == labels.shape == mask.shape):
        raise ValueError(f"pointwise_loss: logits {tuple(logits.shape)}, labels {tuple(labels.shape)} and mask "
                         f"{tuple(mask.shape)} differ in shape")
    rated = mask.bool()
    if not bool(rated.any()):
        raise ValueError("pointwise_loss: no rated steps")
    return F.binary_cross_entropy_with_logits(logits[rated].float(), labels[rated].float())


@dataclass
class PRMConfig(TrainerConfig):
    """Settings of `PRMTrainer`, on top of `TrainerConfig` (micro_batch_size counts items: a pair is two
    sequences). The held-out slice is chosen outside (buffers.split_by_problem) and passed as `held_out`."""

    pairs_per_iteration: int = setting(32, "items (step pairs, rated solutions) per iteration: one optimizer step "
                                           "over them, drawn in seeded epochs")
    pointwise_weight: float = setting(0.0, "weight of the pointwise BCE on rated steps beside the Bradley-Terry "
                                           "loss (0: off, rated solutions are not trained on)")
    use_margin: bool = setting(False, "subtract each pair's margin from its chosen - rejected logit difference "
                                      "(off: plain Bradley-Terry)")
    score_batch_size: int = setting(16, "sequences per forward pass when evaluating")
    # a micro-batch of items padded to its longest holds rows x longest tokens of activations: PRM800K's long
    # solutions made 32 pairs a 122 GB pass on an H200 (benchmarks/RESULTS.md); 16,384 is TRL's reward trainer's
    # 8 pairs of 1,024 tokens
    max_tokens_per_microbatch: int = setting(16384, "padded tokens (sequences x longest, a pair two sequences) per "
                                                    "forward/backward, beside micro_batch_size items (0: off)")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("pairs_per_iteration", "score_batch_size"):
            self.require(name, getattr(self, name) > 0, "a positive integer")
        self.require("max_tokens_per_microbatch", self.max_tokens_per_microbatch >= 0, ">= 0")
        self.require("pointwise_weight", self.pointwise_weight >= 0, ">= 0")

    def optimizer_steps_per_iteration(self) -> int:
        return 1


class EncodedPair(NamedTuple):
    """A StepPair as token ids: question + prefix + chosen, and + rejected (each scored at its last token)."""

    chosen: list[int]
    rejected: list[int]
    margin: float


class EncodedRated(NamedTuple):
    """RatedSteps as token ids with each rated step's last-token position and label."""

    ids: list[int]
    positions: list[int]
    labels: list[float]


def encode_item(prm, item: StepPair | RatedSteps | EncodedPair | EncodedRated) -> EncodedPair | EncodedRated:
    """Token ids of an item as `prm.encode_steps` builds them (unrated steps are left out of the scoring,
    though their text stays in the sequence). An item already in token ids (EncodedPair, EncodedRated: e.g. a
    policy's sampled ids, never re-tokenised) is taken as it is."""
    if isinstance(item, (EncodedPair, EncodedRated)):
        return item
    if isinstance(item, StepPair):
        chosen, _ = prm.encode_steps(item.question, item.prefix + (item.chosen,))
        rejected, _ = prm.encode_steps(item.question, item.prefix + (item.rejected,))
        return EncodedPair(chosen, rejected, item.margin)
    if isinstance(item, RatedSteps):
        ids, positions = prm.encode_steps(item.question, item.steps)
        rated = [(p, label) for p, label in zip(positions, item.labels) if label is not None]
        return EncodedRated(ids, [p for p, _ in rated], [label for _, label in rated])
    raise ValueError(f"expected a StepPair or RatedSteps, got {type(item).__name__}")


def encode_items(prm, items: Sequence, what: str) -> list[EncodedPair | EncodedRated]:
    """`encode_item` over `items`; a bad item is one ValueError naming `what[index]`."""
    encoded = []
    for k, item in enumerate(items):
        try:
            encoded.append(encode_item(prm, item))
        except ValueError as err:
            raise ValueError(f"PRMTrainer: {what}[{k}]: {err}") from None
    return encoded


def item_length(item: EncodedPair | EncodedRated) -> int:
    """Tokens of an encoded item's longest sequence."""
    return max(len(item.chosen), len(item.rejected)) if isinstance(item, EncodedPair) else len(item.ids)


def pair_wins(chosen: torch.Tensor, rejected: torch.Tensor) -> float:
    """Pairs whose chosen step scores above the rejected one (a tie counts half)."""
    return float((chosen > rejected).float().sum() + 0.5 * (chosen == rejected).float().sum())


class PRMTrainer(Trainer):
    """Bradley-Terry (+ optional pointwise) training of a `ProcessRewardModel`.

    Args:
        prm: the ProcessRewardModel (the Trainer's `policy`: its weights are checkpointed and saved).
        train_items: StepPairs and/or RatedSteps (RatedSteps only count when `pointwise_weight` > 0).
        config: PRMConfig.
        held_out: items `evaluate` scores (pairwise accuracy and BT loss on pairs; accuracy and BCE on
            rated steps).
    """

    config_class = PRMConfig
    plot_panels = (("loss", ["loss", "bradley_terry", "pointwise", "eval_bt_loss"], "loss"),
                   ("pairwise accuracy", ["pairwise_accuracy", "eval_pairwise_accuracy", "eval_rated_accuracy",
                                          "eval_rated_auc"], "accuracy"))
    progress_metrics = {"loss": ("loss", ".4f"), "acc": ("eval_pairwise_accuracy", ".3f")}

    def __init__(self, prm, train_items: Sequence[StepPair | RatedSteps], config: PRMConfig | None = None,
                 held_out: Sequence[StepPair | RatedSteps] = (), callbacks: Sequence | None = None):
        super().__init__(prm, config, callbacks)
        self.prm = prm
        self.set_items(train_items)
        self.held_out = encode_items(prm, list(held_out), "held_out")

    def set_items(self, train_items: Sequence) -> None:
        """Train on `train_items` from now on (drawn in fresh seeded epochs from the current iteration on; an
        online verifier refresh swaps them, the optimizer's moments kept). ValueError when none is trainable."""
        items = encode_items(self.prm, list(train_items), "train_items")
        if self.config.pointwise_weight == 0:
            items = [x for x in items if isinstance(x, EncodedPair)]
        self.items = [x for x in items if isinstance(x, EncodedPair) or x.labels]
        if not self.items:
            what = "step pairs or rated steps" if self.config.pointwise_weight > 0 else \
                "step pairs (rated steps need pointwise_weight > 0)"
            raise ValueError(f"PRMTrainer: no training items: train_items holds no {what}")
        self.draws = EpochDraws(len(self.items), self.config.seed)

    def param_groups(self) -> list[dict]:
        return [{"params": [p for p in self.policy.parameters() if p.requires_grad]}]

    # ------------------------------------------------------------------ drawing
    def draw(self) -> list[EncodedPair | EncodedRated]:
        """This iteration's items: the next `pairs_per_iteration` of the seeded epochs."""
        return [self.items[i] for i in self.draws.indices(self.iteration, self.config.pairs_per_iteration)]

    def micro_batches(self, items: Sequence) -> list[Sequence]:
        """Similar lengths together, at most `micro_batch_size` items and `max_tokens_per_microbatch` padded tokens
        a pass (training/token_batches.py; an item over the budget alone; under FSDP as many on every rank). The
        step's loss does not depend on the grouping: each term is weighed by the step's totals (`chunk_loss`)."""
        budget = self.config.max_tokens_per_microbatch
        if not budget:
            return super().micro_batches(items)
        lengths = [item_length(x) for x in items]
        groups = token_micro_batches(lengths, budget, [2 if isinstance(x, EncodedPair) else 1 for x in items],
                                     self.config.micro_batch_size)
        if self.gradients.mode == "fsdp":  # every forward all-gathers: the ranks' counts must match
            groups = same_count_on_every_rank(groups, lengths, "max_tokens_per_microbatch")
        return [[items[i] for i in group] for group in groups]

    # ------------------------------------------------------------------ the loss
    def chunk_logits(self, chunk: Sequence) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[EncodedRated]]:
        """One forward pass over a chunk: (chosen logits [P], rejected logits [P], rated logits [R, S], the rated
        items), P the pairs and R the rated solutions in it."""
        pairs = [x for x in chunk if isinstance(x, EncodedPair)]
        rated = [x for x in chunk if isinstance(x, EncodedRated)]
        rows = [ids for p in pairs for ids in (p.chosen, p.rejected)] + [r.ids for r in rated]
        positions = [[len(ids) - 1] for p in pairs for ids in (p.chosen, p.rejected)] + [r.positions for r in rated]
        logits = self.prm.step_logits(*self.prm.step_batch(rows, positions))
        return logits[0:2 * len(pairs):2, 0], logits[1:2 * len(pairs):2, 0], logits[2 * len(pairs):], rated

    def rated_targets(self, rated: list[EncodedRated], steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(labels, mask) [R, steps] of rated solutions, padded to `steps` columns."""
        labels = torch.zeros(len(rated), steps, device=self.device)
        mask = torch.zeros(len(rated), steps, dtype=torch.bool, device=self.device)
        for k, item in enumerate(rated):
            labels[k, :len(item.labels)] = torch.tensor(item.labels, device=self.device)
            mask[k, :len(item.labels)] = True
        return labels, mask

    def chunk_loss(self, chunk: Sequence, pairs_total: int, rated_total: int, wins: list[float]
                   ) -> dict[str, torch.Tensor]:
        """A micro-batch's share of the step's terms: bradley_terry (mean over the step's pairs) and, when
        pointwise_weight > 0, pointwise (weight x mean BCE over the step's rated steps); adds to wins[0]."""
        chosen, rejected, rated_logits, rated = self.chunk_logits(chunk)
        zero = (chosen.sum() + rejected.sum() + rated_logits.sum()) * 0.0  # keeps an absent term in the graph
        terms = {"bradley_terry": zero}
        if len(chosen):
            margin = torch.tensor([x.margin for x in chunk if isinstance(x, EncodedPair)], device=self.device)
            loss = bradley_terry_loss(chosen, rejected, margin if self.config.use_margin else None)
            terms["bradley_terry"] = loss * (len(chosen) / pairs_total)
            wins[0] += pair_wins(chosen.detach(), rejected.detach())
        if self.config.pointwise_weight > 0:
            terms["pointwise"] = zero
            if rated:
                labels, mask = self.rated_targets(rated, rated_logits.shape[1])
                share = float(mask.sum()) / rated_total
                terms["pointwise"] = self.config.pointwise_weight * share * pointwise_loss(rated_logits, labels, mask)
        return terms

    def train_iteration(self) -> dict[str, Any]:
        drawn = self.draw()
        pairs_total = sum(isinstance(x, EncodedPair) for x in drawn)
        rated_total = sum(len(x.labels) for x in drawn if isinstance(x, EncodedRated))
        shard = drawn[dist.rank()::dist.world_size()]  # the draw is shared; each process takes its slice
        wins = [0.0]
        self.prm.train()  # training mode for the step, as the policy's in RL (checkpointed layers recompute only so)
        try:
            with self.timed("update"):
                stats = self.optimizer_step(shard, lambda chunk: self.chunk_loss(chunk, pairs_total, rated_total, wins))
        finally:
            self.prm.eval()
        if pairs_total:
            stats["pairwise_accuracy"] = dist.all_reduce_sum(wins[0]) / pairs_total
        stats.update(pairs=pairs_total, rated_steps=rated_total)
        return stats

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """On the held-out items: pairwise_accuracy (chosen scored above rejected; a tie counts half) and
        bt_loss over pairs; rated_accuracy (score > 0.5 exactly where the label is > 0.5, labels of 0.5
        left out), pointwise_loss, rated_ece (10 bins; soft labels as rates) and rated_auc (over the 0/1
        labels, when both occur) over rated steps. Nothing without held-out items."""
        metrics: dict[str, float] = {}
        batch = self.config.score_batch_size
        pairs = [x for x in self.held_out if isinstance(x, EncodedPair)]
        if pairs:
            rows = [p.chosen for p in pairs] + [p.rejected for p in pairs]
            logits = self.prm.sequence_logits(rows, [[len(r) - 1] for r in rows], batch)
            chosen = torch.tensor([row[0] for row in logits[:len(pairs)]])
            rejected = torch.tensor([row[0] for row in logits[len(pairs):]])
            margin = torch.tensor([p.margin for p in pairs]) if self.config.use_margin else None
            metrics["pairwise_accuracy"] = pair_wins(chosen, rejected) / len(pairs)
            metrics["bt_loss"] = float(bradley_terry_loss(chosen, rejected, margin))
        rated = [x for x in self.held_out if isinstance(x, EncodedRated) and x.labels]
        if rated:
            rows = self.prm.sequence_logits([r.ids for r in rated], [r.positions for r in rated], batch)
            logits = torch.tensor([v for row in rows for v in row])
            labels = torch.tensor([v for r in rated for v in r.labels])
            metrics["pointwise_loss"] = float(pointwise_loss(logits, labels, torch.ones_like(labels, dtype=torch.bool)))
            decided = labels != 0.5
            if bool(decided.any()):
                metrics["rated_accuracy"] = float(((logits > 0) == (labels > 0.5))[decided].float().mean())
            scores = torch.sigmoid(logits).tolist()
            metrics["rated_ece"] = expected_calibration_error(scores, labels.tolist())
            binary = [(p, y) for p, y in zip(scores, labels.tolist()) if y in (0.0, 1.0)]
            auc = roc_auc([p for p, _ in binary], [y for _, y in binary]) if binary else None
            if auc is not None:
                metrics["rated_auc"] = auc
        return metrics

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "train_items": len(self.items), "held_out_items": len(self.held_out)}
