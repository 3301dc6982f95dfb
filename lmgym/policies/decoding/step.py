"""The fast decoder's per-step sampling and bookkeeping, on device tensors only (policies/decoding/fast.py).

Between host syncs the decode loop's state lives in one bucket's tensors (`LoopState`): the index of the
token to sample next, each row's next input token, its position and KV column, the tokens and log-probs
sampled so far (per bucket row, one column per token), and whether and why each row finished.
`sample_and_record` samples a step's tokens and updates that state without a host sync or a Python number
that changes from step to step, so on CUDA it is captured with the model's forward pass into the bucket's
graph and each replay is a whole decode step; on the CPU it runs eagerly. `Sampling` holds what stays fixed
for one `generate` call, and the key a captured graph is valid for. `Outputs` collects each prompt's
results as its row leaves the bucket (compaction) or the loop ends.
"""
from __future__ import annotations

import torch

from lmgym.policies.decoding.generation import RowKeys, sample_step

_NO_PROMPT = torch.iinfo(torch.long).max  # `rows` of duplicate filler rows
FORCED_TOKENS = 16  # injected tokens a row of continuous play feeds one a step (longer: one pass, extension.py)


class Sampling:
    """The sampling settings of one `generate` call, with the eos ids on the device."""

    def __init__(self, temperature: float, top_p: float, generator: torch.Generator | RowKeys | None,
                 eos_ids: list[int], pad_id: int, device: torch.device, continuous: bool = False,
                 per_row: bool = False):
        self.temperature, self.top_p, self.generator, self.pad_id = temperature, top_p, generator, pad_id
        self.continuous = continuous  # episodes played on in the call (policies/decoding/continuous.py)
        self.per_row = per_row  # rows may run ahead of `column` (extension.py): each writes at its own column
        self.keyed = isinstance(generator, RowKeys)
        self.eos = torch.tensor(eos_ids, device=device)
        if temperature <= 0:  # greedy: no noise
            noise = None
        elif self.keyed:  # each row's key is read from the loop state: every RowKeys shares a graph
            noise = "row keys"
        else:  # the graph advances the generator it was captured with (the default one for None)
            noise = generator
        self.key = (temperature if temperature > 0 else 0.0, top_p if temperature > 0 else 1.0, noise,
                    tuple(eos_ids), pad_id, continuous, per_row)

    @property
    def noise_generator(self) -> torch.Generator | None:
        """The torch.Generator the step draws from (None: the default one, or none drawn)."""
        return None if self.keyed or self.temperature <= 0 else self.generator


