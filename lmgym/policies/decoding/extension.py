"""Extending some rows' key/value cache by many tokens in one pass, in the middle of a continuous-play call.

In continuous play (continuous.py) a row whose env wrote a turn of at most FORCED_TOKENS tokens is fed them one
per decode step. A longer turn (a search result, a critic's reply) would take that many steps of the whole
bucket, so `extend_rows` runs it in one eager forward pass over those rows alone: their keys and values (and, in
a grouped bucket, their groups' prefixes) are gathered, the new tokens attend to them and causally to each other,
and the new keys and values are written back into each row's own next columns. Those rows are then ahead of the
others; the loop state's per-row `shift` says by how much, and every later step writes each row at its own
column (step.row_columns). The turn's last token stays the row's next input: the decode step that feeds it
samples the next action's first token, as a fed token of the short path does.
"""
from __future__ import annotations

import torch

from lmgym.policies.decoding.generation import right_pad, to_device
from lmgym.policies.decoding.shared_prefix import GroupedBuffers

TOKEN_BUCKET = 64  # a pass's tokens per row are padded to a multiple of this


class _GatheredRows:
    """Copies of some rows' key/value buffers (and, grouped, of their groups' prefixes, one group per row)."""

    def __init__(self, buf, index: torch.Tensor):
        self.keys = [k.index_select(0, index) for k in buf.keys]
        self.values = [v.index_select(0, index) for v in buf.values]
        if isinstance(buf, GroupedBuffers):
            groups = torch.div(index, buf.members, rounding_mode="floor")
            self.members = 1
            self.prefix_keys = [k.index_select(0, groups) for k in buf.prefix_keys]
            self.prefix_values = [v.index_select(0, groups) for v in buf.prefix_values]
            self.prefix_bias = buf.prefix_bias.index_select(0, groups)


@torch.no_grad()
def extend_rows(decoder, buf, rows: list[int], inputs: list[list[int]], positions: list[int],
                columns: list[int], pad_id: int) -> None:
    """Feed bucket row rows[j] the tokens inputs[j] (non-empty) at positions positions[j].. and key/value columns
    columns[j].. of `buf` (a FastDecoder bucket), in one pass; those columns become attendable. The caller makes
    sure each row's columns fit the bucket (the pass also writes junk, never attendable, up to TOKEN_BUCKET - 1
    columns past a row's tokens)."""
    lengths = list(map(len, inputs))
    device, length = buf.valid.device, buf.valid.shape[1]
    # shapes from a small set (cuDNN plans its attention, and the compiled layers guard, per shape): rows up to a
    # power of two (the first row again: the same writes twice), tokens up to a multiple of TOKEN_BUCKET
    extra = (1 << (len(rows) - 1).bit_length()) - len(rows)
    rows, positions, columns = rows + rows[:1] * extra, positions + positions[:1] * extra, columns + columns[:1] * extra
    width = -(-max(lengths) // TOKEN_BUCKET) * TOKEN_BUCKET
    index = to_device(rows, device)
    ids, _ = right_pad([row + [pad_id] * (width - len(row)) for row in inputs + inputs[:1] * extra], pad_id, device)
    widths = to_device(lengths + lengths[:1] * extra, device)
    offsets = torch.arange(ids.shape[1], device=device)
    first = to_device(columns, device)
    written = (first[:, None] + offsets).clamp(max=length - 1)  # a padding token past a row's end: junk, masked
    # query t of row j attends the row's attendable columns and its new columns up to its own
    key_columns = torch.arange(length, device=device)
    new = ((key_columns >= first[:, None, None]) & (key_columns <= first[:, None, None] + offsets[None, :, None]))
    attendable = buf.valid.index_select(0, index)
    mask = (attendable[:, None, :] | new)[:, None]
    gathered = _GatheredRows(buf, index)
    with decoder._autocast():
        decoder._forward(ids, to_device(positions, device)[:, None] + offsets, gathered,
                         written, mask, last=widths - 1)
    for full, part in zip(buf.keys + buf.values, gathered.keys + gathered.values):
        full.index_copy_(0, index, part)
    decoder.stats["extended_tokens"] += sum(lengths)
    fed = (key_columns >= first[:, None]) & (key_columns < (first + widths)[:, None])
    buf.valid[index] = attendable | fed
