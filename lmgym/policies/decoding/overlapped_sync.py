"""`FastDecoder.generate`'s loop with the host's part of each sync behind the next steps (`overlap_generate`).

The plain loop stops at every host sync (`sync_every` steps): it waits for the steps in flight, checks stop
strings, cancellations and progress, compacts the bucket when half its rows are done, and only then launches the
next steps, so the GPU idles while the host works. Here a sync copies what the host reads (each row's prompt,
done flag, length and its tokens since the last check) to pinned memory, launches the next `sync_every` steps,
and then reads the copy: the GPU decodes while the host checks. A row whose stop string or cancellation the host
finds has sampled on meanwhile; it is ended where the plain loop would have ended it (its length cut back, its
EOS flag cleared: an EOS sampled past the cut is not its end), so each row's tokens, log-probs and finish reason
are the plain loop's (with `RowKeys` noise or greedy: a row's tokens do not depend on its batch). With a
`torch.Generator`, the rows draw from one stream and compaction comes a sync later, so the draws differ.

Compaction reads the device's own count of live rows (a sync, only when the copy says half the rows are done): rows
that ended in the steps in flight are dropped too.

In the twenty-fifth session's profile of the RAG agent's GRPO (one H200), plain rounds ran 65% of its decode
steps through this loop, and the GPU idled 14% of the iteration in the sampler's host work and stop-string checks.
Off until a GPU run measures it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.profiler import record_function

from lmgym.policies.decoding.generation import StopChecker, to_device
from lmgym.policies.decoding.step import Outputs
from lmgym.policies.decoding.stop_tokens import StopTokens


@dataclass
class _View:
    """Host copies of what a sync reads: each bucket row's prompt, done flag and length, and its tokens in columns
    [first, upto) (`event`: when the asynchronous copies are done)."""

    rows: torch.Tensor
    done: torch.Tensor
    lengths: torch.Tensor
    tokens: torch.Tensor | None
    first: int
    event: object

    def wait(self) -> None:
        if self.event is not None:
            self.event.synchronize()


def _view(buf, first: int, upto: int, with_tokens: bool) -> _View:
    parts = [buf.rows, buf.done, buf.lengths] + ([buf.out_tokens[:, first:upto]] if with_tokens else [])
    if buf.rows.device.type != "cuda":
        copies, event = [t.clone() for t in parts], None
    else:
        copies = [t.to("cpu", non_blocking=True) for t in parts]
        event = torch.cuda.Event()
        event.record()
    return _View(copies[0], copies[1], copies[2], copies[3] if with_tokens else None, first, event)


class OverlappedLoop:
    """One `generate` call's decode loop (see the module docstring); `run` returns the final bucket, which rows
    stopped at a stop string and which were cancelled (by prompt)."""

    def __init__(self, decoder, tokenizer, n: int, max_new_tokens: int, stopper: StopChecker, outputs: Outputs,
                 on_tokens, cancelled_rows, pad_id: int):
        self.decoder, self.n, self.max_new_tokens, self.pad_id = decoder, n, max_new_tokens, pad_id
        self.stopper, self.outputs, self.on_tokens, self.cancelled_rows = stopper, outputs, on_tokens, cancelled_rows
        stops = {s for row in stopper.stops for s in row}
        self.marks = StopTokens(tokenizer, stops, torch.device("cpu")) if stopper.any else None
        self.lookback = max(stopper.lookbacks, default=1)
        self.stopped, self.cancelled = [False] * n, [False] * n
        self.t = 0  # tokens [0, t] of every row are sampled
        self.checked = 0  # columns checked for stop strings
        self.reported = self.taken = 0  # tokens reported to on_tokens; tokens of rows compaction dropped

    def run(self, buf, sampling) -> tuple:
        self._advance(buf, sampling, at_least_one=False)
        while True:
            upto, last = self.t + 1, self.t == self.max_new_tokens - 1
            view = _view(buf, max(0, self.checked - self.lookback), upto, self.marks is not None)
            if not last:
                self._advance(buf, sampling, at_least_one=True)  # the next steps run while the host reads the copy
            view.wait()
            live = self._settle(buf, view, upto)
            if last or live == 0:
                return buf, self.stopped, self.cancelled
            buf = self._shrink(buf, live)

    def _advance(self, buf, sampling, at_least_one: bool) -> None:
        """Decode steps up to the next sync (past the one at t, with `at_least_one`): each samples token t + 1."""
        every = self.decoder.sync_every
        while at_least_one or not ((self.t + 1) % every == 0 or self.t == self.max_new_tokens - 1):
            at_least_one = False
            with record_function("lmgym.decode"):
                self.decoder._step(buf, sampling)
            self.decoder.stats["row_steps"] += len(buf.rows)
            self.t += 1

    def _settle(self, buf, view: _View, upto: int) -> int:
        """End the rows the copy shows stopped or cancelled, report progress; returns the rows left live by it."""
        rows, done, lengths = view.rows.tolist(), view.done.tolist(), view.lengths.tolist()
        live = [i for i, (r, d) in enumerate(zip(rows, done)) if r < self.n and not d]
        ends: dict[int, int] = {}  # bucket row -> its length where it ends
        if self.marks is not None and live:
            with record_function("lmgym.stop_strings"):
                ends.update(self._stop_ends(view, live, rows))
        if self.cancelled_rows is not None:
            asked = set(self.cancelled_rows())
            for i in live:
                if i not in ends and rows[i] in asked:
                    self.cancelled[rows[i]] = True
                    ends[i] = min(lengths[i], upto)
        if ends:
            # asynchronous copies and index_fill_: a blocking copy or a number assigned by index would wait for the
            # steps in flight
            index = to_device(list(ends), buf.rows.device)
            buf.lengths.index_copy_(0, index, to_device(list(ends.values()), buf.rows.device))
            buf.done.index_fill_(0, index, True)
            buf.reason_eos.index_fill_(0, index, False)  # an EOS sampled past the cut (steps in flight) is not its end
            buf.tokens.index_fill_(0, index, self.pad_id)
        self.checked = upto
        if self.on_tokens is not None:
            emitted = self.taken + sum(min(ends.get(i, lengths[i]), upto) for i, r in enumerate(rows) if r < self.n)
            self.on_tokens(max(emitted - self.reported, 0))
            self.reported = max(emitted, self.reported)
        return len(live) - len(ends)

    def _stop_ends(self, view: _View, live: list[int], rows: list[int]) -> dict[int, int]:
        """bucket row -> tokens up to and including the first stop-string completion in the copy's columns from
        `checked` on."""
        first = view.first
        index = torch.tensor(live)
        window = view.tokens[index]
        columns = torch.arange(window.shape[1]) + first
        within = (columns >= self.checked)[None, :].expand_as(window)
        candidates: dict[int, list[int]] = {}
        for j, c in self.marks.positions(window, within):
            candidates.setdefault(live[j], []).append(first + c + 1)
        ends = {}
        for i, marked in candidates.items():
            toks = view.tokens[i, :max(marked) - first].tolist()
            for end in marked:
                if self.stopper.hit(rows[i], toks[:end - first]):
                    self.stopped[rows[i]] = True
                    ends[i] = end
                    break
        return ends

    def _shrink(self, buf, live: int):
        """The live rows in a smaller bucket once the copy says at most half of the rows are live
        (`FastDecoder._shrink`: it moves and counts the rows live on the device, some of which may have ended in the
        steps in flight); the dropped rows' tokens go to the outputs."""
        small = self.decoder._shrink(buf, self.outputs, self.n, live, self.pad_id)
        if small is not buf:
            self.taken = int(self.outputs.lengths.sum())
        return small
