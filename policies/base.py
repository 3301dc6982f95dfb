"""The policy contract: sample completions with their log-probs, and score given completions."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch

from policies.chat_turns import turn_ids
from policies.generation import Generation, StopLists


class Policy(ABC):
    """A language-model policy. Observations and actions are text; training works on token ids."""

    tokenizer: object
    use_chat_template: bool = False  # True where observations and injected turns use the chat template

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
        stop: StopLists = None,
        generator: torch.Generator | None = None,
    ) -> list[list[Generation]]:
        """`n` completions for each prompt (a list of n Generations per prompt).

        stop: None, one list of stop strings for every prompt, or one list (or None) per prompt."""

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

    def encode_turn(self, text: str, role: str, after: Sequence[int] = ()) -> list[int]:
        """Token ids that close the assistant's turn, open a `role` turn ("tool", "user") holding `text` and
        open the next assistant turn, as the chat template writes them; `encode_text(text)` without one.

        after: the tokens the turn follows; when they already end with the assistant's end-of-turn token
        (it sampled its EOS), the turn does not close it again. ValueError (one line) for a role the
        template rejects.
        """
        if not self.use_chat_template:
            return self.encode_text(text)
        return turn_ids(self.tokenizer, text, role, after)
