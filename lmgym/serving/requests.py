"""The request and response bodies of the server (pydantic checks the types and ranges: a bad field is a
422 whose message names it). Python's json reads `Infinity` and `NaN`, so every request refuses a
non-finite number (`allow_inf_nan=False`), and a string UTF-8 cannot encode (a lone surrogate) is a 400
(serving/text_check.py)."""
from __future__ import annotations

from lmgym.core.extras import extra_imports

with extra_imports("The HTTP server"):  # pydantic comes with fastapi, in the [serve] extra
    from pydantic import BaseModel, ConfigDict, Field, field_validator
    from pydantic_core import PydanticCustomError

from lmgym.search.methods import search_methods
from lmgym.serving.text_check import EncodableText

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
    """A question answered by a search method, one registered in `lmgym.search.methods`. budget: its budget
    field (samples for maj, weighted_maj and best_of_n, beams for beam, simulations for mcts), by default
    DEFAULT_BUDGET or the server's max_budget when that is smaller; greedy ignores it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    question: str = Field(min_length=1)
    method: str = "greedy"
    budget: int | None = Field(None, ge=1)

    @field_validator("method")
    @classmethod
    def _registered(cls, method: str) -> str:
        methods = list(search_methods())
        if method not in methods:
            choices = ", ".join(repr(m) for m in methods[:-1]) + f" or {methods[-1]!r}"
            raise PydanticCustomError("literal_error", "Input should be {choices}", {"choices": choices})
        return method


class SolveResponse(BaseModel):
    answer: str | None
    solution: str
    tokens: int
    method: str
