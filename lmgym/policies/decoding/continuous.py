"""Continuous play: episodes go on inside one fast-decoder call, action after action, with no round barrier.

`FastDecoder.generate` samples one action per row and returns; an engine round then waits for its slowest
row, steps the env, and the next call prefills every context again. `play` keeps each row in the decoder
instead. At every host sync (`sync_every` steps) the rows whose action ended (a stop string, EOS or the
per-action cap) are handed to `on_actions` together; it steps the env for them and answers, for each, a
`Continuation` or None. A continued row goes on in place: its tokens sampled past the action's end are
dropped (their key/value columns are masked out), the action's last token is fed again at the next column,
then the env's injected tokens (at most FORCED_TOKENS are fed one per step, their samples discarded; a longer
turn, up to `fed_turn_tokens`, is fed in one pass over the rows that have one, extension.py), and it samples
its next action, keyed by the continuation's key and the token's index in the action, as a new call would. The
other rows never wait for it. A row whose episode ended, whose injected turn is longer, or for which the bucket
has no columns left for that turn and a whole action, leaves the call (the engine plays it on in the next).
Rows that left are compacted away as in `generate`.

So each token is sampled from the same context, with the same key, as the round-by-round path samples it:
tests compare the two token for token.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch.profiler import record_function

from lmgym.buffers.batch import copy_to
from lmgym.policies.decoding.extension import extend_rows
from lmgym.policies.decoding.generation import (
    Generation,
    RowKeys,
    StopChecker,
    StopLists,
    _eos_ids,
    stop_lists,
    to_device,
)
from lmgym.policies.decoding.shared_prefix import GroupedBuffers, round_groups
from lmgym.policies.decoding.step import _NO_PROMPT, FORCED_TOKENS, Sampling, continue_and_record, round_batch
from lmgym.policies.decoding.stop_tokens import StopTokens
from lmgym.policies.prompting import pad_id as padding_id


@dataclass(frozen=True)
class Continuation:
    """How a row's episode goes on after the action the env just stepped: the tokens the env wrote after it
    (fed, never sampled), the next action's stop strings and its RowKeys key (None without keyed noise)."""

    injected: list[int]
    stop: list[str] | None
    key: int | None = None


JOIN_PASS_TOKENS = 65536  # padded prompt tokens fed in one pass when prompts join a call (bounds its memory)
JOIN_PASS_ROWS = 128  # rows fed in one such pass (each pass copies its rows' whole key/value rows: extension.py)
# a bucket this small is a call's tail: its rows wait for the host at each action's end while the GPU has little
# else to do, so `FastDecoder.tail_sync_every` (when set) syncs more often there
TAIL_ROWS = 32
JOIN_AT_ONCE = 64  # prompts join once this many rows (or an eighth of the bucket) are free, or none plays

# the ended actions of one host sync: (prompt index, its action) -> for each, a Continuation or None (it leaves)
OnActions = Callable[[list[tuple[int, Generation]]], list[Continuation | None]]


@torch.no_grad()
def play(decoder, tokenizer, prompts: list[list[int]], max_new_tokens: int, columns: int, temperature: float,
         top_p: float, stop: StopLists, generator: torch.Generator | RowKeys | None, on_actions: OnActions,
         fed_turn_tokens: int = FORCED_TOKENS) -> None:
    """Play the episodes of `prompts` (one row each) on `decoder` (a FastDecoder), each action at most
    `max_new_tokens`, each row within `columns` key/value columns past its prompt (then it leaves at its next
    action's start); an env turn longer than `fed_turn_tokens` (and FORCED_TOKENS) makes its row leave; see the
    module docstring."""
    columns = max(columns, max_new_tokens + 2 * decoder.sync_every + 2)
    rows = min(decoder.max_batch, decoder._rows_that_fit(max(map(len, prompts)) + columns))
    stops = stop_lists(stop, len(prompts))
    pending = sorted(range(len(prompts)), key=prompts.__getitem__)  # a prompt's rows together, as in generate
    while pending:  # a call's first `rows` prompts start it; the rest join as rows free up, or start the next
        part = pending
        noise = RowKeys([generator.keys[i] for i in part]) if isinstance(generator, RowKeys) else generator

        def answer(ended, part=part):
            return on_actions([(part[i], generation) for i, generation in ended])

        chunk = _Play(decoder, tokenizer, [prompts[i] for i in part], rows, max_new_tokens, columns, temperature,
                      top_p, [stops[i] for i in part], noise, answer, max(fed_turn_tokens, FORCED_TOKENS))
        chunk.run()
        pending = [part[i] for i in chunk.waiting]


