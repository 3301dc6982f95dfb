"""Decoding rows that share a prompt with the prompt's keys and values stored and read once per group.

A group's samples (GRPO's G samples of a prompt) and the k rollouts from one step prefix (Monte-Carlo step
labels, MCTS expansions) start from the same prompt. The fast decoder prefills such a prompt once, and in
this layout (`GroupedBuffers`) it also keeps the prompt's keys and values once: a bucket of U groups of m
rows holds the prompts in [U, kv heads, Lp, D] buffers and each row's own sampled tokens in
[U * m, kv heads, Ls, D] buffers. A decode step's attention (`grouped_attention`) scores each row's query
against its group's prompt (one matrix product per group: the m rows' queries together, the prompt's keys
read once) and against its own tokens, and takes one softmax over both, so it is the attention over the
row's whole context that a full cache computes, reading Lp * U + Ls * U * m key columns instead of
(Lp + Ls) * U * m. Rows are laid out group by group: row u * m + j is member j of group u; a group with
fewer than m members, and the groups past the last, hold finished filler rows.
"""
from __future__ import annotations

import torch

from lmgym.policies.decoding.step import LoopState

PREFIX_BUCKET = 128  # prompt columns are allotted in multiples of this (few distinct buckets, few graphs)
SUFFIX_BUCKET = 64  # sampled-token columns likewise


def round_up(value: int, multiple: int) -> int:
    return max(multiple, -(-value // multiple) * multiple)


def round_groups(count: int) -> int:
    """Group buckets: powers of two (at most 2x padding, few graphs to capture)."""
    return 1 << (max(count, 1) - 1).bit_length()


class GroupedBuffers(LoopState):
    """A bucket of `groups` groups of `members` rows: each group's prompt once, each row's sampled tokens.

    The loop state's `valid` [rows, Ls] marks each row's own attendable token columns; `prefix_bias`
    [groups, 1, 1, Lp] is 0 on each prompt's columns and -inf elsewhere."""

    def __init__(self, groups: int, members: int, prefix_length: int, suffix_length: int, n_layers: int,
                 kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device):
        super().__init__(groups * members, suffix_length, device)
        self.groups, self.members = groups, members
        prefix, suffix = (groups, kv_heads, prefix_length, head_dim), (groups * members, kv_heads, suffix_length,
                                                                       head_dim)
        self.prefix_keys = [torch.zeros(prefix, dtype=dtype, device=device) for _ in range(n_layers)]
        self.prefix_values = [torch.zeros(prefix, dtype=dtype, device=device) for _ in range(n_layers)]
        self.keys = [torch.zeros(suffix, dtype=dtype, device=device) for _ in range(n_layers)]
        self.values = [torch.zeros(suffix, dtype=dtype, device=device) for _ in range(n_layers)]
        self.prefix_bias = torch.zeros((groups, 1, 1, prefix_length), dtype=torch.float32, device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.captured = None
        self.nbytes = sum(t.numel() * t.element_size()
                          for t in self.prefix_keys + self.prefix_values + self.keys + self.values)


class PrefixView:
    """The first `groups` prompts' key/value buffers of a grouped bucket, as the prefill writes them."""

    def __init__(self, buf: GroupedBuffers, groups: int):
        self.keys = [k[:groups] for k in buf.prefix_keys]
        self.values = [v[:groups] for v in buf.prefix_values]


def _scores(q: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q [N, A, D] x keys [N, L, D] -> float32 scores [N, A, L] (bf16 inputs accumulate into float32 on CUDA)."""
    if q.is_cuda and q.dtype in (torch.bfloat16, torch.float16):
        return torch.bmm(q, keys.transpose(1, 2), out_dtype=torch.float32)
    return torch.bmm(q.float(), keys.transpose(1, 2).float())


def grouped_attention(q: torch.Tensor, buf: GroupedBuffers, layer: int, suffix_bias: torch.Tensor,
                      scaling: float) -> torch.Tensor:
    """Attention of one new token per row, q [U*m, H, 1, D], over its group's prompt and its own tokens.

    suffix_bias: [U*m, 1, 1, Ls] additive (0 where the row may attend its own token column, -inf elsewhere)."""
    prefix_k, prefix_v = buf.prefix_keys[layer], buf.prefix_values[layer]
    own_k, own_v = buf.keys[layer], buf.values[layer]
    rows, heads, _, dim = q.shape
    groups, kv, prefix_length, _ = prefix_k.shape
    m, g, suffix_length = buf.members, heads // kv, own_k.shape[2]
    q = q.reshape(groups, m, kv, g, dim)
    # every query of a group, against the group's prompt: [U * kv, m * g, Lp]
    grouped_q = q.permute(0, 2, 1, 3, 4).reshape(groups * kv, m * g, dim)
    prefix = _scores(grouped_q, prefix_k.reshape(groups * kv, prefix_length, dim)).mul_(scaling)
    prefix = prefix.view(groups, kv, m * g, prefix_length).add_(buf.prefix_bias)
    prefix = prefix.view(groups, kv, m, g, prefix_length).permute(0, 2, 1, 3, 4).reshape(rows, kv, g, prefix_length)
    # each row's query against its own tokens: [U * m * kv, g, Ls]
    own = _scores(q.reshape(rows * kv, g, dim), own_k.reshape(rows * kv, suffix_length, dim)).mul_(scaling)
    own = own.view(rows, kv, g, suffix_length).add_(suffix_bias)
    weights = torch.softmax(torch.cat([prefix, own], dim=-1), dim=-1).to(prefix_v.dtype)
    to_prefix, to_own = weights.split([prefix_length, suffix_length], dim=-1)
    to_prefix = to_prefix.reshape(groups, m, kv, g, prefix_length).permute(0, 2, 1, 3, 4)
    out = torch.bmm(to_prefix.reshape(groups * kv, m * g, prefix_length), prefix_v.reshape(groups * kv, prefix_length,
                                                                                             dim))
    out = out.view(groups, kv, m, g, dim).permute(0, 2, 1, 3, 4).reshape(rows, kv, g, dim)
    out = out + torch.bmm(to_own.reshape(rows * kv, g, suffix_length),
                          own_v.reshape(rows * kv, suffix_length, dim)).view(rows, kv, g, dim)
    return out.reshape(rows, heads, 1, dim)


def group_layout(prompts: list[list[int]]) -> tuple[list[list[int]], list[list[int]]]:
    """(distinct prompts in first-seen order, each one's prompt indices in order)."""
    index: dict[tuple[int, ...], int] = {}
    members: list[list[int]] = []
    for i, prompt in enumerate(prompts):
        key = tuple(prompt)
        if key not in index:
            index[key] = len(members)
            members.append([])
        members[index[key]].append(i)
    return [list(p) for p in index], members
