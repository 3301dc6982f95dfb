"""Preference pairs as token ids, and the summed log-probs a policy gives their completions.

A completion is encoded as the episode engine builds one: `format_prompt(prompt)`, then
`encode_text(completion)` and the EOS token. A pair longer than `max_length` has its completion cut
at the end (a prompt that leaves no room is an error).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from lmgym.policies.prompting import pad_id
from lmgym.traindata.preference_data import PreferencePair


class EncodedPair(NamedTuple):
    """A PreferencePair as token ids: the prompt's, and each completion's (EOS included)."""

    prompt: list[int]
    chosen: list[int]
    rejected: list[int]
    truncated: bool  # a completion was cut to fit max_length


def encode_pair(policy, pair: PreferencePair, max_length: int) -> EncodedPair:
    """`pair` as token ids, each completion cut to fit `max_length` tokens with the prompt; ValueError
    (one line) when the prompt leaves no room or a completion has no tokens."""
    if not isinstance(pair, PreferencePair):
        raise ValueError(f"expected a PreferencePair, got {type(pair).__name__}")
    prompt = list(policy.format_prompt(pair.prompt))
    room = max_length - len(prompt)
    if room < 1:
        raise ValueError(f"the prompt has {len(prompt)} tokens: max_length={max_length} leaves no room for a "
                         f"completion")
    eos = policy.tokenizer.eos_token_id
    completions = []
    for name in ("chosen", "rejected"):
        ids = list(policy.encode_text(getattr(pair, name))) + ([eos] if eos is not None else [])
        if not ids:
            raise ValueError(f"{name} has no tokens")
        completions.append(ids)
    truncated = any(len(ids) > room for ids in completions)
    return EncodedPair(prompt, completions[0][:room], completions[1][:room], truncated)


def encode_pairs(policy, pairs: Sequence, max_length: int, what: str) -> list[EncodedPair]:
    """`encode_pair` over `pairs`; a bad one is one ValueError naming `what[index]`."""
    encoded = []
    for index, pair in enumerate(pairs):
        try:
            encoded.append(encode_pair(policy, pair, max_length))
        except ValueError as err:
            raise ValueError(f"{what}[{index}]: {err}") from None
    return encoded


def completion_logprobs(policy, rows: Sequence[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(summed log-probs [B], token counts [B]) of each (prompt ids, completion ids) row's completion under
    `policy`, from one right-padded forward pass (gradients flow when enabled)."""
    device = getattr(policy, "device", torch.device("cpu"))
    width = max(len(p) + len(c) for p, c in rows)
    columns = max(len(c) for _, c in rows)
    pad = pad_id(policy.tokenizer)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    positions = torch.zeros((len(rows), columns), dtype=torch.long)
    mask = torch.zeros((len(rows), columns))
    for b, (prompt, completion) in enumerate(rows):
        p, c = len(prompt), len(completion)
        ids[b, :p + c] = torch.tensor(prompt + completion)
        attention[b, :p + c] = 1
        positions[b] = p  # padding entries point at a valid column (masked below)
        positions[b, :c] = torch.arange(p, p + c)
        mask[b, :c] = 1
    logprobs = policy.token_logprobs(ids.to(device), attention.to(device), positions.to(device))[0]
    mask = mask.to(logprobs.device)
    return (logprobs.float() * mask).sum(-1), mask.sum(-1)
