"""SFT examples as token rows: encoding with per-token loss weights, packing several examples into a row,
and the packed forward pass.

A packed row holds examples back to back, each with position ids from 0. With no attention mask and
position ids that restart, transformers builds a block-diagonal causal mask (its packed-sequence
format: every attention implementation with a mask function, SDPA and eager included, and flash
attention's variable-length path), so no token attends to another example. Padding at the end of a row
is one more such segment, with weight 0.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from lmgym.policies.base import BackbonePolicy
from lmgym.policies.logprobs import chunked_token_logprobs
from lmgym.traindata.reflection_sft import ReflectionTurnExample, turn_tokens
from lmgym.traindata.sft_data import ChatExample, Example, SFTExample, check_messages


class EncodedExample(NamedTuple):
    """Token ids and a weight per token: 1 where the token is trained on (its log-prob given the tokens
    before it in the example enters the loss), 0 elsewhere; the first token is never trained on."""

    ids: list[int]
    weights: list[int]

    @property
    def tokens(self) -> int:
        return sum(self.weights)


class PackedBatch(NamedTuple):
    """Rows of packed examples, right-padded: ids, position ids (restarting per example and for the
    padding) and weights [B, L]."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    weights: torch.Tensor


def _render(tokenizer, messages: list[dict], generation_prompt: bool) -> str:
    if not messages:
        return ""
    return tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=False)


def _trained_through_eos(ids: list[int], eos: int | None) -> list[int]:
    """Weights of an assistant turn's tokens: 1 up to its first end-of-sequence token (included), 0 after
    it (the line break a template writes after a turn is not the model's to predict)."""
    if eos in ids:
        cut = ids.index(eos) + 1
        return [1] * cut + [0] * (len(ids) - cut)
    return [1] * len(ids)


def chat_tokens(policy, example: ChatExample, completion_only: bool = True) -> tuple[list[int], list[int]]:
    """(ids, weights) of a conversation rendered by the policy's chat template (the policy's system prompt
    first when the conversation has none): with `completion_only`, the assistant turns from
    `example.trained_from` on are trained on (their text and end-of-turn token), else every token."""
    if not getattr(policy, "use_chat_template", False):
        raise ValueError("a chat example needs a policy that uses a chat template (use_chat_template, and a "
                         "tokenizer that has one)")
    tokenizer, eos = policy.tokenizer, policy.tokenizer.eos_token_id
    messages = [dict(m) for m in check_messages(example.messages, example.trained_from)]
    offset = 0
    if getattr(policy, "system_prompt", None) and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": policy.system_prompt})
        offset = 1
    ids: list[int] = []
    weights: list[int] = []
    rendered = ""

    def add(text: str, trained: bool) -> None:
        if not text.startswith(rendered):
            raise ValueError("the chat template does not render a conversation as the extension of its first "
                             "turns (it rewrites earlier turns), so the assistant turns cannot be told apart")
        part = tokenizer(text[len(rendered):], add_special_tokens=False)["input_ids"]
        ids.extend(part)
        weights.extend(_trained_through_eos(part, eos) if trained else [0] * len(part))

    for k, message in enumerate(messages):
        trained = message["role"] == "assistant" and k - offset >= example.trained_from
        if message["role"] == "assistant":
            head = _render(tokenizer, messages[:k], True)
            add(head, False)
            rendered = head
        text = _render(tokenizer, messages[:k + 1], False)
        add(text, trained)
        rendered = text
    if not completion_only:
        weights = [1] * len(ids)
    return ids, weights


def prompt_completion_tokens(policy, example: SFTExample, completion_only: bool = True
                             ) -> tuple[list[int], list[int]]:
    """(ids, weights): `policy.format_prompt(prompt)`, the completion's tokens (`encode_text`) and the
    end-of-sequence token; with `completion_only` the prompt's weights are 0."""
    prompt = list(policy.format_prompt(example.prompt))
    completion = list(policy.encode_text(example.completion))
    eos = policy.tokenizer.eos_token_id
    if eos is not None and (not completion or completion[-1] != eos):
        completion.append(eos)
    return prompt + completion, [0 if completion_only else 1] * len(prompt) + [1] * len(completion)