class LoopState:
    """The decode loop's tensors for one bucket of `batch` rows and `length` KV columns."""

    _PER_ROW = ("valid", "tokens", "positions", "out_tokens", "out_logp", "lengths", "done", "reason_eos",
                "rows", "row_keys", "count", "sample_column", "forced", "forced_at", "forced_end", "shift")

    def __init__(self, batch: int, length: int, device: torch.device):
        long = {"dtype": torch.long, "device": device}
        self.valid = torch.zeros((batch, length), dtype=torch.bool, device=device)  # key columns to attend
        self.tokens = torch.zeros(batch, **long)  # each row's next input token
        self.positions = torch.zeros(batch, **long)  # its position
        self.column = torch.zeros(1, **long)  # its KV column (the same for every row)
        self.step = torch.zeros(1, **long)  # index of the token sampled next
        self.out_tokens = torch.zeros((batch, length), **long)  # sampled tokens by index (pad once finished)
        self.out_logp = torch.zeros((batch, length), dtype=torch.float32, device=device)
        self.lengths = torch.zeros(batch, **long)
        self.done = torch.zeros(batch, dtype=torch.bool, device=device)
        self.reason_eos = torch.zeros(batch, dtype=torch.bool, device=device)
        self.rows = torch.zeros(batch, **long)  # the prompt each row samples for (>= the prompt count: none)
        self.row_keys = torch.zeros(batch, **long)  # with RowKeys: that prompt's key
        # continuous play only (policies/decoding/continuous.py): tokens of the row's current action so far, the
        # input column each of them was sampled at, the injected tokens to feed before its next action samples,
        # the next of them and their end; the most tokens an action samples
        self.count = torch.zeros(batch, **long)
        self.sample_column = torch.zeros((batch, length), **long)
        self.forced = torch.zeros((batch, FORCED_TOKENS), **long)
        self.forced_at = torch.zeros(batch, **long)
        self.forced_end = torch.zeros(batch, **long)
        self.action_cap = torch.zeros(1, **long)
        # columns past `column` that a row's keys and values go in: an injected turn fed in one pass moves its row
        # ahead of the others (policies/decoding/extension.py)
        self.shift = torch.zeros(batch, **long)

    def start(self, count: int, positions: torch.Tensor, column: int, max_new_tokens: int,
              generator: torch.Generator | RowKeys | None) -> None:
        """Begin a call: rows [0, count) sample for the prompts, the rest are finished padding; `positions`
        are those of each row's last prompt token and `column` the prompts' last KV column, shared by every row
        (the first sampled token goes in the next one; `valid`, set by the prefill, masks each row's padding)."""
        self.positions.copy_(positions)
        self.column.fill_(column)
        self.step.zero_()
        self.shift.zero_()
        self.lengths.fill_(max_new_tokens)
        self.done.zero_()
        self.done[count:] = True
        self.reason_eos.zero_()
        self.rows.copy_(torch.arange(len(self.rows), device=self.rows.device))
        if isinstance(generator, RowKeys):
            self.row_keys.copy_(generator.row_keys(self.rows))

    def select(self, source: LoopState, keep: torch.Tensor, live_count: int, pad_id: int) -> None:
        """Take `source`'s rows `keep` (compaction into a smaller bucket); rows from `live_count` on are
        duplicate fillers, marked finished and for no prompt."""
        for name in self._PER_ROW:
            torch.index_select(getattr(source, name), 0, keep, out=getattr(self, name))
        self.step.copy_(source.step)
        self.column.copy_(source.column)
        self.action_cap.copy_(source.action_cap)
        self.rows[live_count:] = _NO_PROMPT
        self.done[live_count:] = True
        self.tokens[live_count:] = pad_id

    def snapshot(self) -> dict[str, torch.Tensor]:
        """Copies of every tensor, for `restore` (warming up a step before its capture changes the state)."""
        return {name: getattr(self, name).clone() for name in (*self._PER_ROW, "column", "step", "action_cap")}

    def restore(self, saved: dict[str, torch.Tensor]) -> None:
        for name, value in saved.items():
            getattr(self, name).copy_(value)


@torch.no_grad()
def sample_and_record(state: LoopState, logits: torch.Tensor, sampling: Sampling) -> None:
    """Sample token number `state.step` of every row from `logits` [batch, vocab], record it (finished rows
    record pad and 0), finish rows that sampled EOS, and set up the next input: the token (pad once
    finished), its position, its KV column (attendable from now on); then advance the step."""
    tokens, logp = sample_step(logits, sampling.temperature, sampling.top_p, sampling.noise_generator,
                               state.row_keys if sampling.keyed else None, state.step)
    live = ~state.done
    state.out_tokens.index_copy_(1, state.step, torch.where(live, tokens, sampling.pad_id)[:, None])
    state.out_logp.index_copy_(1, state.step, torch.where(live, logp, 0.0)[:, None])
    hit_eos = live & (tokens[:, None] == sampling.eos).any(-1)
    state.lengths.copy_(torch.where(hit_eos, state.step + 1, state.lengths))
    state.reason_eos.logical_or_(hit_eos)
    state.done.logical_or_(hit_eos)
    state.tokens.copy_(torch.where(state.done, sampling.pad_id, tokens))
    state.positions.add_(1)
    state.column.add_(1)
    state.valid.index_fill_(1, state.column, True)
    state.step.add_(1)


