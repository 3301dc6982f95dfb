"""Decoding rows that share a prompt prefix with the prefix's keys and values computed, stored and read once.

A group's samples (GRPO's G samples of a prompt) and the k rollouts from one step prefix (Monte-Carlo step
labels, MCTS expansions) start from the same prompt; their later turns, and the branches of one question in a
multi-turn episode, still share a long prefix. `plan_groups` sorts a call's prompts and groups neighbours that
share a prefix. In the grouped layout (`GroupedBuffers`) a bucket of U groups of m rows holds each group's
shared prefix once, in [U, kv heads, Lp, D] buffers, and each row's own tokens (the rest of its prompt, then
what it samples) in [U * m, kv heads, Ls, D] buffers. Attention (`grouped_attention`) scores each row's queries
against its group's prefix (one matrix product per group: the m rows' queries together, the prefix's keys read
once) and against its own tokens, with one softmax over both: the attention over the row's whole context that a
cache per row computes, reading Lp * U + Ls * U * m key columns instead of (Lp + Ls) * U * m. The prefix is
prefilled once per group, then each row's own prompt tokens attend to it the same way. Rows are laid out group
by group: row u * m + j is member j of group u; a group with fewer than m members, and the groups past the
last, hold finished filler rows.
"""
from __future__ import annotations

import os

import torch

from lmgym.policies.decoding.step import LoopState

PREFIX_BUCKET = 128  # the unit of shared-prefix columns (`round_up`'s ladder: few distinct buckets, few graphs)
SUFFIX_BUCKET = 64  # the unit of a row's own columns likewise
MIN_SHARED = 32  # a group shares at least this many prompt tokens
KEEP_SHARED = 0.75  # a row joins a group when the prefix it shares with the group's first is at least this share
#                     of the group's shared prefix so far
MAX_MEMBERS = 16  # rows in one group at most
# grouped when it reads at most this share of the key columns a cache per row reads (on an H200 with the 135M model
# it won at 0.44 and lost at 0.63 and 0.66: its attention takes more kernels than one fused attention)
GROUPED_COST = 0.5


def plan_groups(prompts: list[list[int]]) -> list[tuple[list[int], int]]:
    """(prompt indices, shared prefix length) of each group: prompts sorted, neighbours that share at least
    MIN_SHARED tokens with the group's first (and KEEP_SHARED of what the group shares so far) join it, MAX_MEMBERS
    at most. A group's shared prefix stops before each member's last prompt token (every row has an own token)."""
    order = sorted(range(len(prompts)), key=prompts.__getitem__)
    groups: list[tuple[list[int], int]] = []
    i = 0
    while i < len(order):
        first = prompts[order[i]]
        members, shared = [order[i]], len(first) - 1
        j = i + 1
        while j < len(order) and len(members) < MAX_MEMBERS:
            other = prompts[order[j]]
            common = min(len(os.path.commonprefix([first, other])), len(other) - 1)
            if common < MIN_SHARED or common < KEEP_SHARED * shared:
                break
            members.append(order[j])
            shared = min(shared, common)
            j += 1
        groups.append((members, max(shared, 0)))
        i = j
    return groups


def grouped_columns(groups: list[tuple[list[int], int]], prompts: list[list[int]],
                    max_new_tokens: int) -> tuple[int, int, int, int]:
    """(group bucket U, members m, prefix columns Lp, own columns Ls) of the grouped layout of `groups`."""
    own = max(len(prompts[i]) - shared for rows, shared in groups for i in rows)
    return (round_groups(len(groups)), round_groups(max(len(rows) for rows, _ in groups)),
            round_up(max(shared for _, shared in groups), PREFIX_BUCKET), round_up(own + max_new_tokens, SUFFIX_BUCKET))


def round_up(value: int, unit: int) -> int:
    """The smallest of unit x (1, 2, 3, 4, 6, 8, 12, 16, ...) that holds `value`: at most 1.5x the columns needed,
    and few distinct buckets over a wide range of lengths."""
    if value <= unit:
        return unit
    k = 1
    while True:
        for size in (unit << k, 3 * (unit << (k - 1))):
            if size >= value:
                return size
        k += 1


def round_groups(count: int) -> int:
    """Group buckets: powers of two (at most 2x padding, few graphs to capture)."""
    return 1 << (max(count, 1) - 1).bit_length()