def encode_example(policy, example: Example, completion_only: bool = True, max_length: int | None = None
                   ) -> EncodedExample:
    """An SFTExample, ChatExample or ReflectionTurnExample (or a message list) as an EncodedExample, cut to
    `max_length` tokens; ValueError (one line) for anything else."""
    if isinstance(example, (list, tuple)) and not isinstance(example, SFTExample):
        example = ChatExample(tuple(example))
    if isinstance(example, SFTExample):
        if not isinstance(example.prompt, str) or not isinstance(example.completion, str):
            raise ValueError("an SFTExample's prompt and completion must be str")
        ids, weights = prompt_completion_tokens(policy, example, completion_only)
    elif isinstance(example, ChatExample):
        ids, weights = chat_tokens(policy, example, completion_only)
    elif isinstance(example, ReflectionTurnExample):  # one role's turn, laid out as the episode engine does
        ids, weights = turn_tokens(policy, example)
        weights = weights if completion_only else [1] * len(ids)
    else:
        raise ValueError(f"expected an SFTExample, a ChatExample or a list of messages, got {type(example).__name__}")
    if weights:
        weights[0] = 0  # nothing in its own example predicts the first token
    if max_length is not None:
        ids, weights = ids[:max_length], weights[:max_length]
    return EncodedExample(ids, weights)


def pack(examples: Sequence[EncodedExample], max_length: int) -> list[list[EncodedExample]]:
    """Rows of at most `max_length` tokens: first-fit decreasing (the longest example first, each into the
    first row with room). Deterministic; every example (at most `max_length` long) lands in one row."""
    rows: list[list[EncodedExample]] = []
    room: list[int] = []
    for example in sorted(examples, key=lambda e: -len(e.ids)):
        for k, free in enumerate(room):
            if len(example.ids) <= free:
                rows[k].append(example)
                room[k] -= len(example.ids)
                break
        else:
            rows.append([example])
            room.append(max_length - len(example.ids))
    return rows


def collate_rows(rows: Sequence[Sequence[EncodedExample]], pad_id: int, device: torch.device | str = "cpu"
                 ) -> PackedBatch:
    """A PackedBatch of rows (each a list of examples placed back to back), right-padded to the longest."""
    lengths = [sum(len(e.ids) for e in row) for row in rows]
    width = max(lengths)
    ids, positions, weights = [], [], []
    for row, length in zip(rows, lengths):
        ids.append([t for e in row for t in e.ids] + [pad_id] * (width - length))
        positions.append([p for e in row for p in range(len(e.ids))] + list(range(width - length)))
        weights.append([w for e in row for w in e.weights] + [0] * (width - length))
    as_tensor = lambda rows_, dtype: torch.tensor(rows_, dtype=dtype, device=device)  # noqa: E731
    return PackedBatch(as_tensor(ids, torch.long), as_tensor(positions, torch.long), as_tensor(weights, torch.float))


def packed_token_logprobs(policy: BackbonePolicy, input_ids: torch.Tensor, position_ids: torch.Tensor,
                          select: torch.Tensor | None = None) -> torch.Tensor:
    """Log-probs of each token given the tokens before it in its own example: [B, L - 1] for tokens 1..L-1
    (meaningless where a new example or the padding starts), or with `select` [B, L] (bool) only those
    of the selected tokens, flat [N] (the lm-head then runs on those positions alone)."""
    _, head = policy.backbone_and_head()
    with policy.autocast():  # the training backbone: through the DDP wrapper when data-parallel
        hidden = policy.training_backbone()(input_ids=input_ids, position_ids=position_ids, attention_mask=None,
                                            use_cache=False).last_hidden_state[:, :-1]
    targets = input_ids[:, 1:]
    if select is not None:
        keep = select[:, 1:]
        hidden, targets = hidden[keep].unsqueeze(0), targets[keep].unsqueeze(0)
    with policy.autocast():
        logprobs, _ = chunked_token_logprobs(hidden, head.weight, targets, 1.0, policy.logprob_chunk)
    return logprobs[0] if select is not None else logprobs
