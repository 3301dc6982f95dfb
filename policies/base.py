"""The policy contract: sample completions with their log-probs, and score given completions."""
from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from policies.generation import Generation


class Policy(ABC):
    """A language-model policy. Observations and actions are text; training works on token ids."""

    tokenizer: object

    @abstractmethod
    def format_prompt(self, observation: str) -> list[int]:
        """Token ids of the full model input for an environment observation (chat template applied)."""

    @abstractmethod
    def sample(
        self,
        prompts: list[list[int]],
        n: int = 1,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: list[str] | None = None,
        generator: torch.Generator | None = None,
    ) -> list[list[Generation]]:
        """`n` completions for each prompt (a list of n Generations per prompt)."""

    @abstractmethod
    def token_logprobs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_start: int | torch.Tensor,
        temperature: float = 1.0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(log-probs, entropies) [B, C] of the completion tokens given everything before them.

        completion_start: the column where every row's completion starts (int), or the positions [B, C]
        of each row's completion tokens (Batch.completion_positions).
        """

    def encode_text(self, text: str) -> list[int]:
        """Token ids of a text fragment (no special tokens), e.g. an environment's injected output."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]