@torch.no_grad()
def continue_and_record(state: LoopState, logits: torch.Tensor, sampling: Sampling) -> None:
    """`sample_and_record` for continuous play (policies/decoding/continuous.py), where a row plays action after
    action: a row with injected tokens left to feed takes the next one as its input and discards its sample;
    otherwise it samples token number `count` of its action (keyed by that index), recorded at that index with the
    column it was sampled at, and pauses (done) at EOS or at `action_cap` tokens until the host sets it going."""
    tokens, logp = sample_step(logits, sampling.temperature, sampling.top_p, sampling.noise_generator,
                               state.row_keys if sampling.keyed else None, state.count)
    forcing = state.forced_at < state.forced_end
    take = ~state.done & ~forcing
    index = state.count.clamp(max=state.out_tokens.shape[1] - 1)[:, None]
    state.out_tokens.scatter_(1, index, torch.where(take, tokens, state.out_tokens.gather(1, index)[:, 0])[:, None])
    state.out_logp.scatter_(1, index, torch.where(take, logp, state.out_logp.gather(1, index)[:, 0])[:, None])
    here = row_columns(state)
    state.sample_column.scatter_(1, index, torch.where(take, here, state.sample_column.gather(1, index)[:, 0])[:, None])
    count = state.count + take.long()
    hit_eos = take & (tokens[:, None] == sampling.eos).any(-1)
    state.lengths.copy_(torch.where(hit_eos, count, state.lengths))
    state.reason_eos.logical_or_(hit_eos)
    state.done.logical_or_(hit_eos | (take & (count >= state.action_cap)))
    state.count.copy_(count)
    fed = state.forced.gather(1, state.forced_at.clamp(max=FORCED_TOKENS - 1)[:, None])[:, 0]
    state.forced_at.add_(forcing.long())
    state.tokens.copy_(torch.where(forcing, fed, torch.where(state.done, sampling.pad_id, tokens)))
    state.positions.add_(1)
    state.column.add_(1)
    state.valid.scatter_(1, row_columns(state)[:, None], True)
    state.step.add_(1)


def row_columns(state: LoopState) -> torch.Tensor:
    """Each row's input column in continuous play, `column` + its `shift` [batch] (a row that left the call may run
    past the bucket: it writes in the last column, which no row that plays on reaches)."""
    return (state.column + state.shift).clamp(max=state.valid.shape[1] - 1)


class Outputs:
    """Each prompt's sampled tokens, log-probs, length and EOS flag, taken from the loop state's rows."""

    def __init__(self, count: int, width: int, pad_id: int, device: torch.device):
        self.tokens = torch.full((count, width), pad_id, dtype=torch.long, device=device)
        self.logp = torch.zeros((count, width), device=device)
        self.lengths = torch.zeros(count, dtype=torch.long, device=device)  # 0 until taken
        self.reason_eos = torch.zeros(count, dtype=torch.bool, device=device)

    def take(self, state: LoopState, mask: torch.Tensor) -> None:
        """Copy the rows selected by `mask` (rows that sample for a prompt) from `state`."""
        src = mask.nonzero().squeeze(-1)
        dst = state.rows[src]
        width = self.tokens.shape[1]
        self.tokens[dst] = state.out_tokens[src, :width]
        self.logp[dst] = state.out_logp[src, :width]
        self.lengths[dst] = state.lengths[src]
        self.reason_eos[dst] = state.reason_eos[src]

    def emitted(self, state: LoopState, count: int, upto: int) -> int:
        """Tokens sampled so far for the prompts (rows taken and rows in `state`), `upto` per row at most."""
        in_state = torch.where(state.rows < count, state.lengths.clamp(max=upto), 0).sum()
        return int(self.lengths.sum() + in_state)

    def lists(self) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        """Per prompt: its tokens and log-probs cut at its length, and whether it ended with EOS."""
        lengths = self.lengths.cpu().tolist()
        tokens, logp = self.tokens.cpu().tolist(), self.logp.cpu().tolist()
        return ([row[:k] for row, k in zip(tokens, lengths)], [row[:k] for row, k in zip(logp, lengths)],
                self.reason_eos.cpu().tolist())


def round_batch(n: int) -> int:
    """Batch buckets: powers of two from 8 (few graphs to capture, at most 2x padding)."""
    return max(8, 1 << (max(n, 1) - 1).bit_length())
