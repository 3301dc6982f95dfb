"""`SFT`: supervised fine-tuning on prompt/completion or chat examples, as a `Trainer` (same run folder,
logging, checkpoints and resume as every trainer here).

The loss is the mean negative log-likelihood per trained token: completion tokens (assistant turns) only
by default. Each iteration is one optimizer step over `examples_per_iteration` examples drawn in a seeded
order that cycles through epochs (epoch e's order is a permutation seeded by (seed, e), so a resumed run
draws what an uninterrupted one would). With `packing`, the drawn examples are packed into rows of up to
`max_length` tokens whose attention never crosses examples (algorithms/sft_tokens.py);
`micro_batch_size` counts rows.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lmgym.algorithms.sft_tokens import EncodedExample, collate_rows, encode_example, pack, packed_token_logprobs
from lmgym.policies.base import BackbonePolicy
from lmgym.policies.prompting import pad_id
from lmgym.traindata.sft_data import Example
from lmgym.training import distributed as dist
from lmgym.training.config import TrainerConfig, setting
from lmgym.training.guards import warn
from lmgym.training.token_batches import EpochDraws
from lmgym.training.trainer import Trainer


@dataclass
class SFTConfig(TrainerConfig):
    """Settings of `SFT`, on top of `TrainerConfig` (micro_batch_size counts rows: packed rows with
    `packing`, single examples without). The held-out examples are passed to SFT as `held_out`."""

    learning_rate: float = setting(2e-5, "AdamW step size, > 0 (constant after the warmup)")
    examples_per_iteration: int = setting(32, "examples per iteration: one optimizer step over them, drawn in "
                                              "seeded epochs")
    max_length: int = setting(1024, "tokens per example (longer ones are cut at the end) and per packed row")
    packing: bool = setting(True, "pack examples into rows of max_length tokens (positions restart, attention "
                                  "never crosses examples)")
    completion_only: bool = setting(True, "loss on completion tokens (assistant turns) only; off: every token")
    eval_batch_size: int = setting(16, "rows per forward pass when evaluating")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("examples_per_iteration", "max_length", "eval_batch_size"):
            self.require(name, getattr(self, name) > 0, "a positive integer")

    def optimizer_steps_per_iteration(self) -> int:
        return 1


def encode_examples(policy, examples: Sequence[Example], config: SFTConfig, what: str
                    ) -> tuple[list[EncodedExample], int, int]:
    """(encoded examples, how many of them were cut to max_length, how many were left out: nothing to train
    on within max_length); a bad example is one ValueError naming `what[index]`."""
    encoded, cut, dropped = [], 0, 0
    for k, example in enumerate(examples):
        try:
            item = encode_example(policy, example, config.completion_only, None)
        except ValueError as err:
            raise ValueError(f"SFT: {what}[{k}]: {err}") from None
        long = len(item.ids) > config.max_length
        item = EncodedExample(item.ids[:config.max_length], item.weights[:config.max_length])
        if item.tokens == 0:
            dropped += 1
        else:
            encoded.append(item)
            cut += long
    return encoded, cut, dropped


class SFT(Trainer):
    """Supervised fine-tuning: the mean NLL of completion tokens.

    Args:
        policy: an HFPolicy (full weights or LoRA: only its trainable parameters are trained).
        train_examples: SFTExamples (prompt = an env observation, as `policy.format_prompt` takes it),
            ChatExamples or message lists (traindata/sft_data.py).
        config: SFTConfig.
        held_out: examples `evaluate` scores: `loss` (logged `eval_loss`), the NLL per trained token.
    """

    config_class = SFTConfig
    policy_contract = BackbonePolicy  # the packed pass runs its backbone
    plot_panels = (("loss (NLL per completion token)", ["loss", "eval_loss"], "loss"),)
    progress_metrics = {"loss": ("loss", ".4f"), "eval": ("eval_loss", ".4f")}

    def __init__(self, policy, train_examples: Sequence[Example], config: SFTConfig | None = None,
                 held_out: Sequence[Example] = (), callbacks: Sequence | None = None):
        super().__init__(policy, config, callbacks)
        c = self.config
        self.examples, self.cut, dropped = encode_examples(policy, list(train_examples), c, "train_examples")
        if not self.examples:
            raise ValueError(f"SFT: no training examples: train_examples holds {len(train_examples)}, none with a "
                             f"trained token within max_length={c.max_length}")
        if dropped:
            warn(f"SFT: {dropped} of {len(train_examples)} training examples left out: no completion token "
                 f"within max_length={c.max_length}")
        self.held_out, _, _ = encode_examples(policy, list(held_out), c, "held_out")
        self.pad_id = pad_id(policy.tokenizer)
        self.draws = EpochDraws(len(self.examples), c.seed)

    def param_groups(self) -> list[dict]:
        return [{"params": [p for p in self.policy.parameters() if p.requires_grad]}]

    # ------------------------------------------------------------------ drawing and rows
    def draw(self) -> list[EncodedExample]:
        """This iteration's examples: the next `examples_per_iteration` of the seeded epochs."""
        return [self.examples[i] for i in self.draws.indices(self.iteration, self.config.examples_per_iteration)]

    def rows(self, examples: Sequence[EncodedExample]) -> list[list[EncodedExample]]:
        """Packed rows (`packing`), or one example a row."""
        return pack(examples, self.config.max_length) if self.config.packing else [[e] for e in examples]

    def rows_nll(self, rows: Sequence[Sequence[EncodedExample]]) -> torch.Tensor:
        """The summed NLL of the trained tokens of `rows` (one forward pass)."""
        batch = collate_rows(rows, self.pad_id, self.device)
        logprobs = packed_token_logprobs(self.policy, batch.input_ids, batch.position_ids, batch.weights > 0)
        return -(logprobs * batch.weights[batch.weights > 0]).sum()

    # ------------------------------------------------------------------ training and evaluation
    def train_iteration(self) -> dict[str, Any]:
        drawn = self.draw()
        rows = self.rows(drawn)
        tokens = sum(e.tokens for e in drawn)
        shard = rows[dist.rank()::dist.world_size()]  # the draw is shared; each process takes its rows
        self.policy.model.train()  # dropout and gradient checkpointing (if any) act in training mode alone
        try:
            with self.timed("update"), self._phase("update", -(-len(shard) // self.config.micro_batch_size), "mb"):
                stats = self.optimizer_step(shard, lambda chunk: {"nll": self.rows_nll(chunk) / tokens})
        finally:
            self.policy.model.eval()  # sampling and scoring see the model without dropout, as HFPolicy keeps it
        used = sum(len(e.ids) for e in drawn)
        stats.update(tokens=tokens, rows=len(rows), row_fill=used / (len(rows) * self.config.max_length),
                     epoch=(self.iteration + 1) * self.config.examples_per_iteration / len(self.examples))
        return stats

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """On the held-out examples: `loss`, the NLL per trained token, and `tokens`; nothing without any."""
        if not self.held_out:
            return {}
        rows, size = self.rows(self.held_out), self.config.eval_batch_size
        total = sum(float(self.rows_nll(rows[start:start + size])) for start in range(0, len(rows), size))
        tokens = sum(e.tokens for e in self.held_out)
        return {"loss": total / tokens, "tokens": float(tokens)}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "train_examples": len(self.examples), "held_out_examples": len(self.held_out),
                "examples_cut_to_max_length": self.cut}
