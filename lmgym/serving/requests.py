"""The request and response bodies of the server (pydantic checks the types and ranges: a bad field is a
422 whose message names it). Python's json reads `Infinity` and `NaN`, so every request refuses a
non-finite number (`allow_inf_nan=False`), and a string UTF-8 cannot encode (a lone surrogate) is a 400
(serving/text_check.py)."""
from __future__ import annotations

from typing import Literal

from lmgym.core.extras import extra_imports

with extra_imports("The HTTP server"):  # pydantic comes with fastapi, in the [serve] extra
    from pydantic import BaseModel, ConfigDict, Field

from lmgym.serving.text_check import EncodableText

SOLVE_METHODS = ("greedy", "maj", "best_of_n", "beam", "mcts")
DEFAULT_BUDGET = 8


class GenerateRequest(EncodableText):
    """Text from the policy for a prompt (the chat template applied), up to `max_new_tokens` tokens."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    prompt: str = Field(min_length=1)
    max_new_tokens: int = Field(128, ge=1)
    temperature: float = Field(0.0, ge=0.0)


class GenerateResponse(BaseModel):
    text: str
    tokens: int


class SolveRequest(EncodableText):
    """A question answered by a search method. budget: samples (maj, best_of_n), beams (beam) or simulations
    (mcts), by default
    DEFAULT_BUDGET or the server's max_budget when that is smaller; greedy ignores it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    question: str = Field(min_length=1)
    method: Literal["greedy", "maj", "best_of_n", "beam", "mcts"] = "greedy"
    budget: int | None = Field(None, ge=1)


class SolveResponse(BaseModel):
    answer: str | None
    solution: str
    tokens: int
    method: str