class GroupedBuffers(LoopState):
    """A bucket of `groups` groups of `members` rows: each group's shared prefix once, each row's own tokens (the
    rest of its prompt, then what it samples).

    The loop state's `valid` [rows, Ls] marks each row's own attendable token columns; `prefix_bias`
    [groups, 1, 1, Lp] is 0 on each prefix's columns and -inf elsewhere."""

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


def _scores(q: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q [N, A, D] x keys [N, L, D] -> float32 scores [N, A, L] (bf16 inputs accumulate into float32 on CUDA)."""
    if q.is_cuda and q.dtype in (torch.bfloat16, torch.float16):
        return torch.bmm(q, keys.transpose(1, 2), out_dtype=torch.float32)
    return torch.bmm(q.float(), keys.transpose(1, 2).float())


def grouped_attention(q: torch.Tensor, buf, layer: int, own_bias: torch.Tensor, scaling: float) -> torch.Tensor:
    """Attention of each row's queries q [U*m, H, T, D] over its group's prefix and its own tokens.

    own_bias: additive, [U*m, 1, T or 1, Ls] (0 where a query may attend an own column, -inf elsewhere); the
    prefix is masked by `buf.prefix_bias`. `buf`: a `GroupedBuffers` or a `GroupSlice` of one."""
    prefix_k, prefix_v = buf.prefix_keys[layer], buf.prefix_values[layer]
    own_k, own_v = buf.keys[layer], buf.values[layer]
    rows, heads, T, dim = q.shape
    groups, kv, prefix_length, _ = prefix_k.shape
    m, g, own_length = buf.members, heads // kv, own_k.shape[2]
    q = q.reshape(groups, m, kv, g, T, dim)
    # every query of a group against the group's prefix: [U * kv, m * g * T, Lp]
    grouped_q = q.permute(0, 2, 1, 3, 4, 5).reshape(groups * kv, m * g * T, dim)
    prefix = _scores(grouped_q, prefix_k.reshape(groups * kv, prefix_length, dim)).mul_(scaling)
    prefix = prefix.view(groups, kv, m * g * T, prefix_length).add_(buf.prefix_bias)
    prefix = prefix.view(groups, kv, m, g, T, prefix_length).permute(0, 2, 1, 3, 4, 5)
    prefix = prefix.reshape(rows, kv, g, T, prefix_length)
    # each row's queries against its own tokens: [U * m * kv, g * T, Ls]
    own = _scores(q.reshape(rows * kv, g * T, dim), own_k.reshape(rows * kv, own_length, dim)).mul_(scaling)
    own = own.view(rows, kv, g, T, own_length).add_(own_bias.view(rows, 1, 1, -1, own_length))
    weights = torch.softmax(torch.cat([prefix, own], dim=-1), dim=-1).to(prefix_v.dtype)
    to_prefix, to_own = weights.split([prefix_length, own_length], dim=-1)
    to_prefix = to_prefix.reshape(groups, m, kv, g, T, prefix_length).permute(0, 2, 1, 3, 4, 5)
    out = torch.bmm(to_prefix.reshape(groups * kv, m * g * T, prefix_length),
                    prefix_v.reshape(groups * kv, prefix_length, dim))
    out = out.view(groups, kv, m, g, T, dim).permute(0, 2, 1, 3, 4, 5).reshape(rows, kv, g, T, dim)
    out = out + torch.bmm(to_own.reshape(rows * kv, g * T, own_length),
                          own_v.reshape(rows * kv, own_length, dim)).view(rows, kv, g, T, dim)
    return out.reshape(rows, heads, T, dim)


class GroupSlice:
    """Groups [first, last) of a grouped bucket (views), for prefilling the rows' own prompt tokens in parts."""

    def __init__(self, buf: GroupedBuffers, first: int, last: int):
        m = buf.members
        self.members = m
        self.prefix_keys = [k[first:last] for k in buf.prefix_keys]
        self.prefix_values = [v[first:last] for v in buf.prefix_values]
        self.keys = [k[first * m:last * m] for k in buf.keys]
        self.values = [v[first * m:last * m] for v in buf.values]
        self.prefix_bias = buf.prefix_bias[first:last]