class _Play:
    """One chunk of `play`: the bucket, the host's view of each bucket row, and the loop.

    With `overlap` (CUDA), a sync copies what the host needs (each row's action so far, its count and flags) and
    launches the next steps before the host reads it, so the GPU decodes while the host steps the env; the rows
    that ended then wait one more sync, and their new actions are set up behind the steps in flight."""

    def __init__(self, decoder, tokenizer, prompts, rows, max_new_tokens, columns, temperature, top_p, stops,
                 generator, on_actions: OnActions, fed_turn_tokens: int):
        self.decoder, self.tokenizer, self.prompts, self.on_actions = decoder, tokenizer, prompts, on_actions
        self.max_new_tokens, self.fed_turn_tokens = max_new_tokens, fed_turn_tokens
        self.overlap = decoder.overlap_host
        decoder._refresh_weights()
        decoder._forget_moved_weights()
        self.pad_id = padding_id(tokenizer)
        self.sampling = Sampling(temperature, top_p, generator, _eos_ids(tokenizer, decoder.model), self.pad_id,
                                 decoder.device, continuous=True, per_row=fed_turn_tokens > FORCED_TOKENS)
        self.stopper = StopChecker(tokenizer, stops, len(prompts))
        self.marks: StopTokens | None = None
        self.context = [len(p) for p in prompts]  # tokens before each row's current action
        self.checked = [0] * len(prompts)  # tokens of its current action checked for stop strings
        self.generator = generator
        first = min(rows, len(prompts))
        self.buf = self._start(prompts[:first], columns, generator)
        self.column = int(self.buf.column)  # the next step's input column (the host's count)
        self.length = self.buf.valid.shape[1]
        self.row_prompt: list[int | None] = [i if i < first else None for i in self.buf.rows.tolist()]
        self.shift = [0] * len(self.row_prompt)  # each bucket row's columns ahead of `column` (extension.py)
        # prompts not started yet: they join as rows free up (`_admit`; a bucket per row only), else the next call
        self.waiting: list[int] = list(range(first, len(prompts)))
        self.refill = decoder.join_waiting and not isinstance(self.buf, GroupedBuffers)

    def _start(self, prompts: list[list[int]], columns: int, generator):
        buf, logits = self.decoder._start_call(prompts, columns, generator, self.pad_id)
        buf.count.zero_()
        buf.forced_at.zero_()
        buf.forced_end.zero_()
        buf.action_cap.fill_(self.max_new_tokens)
        continue_and_record(buf, logits, self.sampling)  # token 0 of every row's first action
        return buf

    def run(self) -> None:
        self._launch()
        while True:
            snapshot = self._snapshot()
            launched = self._launch() if self.overlap else 0
            with record_function("lmgym.continue"):
                snapshot.wait()
                self._settle(snapshot)
                self._admit()
            if not any(p is not None for p in self.row_prompt):
                return
            if not self.overlap:
                launched = self._launch()
            if launched == 0:  # no column left: the rows still playing go on in the next call
                self._leave([r for r, p in enumerate(self.row_prompt) if p is not None])
                return
            self._shrink()

    def _launch(self) -> int:
        """Up to `sync_every` decode steps (`tail_sync_every` in a bucket of TAIL_ROWS rows or fewer), as many as the
        bucket has columns for; returns how many."""
        ahead = max((s for s, p in zip(self.shift, self.row_prompt) if p is not None), default=0)
        every = self.decoder.sync_every
        if len(self.row_prompt) <= TAIL_ROWS and self.decoder.tail_sync_every:
            every = min(every, self.decoder.tail_sync_every)
        steps = max(0, min(every, self.length - 1 - self.column - ahead))
        for _ in range(steps):
            with record_function("lmgym.decode"):
                self.decoder._step(self.buf, self.sampling)
        self.column += steps
        stats = self.decoder.stats
        stats["row_steps"] += steps * len(self.row_prompt)
        playing = steps * sum(p is not None for p in self.row_prompt)
        stats["playing_row_steps"] += playing
        if self.decoder.shape_steps is not None:
            self.decoder.shape_steps.setdefault(str(getattr(self.buf, "bucket_key", None)), [0, 0])[1] += playing
        return steps

    def _snapshot(self) -> _Snapshot:
        """Copies, to the host, of what a sync reads (asynchronous on CUDA: `wait()` before reading)."""
        buf, width = self.buf, self.max_new_tokens
        parts = [buf.count, buf.done, buf.reason_eos, buf.out_tokens[:, :width], buf.out_logp[:, :width]]
        if buf.count.device.type != "cuda":
            return _Snapshot(*(t.clone() for t in parts), None)
        copies = [t.to("cpu", non_blocking=True) for t in parts]
        event = torch.cuda.Event()
        event.record()
        return _Snapshot(*copies, event)

    # ------------------------------------------------------------------ the host's part of a sync
    def _settle(self, snap: _Snapshot) -> None:
        """Find the rows whose action ended by the snapshot, hand them to `on_actions`, and set each going on
        its next action or retire it."""
        active = [r for r, p in enumerate(self.row_prompt) if p is not None]
        if not active:
            return
        count, done, eos = snap.count.tolist(), snap.done.tolist(), snap.reason_eos.tolist()
        ends = self._stop_ends(snap, active, count)
        ended: list[tuple[int, int, int, str]] = []  # (bucket row, prompt, tokens in the action, finish reason)
        for row in active:
            p = self.row_prompt[row]
            if row in ends:
                ended.append((row, p, ends[row], "stop"))
            elif done[row]:
                ended.append((row, p, count[row], "eos" if eos[row] else "length"))
            else:
                self.checked[p] = count[row]
        if not ended:
            return
        rows = torch.tensor([row for row, *_ in ended])
        tokens, logps = snap.tokens[rows].tolist(), snap.logps[rows].tolist()
        actions = []
        for (_, p, e, reason), toks, lps in zip(ended, tokens, logps):
            text = self.tokenizer.decode(toks[:e], skip_special_tokens=True)
            actions.append((p, Generation(self.prompts[p], toks[:e], lps[:e], text, reason)))
        continuations = self.on_actions(actions)
        self._continue_or_leave(ended, tokens, continuations)

    def _stop_ends(self, snap: _Snapshot, active: list[int], count: list[int]) -> dict[int, int]:
        """bucket row -> tokens of its action up to and including the first stop-string completion among its
        tokens not checked before."""
        if not self.stopper.any:
            return {}
        stops = {s for r in active for s in self.stopper.stops[self.row_prompt[r]]}
        known = self.marks.stops if self.marks is not None else frozenset()
        if self.marks is None or not stops <= known:
            self.marks = StopTokens(self.tokenizer, stops | known, torch.device("cpu"))
        width = max((count[r] for r in active), default=0)
        if width == 0:
            return {}
        index = torch.tensor(active)
        window = snap.tokens[index, :width]
        column = torch.arange(width)
        checked = torch.tensor([self.checked[self.row_prompt[r]] for r in active])
        inside = (column >= checked[:, None]) & (column < snap.count[index][:, None])
        candidates: dict[int, list[int]] = {}
        for j, c in self.marks.positions(window, inside):
            candidates.setdefault(active[j], []).append(c + 1)
        ends = {}
        for row, marked in candidates.items():
            toks = snap.tokens[row, :max(marked)].tolist()
            for end in marked:
                if self.stopper.hit(self.row_prompt[row], toks[:end]):
                    ends[row] = end
                    break
        return ends

    def _continue_or_leave(self, ended, tokens, continuations) -> None:
        """Set each ended row going on its next action (see the module docstring), or retire it."""
        buf, column = self.buf, self.column
        need = self.max_new_tokens + 2 * self.decoder.sync_every + 2  # steps to its next action's end and its sync
        go: list[_Going] = []
        leave = []
        for (row, p, e, _), toks, cont in zip(ended, tokens, continuations):
            if (cont is not None and len(cont.injected) <= self.fed_turn_tokens
                    and column + self.shift[row] + len(cont.injected) + need < self.length - 1):
                go.append(_Going(row, p, e, toks[e - 1], cont, len(cont.injected) > FORCED_TOKENS))
            else:
                leave.append(row)
        if leave:
            self._leave(leave)
        if not go:
            return
        device = buf.rows.device
        index = to_device([g.row for g in go], device)
        last = to_device([g.end - 1 for g in go], device)
        start = buf.sample_column[index, last] + 1  # where the action's last token went in (or would have)
        stale = torch.arange(self.length, device=device)[None, :] >= start[:, None]
        buf.valid[index] = buf.valid[index] & ~stale
        self._feed_long_turns([g for g in go if g.long])
        # each row's next input: the action's last token again (a short turn then fed one a step), or the last token
        # of a long turn fed in one pass just now
        buf.valid.index_put_((index, to_device([column + self.shift[g.row] for g in go], device)),
                             torch.ones((), dtype=torch.bool, device=device))
        buf.shift[index] = to_device([self.shift[g.row] for g in go], device)
        buf.tokens[index] = to_device([g.cont.injected[-1] if g.long else g.last for g in go], device)
        buf.positions[index] = to_device(
            [self.context[g.prompt] + g.end - 1 + (len(g.cont.injected) if g.long else 0) for g in go], device)
        forced = torch.zeros((len(go), buf.forced.shape[1]), dtype=torch.long)
        for j, g in enumerate(go):
            if not g.long:
                forced[j, :len(g.cont.injected)] = torch.tensor(g.cont.injected, dtype=torch.long)
        buf.forced[index] = copy_to(forced, device)
        _start_actions(buf, index)
        buf.forced_end[index] = to_device([0 if g.long else len(g.cont.injected) for g in go], device)
        if self.sampling.keyed:
            buf.row_keys[index] = to_device([g.cont.key for g in go], device)
        self.decoder.stats["fed_tokens"] += sum(len(g.cont.injected) for g in go if not g.long)
        for g in go:
            self.context[g.prompt] += g.end + len(g.cont.injected)
            self.checked[g.prompt] = 0
            self.stopper.set_row(g.prompt, g.cont.stop)

    def _admit(self) -> None:
        """Start waiting prompts in the bucket's free rows (per-row buckets): each prompt's tokens but the last are
        fed in one pass (extension.py) into the columns just before the next step's, so a row needs no more
        columns than a call started with it; the last token is the row's next input, and the step that feeds it
        samples the first token of its first action, keyed as in a new call. A prompt joins only where there is
        room behind for it and ahead for a whole action; the others start the next call."""
        if not (self.refill and self.waiting):
            return
        need = self.max_new_tokens + 2 * self.decoder.sync_every + 2
        free = [r for r, p in enumerate(self.row_prompt) if p is None]
        few = len(free) < min(JOIN_AT_ONCE, len(self.row_prompt) // 8) and len(free) < len(self.row_prompt)
        if few or self.column + need >= self.length - 1:
            return  # few rows free: they wait to join together (a pass per few rows costs the host more than it gains)
        joining = [i for i in self.waiting if len(self.prompts[i]) - 1 <= self.column][:len(free)]
        if not joining:
            return
        taken = set(joining)
        self.waiting = [i for i in self.waiting if i not in taken]
        rows = free[:len(joining)]
        buf, device, column = self.buf, self.buf.rows.device, self.column
        index = to_device(rows, device)
        buf.valid.index_fill_(0, index, False)
        self._feed_prompts(rows, joining)
        buf.valid[:, column].index_fill_(0, index, True)
        buf.tokens[index] = to_device([self.prompts[i][-1] for i in joining], device)
        buf.positions[index] = to_device([len(self.prompts[i]) - 1 for i in joining], device)
        buf.rows[index] = to_device(joining, device)
        buf.shift.index_fill_(0, index, 0)
        buf.forced_end.index_fill_(0, index, 0)
        _start_actions(buf, index)
        if self.sampling.keyed:
            buf.row_keys[index] = self.generator.row_keys(to_device(joining, device))
        for r, i in zip(rows, joining):
            self.row_prompt[r], self.shift[r] = i, 0
        self.decoder.stats["rows_joined"] += len(joining)

    def _feed_prompts(self, rows: list[int], joining: list[int]) -> None:
        """Feed each joining prompt's tokens but the last into its row, in the columns that end at `column`: one
        row per distinct prompt (k rollouts from one prefix are fed once; the others copy its keys and values), in
        passes of at most JOIN_PASS_TOKENS padded tokens and JOIN_PASS_ROWS rows."""
        buf, device = self.buf, self.buf.rows.device
        first_row: dict[tuple[int, ...], int] = {}
        fed: list[tuple[int, int]] = []  # (row, prompt) fed by a forward pass
        copies: list[tuple[int, int, int]] = []  # (row, the row fed with the same prompt, tokens copied)
        for row, i in zip(rows, joining):
            prompt = tuple(self.prompts[i][:-1])
            if not prompt:
                continue
            source = first_row.setdefault(prompt, row)
            if source == row:
                fed.append((row, i))
            else:
                copies.append((row, source, len(prompt)))
        width = max((len(self.prompts[i]) for _, i in fed), default=1)
        per_pass = max(1, min(JOIN_PASS_TOKENS // width, JOIN_PASS_ROWS))
        with record_function("lmgym.extend"):
            for start in range(0, len(fed), per_pass):
                part = fed[start:start + per_pass]
                extend_rows(self.decoder, buf, [r for r, _ in part], [self.prompts[i][:-1] for _, i in part],
                            [0] * len(part), [self.column - len(self.prompts[i]) + 1 for _, i in part], self.pad_id)
        if copies:
            target, source = to_device([c[0] for c in copies], device), to_device([c[1] for c in copies], device)
            for cache in buf.keys + buf.values:
                cache.index_copy_(0, target, cache.index_select(0, source))
            buf.valid[target] = buf.valid[source]
            self.decoder.stats["prefill_tokens_shared"] += sum(c[2] for c in copies)

    def _feed_long_turns(self, going: list[_Going]) -> None:
        """Feed each row's action's last token and all but the last token of its long turn in one pass
        (extension.py), at the row's own next columns; the row's shift grows by the turn's length."""
        if not going:
            return
        with record_function("lmgym.extend"):
            extend_rows(self.decoder, self.buf, [g.row for g in going],
                        [[g.last, *g.cont.injected[:-1]] for g in going],
                        [self.context[g.prompt] + g.end - 1 for g in going],
                        [self.column + self.shift[g.row] for g in going], self.pad_id)
        for g in going:
            self.shift[g.row] += len(g.cont.injected)

    def _leave(self, rows: list[int]) -> None:
        """Retire bucket rows `rows`: finished, sampling for no prompt (compaction drops them)."""
        index = to_device(rows, self.buf.rows.device)
        self.buf.rows.index_fill_(0, index, _NO_PROMPT)
        self.buf.done.index_fill_(0, index, True)
        self.buf.tokens.index_fill_(0, index, self.pad_id)
        for row in rows:
            self.row_prompt[row] = None

    def _shrink(self) -> None:
        """Move the rows still playing into a smaller bucket once they fill at most half of this one (as
        `FastDecoder._shrink`, from the host's view of the rows: no sync)."""
        d, buf = self.decoder, self.buf
        need = self.max_new_tokens + 2 * d.sync_every + 2
        if self.refill and self.waiting and self.column + need < self.length - 1:  # free rows: for those waiting
            return
        playing = [r for r, p in enumerate(self.row_prompt) if p is not None]
        device = buf.rows.device
        if isinstance(buf, GroupedBuffers):
            m = buf.members
            groups = sorted({r // m for r in playing})
            smaller = round_groups(len(groups))
            if smaller >= buf.groups:
                return
            keep = groups + groups[:1] * (smaller - len(groups))
            self.buf = d._compact_groups(buf, to_device(groups, device), smaller, self.pad_id)
            rows = [g * m + j for g in keep for j in range(m)]
            self.row_prompt = [self.row_prompt[r] if k < len(groups) * m else None for k, r in enumerate(rows)]
            self.shift = [self.shift[r] for r in rows]
            return
        smaller = round_batch(len(playing))
        if smaller >= len(buf.rows):
            return
        keep = playing + playing[:1] * (smaller - len(playing))
        self.buf = d._compact(buf, smaller, self.length, len(playing), self.pad_id,
                              keep=to_device(keep, device))
        self.row_prompt = [self.row_prompt[r] if k < len(playing) else None for k, r in enumerate(keep)]
        self.shift = [self.shift[r] for r in keep]


def _start_actions(buf, index: torch.Tensor) -> None:
    """Rows `index` sample a new action from their next step: none of it sampled, no injected token fed yet, not
    finished (index_fill_: a number assigned by index would wait for the GPU, see `to_device`)."""
    for name, value in (("forced_at", 0), ("count", 0), ("done", False), ("reason_eos", False)):
        getattr(buf, name).index_fill_(0, index, value)


class _Going(NamedTuple):
    """A bucket row whose episode goes on: its prompt, the tokens of the action that ended, that action's last
    token, how it goes on, and whether its env turn is long (fed in one pass: extension.py)."""

    row: int
    prompt: int
    end: int
    last: int
    cont: Continuation
    long: bool


@dataclass
class _Snapshot:
    """What one sync reads of the bucket, on the host (`event`: when the asynchronous copies are done)."""

    count: torch.Tensor
    done: torch.Tensor
    reason_eos: torch.Tensor
    tokens: torch.Tensor
    logps: torch.Tensor
    event: object

    def wait(self) -> None:
        if self.event is not None:
            self.event.synchronize()


def play_columns(max_new_tokens: int, actions: int, sync_every: int, injected: int = FORCED_TOKENS) -> int:
    """Key/value columns past the prompt that `actions` whole actions take at most, each with its feed-back
    token, `injected` tokens of the env's turn and the steps to the next sync, on the length ladder of 64."""
    per_action = max_new_tokens + max(injected, FORCED_TOKENS) + sync_every + 2
    return int(math.ceil(per_action * max(actions, 1) / 64) * 64)
