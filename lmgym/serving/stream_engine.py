"""Continuous batching for the OpenAI routes: one decode loop whose batch requests join and leave at every step.

`StreamEngine.submit(job)` queues a `StreamJob` (a request: its prompts, `n` choices each, max_tokens, stop
strings, temperature, top_p, seed key, deadline). One worker thread loops over decoding steps; each step it

1. drops the rows of jobs nobody waits for (cancelled, client gone, past the deadline) and frees their rows;
2. admits waiting jobs while the batch has rows (`BatchSettings.max_batch_rows`): their prompts are prefilled
   (each distinct prompt once, a prefix they share, such as the chat template's system prompt, once for all) into
   a KV cache of their own, which is merged into the running one (both left-padded to one width);
3. samples one token for every row, each with its own temperature and top_p, keyed as `policy.sample` keys a
   row (`RowKeys`: row_key(request key, choice) and the token's index), so a seed gives the same choices
   whatever shares the batch;
4. hands each job the text decoded since its last update (`job.publish`), and retires rows that ended (EOS, a
   stop string, max_tokens); their cache rows are dropped and all-padding columns trimmed;
5. runs one forward pass of the sampled tokens for the rows still going.

The engine holds the server's model lock for a step at a time, so /generate, /solve and search batches
interleave with it between steps. Waiting jobs are bounded (`max_queue`: `QueueFull`, the 503).

Why this and not a library: transformers' continuous batching (`model.init_continuous_batching()`, 5.2x) runs on
the CPU, but samples with its own generator, so a request's `seed` would depend on what shares its batch; it
has no stop strings; and its paged cache is built for CUDA graphs. The fast decoder (policies/decoding/fast.py,
continuous.py) keeps rows in one call, but its buckets are fixed at the call's start, and admitting rows mid
call would touch the training sampler whose tokens are pinned by the golden traces. A step loop over
transformers' `DynamicCache` is the least new code: one model forward per step, the project's own `prefill` and
`sample_step`, and the cache's `batch_select_indices` to drop rows; nothing of the training paths changes.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from lmgym.policies.decoding.generation import _eos_ids, left_pad, prefill, row_key, sample_step
from lmgym.policies.prompting import pad_id as padding_id
from lmgym.serving.batcher import BatchSettings, QueueFull
from lmgym.serving.limits import ComputeTimeout, Deadline

SHARED_PREFIX = 8  # tokens that prompts admitted together must share for their common prefix to be prefilled once


@dataclass(frozen=True)
class Update:
    """What one choice got in one step: its text since the last update, and, once it ended, its finish_reason
    ("stop" | "length"), its whole text and its token count."""

    index: int
    delta: str
    finish_reason: str | None = None
    text: str = ""
    tokens: int = 0


Publish = Callable[["list[Update] | BaseException"], None]


@dataclass(eq=False)
class StreamJob:
    """One request: `n` choices for each prompt (choice i*n+j is prompt i's sample j, keyed
    row_key(row_key(key, i), j) from a request seed `key`, as the round-based path keys it), each at most
    `max_tokens` tokens, ending at any of `stop` (left out of the text). `publish` gets each step's updates, or the
    exception that ends the job; it is called from the engine thread."""

    prompts: list[list[int]]
    n: int
    max_tokens: int
    stop: tuple[str, ...]
    key: int
    temperature: float
    top_p: float
    deadline: Deadline
    publish: Publish
    cancelled: threading.Event = field(default_factory=threading.Event)
    admitted_step: int | None = None  # the engine step that sampled its first tokens
    finished_step: int | None = None  # the step its last choice ended

    @property
    def rows(self) -> int:
        return len(self.prompts) * self.n

    def ended(self) -> bool:
        """Whether nobody waits for this job any more: cancelled, or past its deadline."""
        return self.cancelled.is_set() or self.deadline.passed()


@dataclass(eq=False)
class _Row:
    job: StreamJob
    index: int  # the choice's index in its request
    key: int
    tokens: list[int] = field(default_factory=list)
    sent: str = ""  # text published so far


class StreamEngine:
    """The decode loop of the module docstring over `policy.model` (an HF causal LM) and `policy.tokenizer`."""

    def __init__(self, policy, settings: BatchSettings | None = None, lock: threading.Lock | None = None):
        self.policy, self.model, self.tokenizer = policy, policy.model, policy.tokenizer
        self.settings = settings if settings is not None else BatchSettings()
        self.lock = lock if lock is not None else threading.Lock()
        self.device = next(self.model.parameters()).device
        self.eos = set(_eos_ids(self.tokenizer, self.model))
        self.pad_id = padding_id(self.tokenizer)
        self._waiting: deque[StreamJob] = deque()
        self._changed = threading.Condition()
        self._worker: threading.Thread | None = None
        self._rows: list[_Row] = []
        self._cache = self._attention = self._positions = self._logits = None
        self.steps = 0  # sampling steps run so far
        self.peak_rows = 0  # the most rows one step sampled

    # ------------------------------------------------------------------ the queue
    def submit(self, job: StreamJob) -> StreamJob:
        """Queue `job`; it joins the running batch at the next step with room. QueueFull when max_queue wait."""
        with self._changed:
            if len(self._waiting) >= self.settings.max_queue:
                raise QueueFull(f"the server's queue holds {self.settings.max_queue} requests already (max_queue); "
                                f"try again shortly")
            self._waiting.append(job)
            if self._worker is None:
                self._worker = threading.Thread(target=self._serve, name="serving-stream-engine", daemon=True)
                self._worker.start()
            self._changed.notify()
        return job

    def cancel(self, job: StreamJob) -> None:
        """Nobody waits for `job`: out of the queue now, or its rows leave the batch at the next step."""
        with self._changed:
            job.cancelled.set()
            if job in self._waiting:
                self._waiting.remove(job)

    def waiting(self) -> int:
        """Jobs queued and not yet in the batch."""
        with self._changed:
            return len(self._waiting)

    def running(self) -> int:
        """Rows in the batch now."""
        return len(self._rows)

    def _serve(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._rows:
                    self._changed.wait()
            with self.lock:
                try:
                    self._step()
                except BaseException as error:  # noqa: BLE001 - the error belongs to the requests, not the loop
                    for job in {row.job for row in self._rows} | set(self._take_all()):
                        send(job, error)
                    self._rows = []
                    self._cache = self._attention = self._positions = self._logits = None

    def _take_all(self) -> list[StreamJob]:
        with self._changed:
            jobs, self._waiting = list(self._waiting), deque()
        return jobs

    # ------------------------------------------------------------------ one step
    @torch.no_grad()
    def _step(self) -> None:
        gone = {row.job for row in self._rows if row.job.ended()}
        for job in gone:
            if not job.cancelled.is_set():
                send(job, ComputeTimeout(f"the request ran over this server's timeout of {job.deadline.seconds:g} s "
                                         f"(timeout_seconds); ask for fewer tokens or choices"))
        self._drop([r for r, row in enumerate(self._rows) if row.job in gone])
        self._admit()
        if not self._rows:
            return
        self.steps += 1
        self.peak_rows = max(self.peak_rows, len(self._rows))
        tokens = self._sample()
        updates: dict[StreamJob, list[Update]] = {}
        ended: set[int] = set()
        for r, (row, token) in enumerate(zip(self._rows, tokens)):
            row.tokens.append(token)
            update = self._update(row, token)
            if update is None:
                continue
            updates.setdefault(row.job, []).append(update)
            if update.finish_reason is not None:
                ended.add(r)
        for job, items in updates.items():
            if all(row.job is not job or r in ended for r, row in enumerate(self._rows)):
                job.finished_step = self.steps
            send(job, items)
        self._drop(sorted(ended))
        if self._rows:
            self._forward([token for r, token in enumerate(tokens) if r not in ended])

    def _admit(self) -> None:
        """Waiting jobs into the batch while it has rows (a job larger than the batch alone); ended ones dropped."""
        jobs, rows = [], len(self._rows)
        with self._changed:
            while self._waiting:
                job = self._waiting[0]
                if job.ended():
                    self._waiting.popleft()
                    if not job.cancelled.is_set():
                        send(job, ComputeTimeout(f"the request waited in the queue past this server's timeout of "
                                                 f"{job.deadline.seconds:g} s (timeout_seconds); try again"))
                    continue
                if rows and rows + job.rows > self.settings.max_batch_rows:
                    break
                jobs.append(self._waiting.popleft())
                rows += job.rows
        if not jobs:
            return
        unique = sorted({tuple(p) for job in jobs for p in job.prompts})
        cache, attention, positions, logits = self._prefill(unique)
        where, new_rows = [], []
        for job in jobs:
            job.admitted_step = self.steps + 1
            for i, prompt in enumerate(job.prompts):
                for j in range(job.n):
                    where.append(unique.index(tuple(prompt)))
                    new_rows.append(_Row(job, i * job.n + j, row_key(row_key(job.key, i), j)))
        select = torch.tensor(where, device=self.device)
        cache.batch_select_indices(select)
        self._merge(cache, attention[select], positions[select, -1] + 1, logits[select], new_rows)

    def _prefill(self, prompts: list[tuple[int, ...]]):
        """(cache, attention, positions, last logits) of `prompts` prefilled; a prefix they all share (a chat
        template's system prompt) of at least SHARED_PREFIX tokens is computed once, each row's rest after it, left-
        padded (the padding then sits between the prefix and the rest: masked out, the positions counted on)."""
        from transformers import DynamicCache

        cache = DynamicCache()
        shared = 0
        if len(prompts) > 1:
            shortest = min(map(len, prompts))
            while shared < shortest - 1 and all(p[shared] == prompts[0][shared] for p in prompts):
                shared += 1
        with self._autocast():
            if shared < SHARED_PREFIX:
                ids, attention = left_pad([list(p) for p in prompts], self.pad_id, self.device)
                positions = (attention.cumsum(-1) - 1).clamp(min=0)
                return cache, attention, positions, prefill(self.model, ids, attention, positions, cache, 0)
            prefix = torch.tensor([prompts[0][:shared]], device=self.device)
            self.model(input_ids=prefix, past_key_values=cache, use_cache=True, logits_to_keep=1)
            cache.batch_select_indices(torch.zeros(len(prompts), dtype=torch.long, device=self.device))
            ids, rest = left_pad([list(p[shared:]) for p in prompts], self.pad_id, self.device)
            attention = torch.cat([torch.ones_like(rest[:, :1]).expand(-1, shared), rest], dim=1)
            positions = (attention.cumsum(-1) - 1).clamp(min=0)
            out = self.model(input_ids=ids, attention_mask=attention, position_ids=positions[:, shared:],
                             past_key_values=cache, use_cache=True, logits_to_keep=1)
        return cache, attention, positions, out.logits[:, -1]

    def _merge(self, cache, attention, positions, logits, rows) -> None:
        """Append admitted rows to the batch: both caches left-padded to one width."""
        if self._cache is None:
            self._cache, self._attention, self._positions, self._logits = cache, attention, positions, logits
            self._rows = rows
            return
        width = max(self._attention.shape[1], attention.shape[1])
        for old, new in zip(self._cache.layers, cache.layers):
            old.keys = torch.cat([left(old.keys, width, 2), left(new.keys, width, 2)])
            old.values = torch.cat([left(old.values, width, 2), left(new.values, width, 2)])
        self._attention = torch.cat([left(self._attention, width, 1), left(attention, width, 1)])
        self._positions = torch.cat([self._positions, positions])
        self._logits = torch.cat([self._logits, logits])
        self._rows = self._rows + rows

    def _drop(self, ended: list[int]) -> None:
        """Rows `ended` out of the batch and its cache; columns no row attends to any more trimmed."""
        if not ended:
            return
        gone = set(ended)
        keep = [r for r in range(len(self._rows)) if r not in gone]
        self._rows = [self._rows[r] for r in keep]
        if not keep:
            self._cache = self._attention = self._positions = self._logits = None
            return
        index = torch.tensor(keep, device=self.device)
        self._cache.batch_select_indices(index)
        self._attention, self._positions, self._logits = (self._attention[index], self._positions[index],
                                                          self._logits[index])
        first = int(self._attention.any(0).int().argmax())  # the first column some row attends to
        if first:
            for layer in self._cache.layers:
                layer.keys, layer.values = layer.keys[:, :, first:], layer.values[:, :, first:]
            self._attention = self._attention[:, first:]

    def _sample(self) -> list[int]:
        """One token per row from its logits: rows grouped by (temperature, top_p), keyed per row and token."""
        groups: dict[tuple[float, float], list[int]] = {}
        for r, row in enumerate(self._rows):
            groups.setdefault((row.job.temperature, row.job.top_p), []).append(r)
        tokens = torch.empty(len(self._rows), dtype=torch.long, device=self.device)
        for (temperature, top_p), members in groups.items():
            index = torch.tensor(members, device=self.device)
            keys = torch.tensor([self._rows[r].key for r in members], dtype=torch.long, device=self.device)
            steps = torch.tensor([len(self._rows[r].tokens) for r in members], dtype=torch.long, device=self.device)
            tokens[index] = sample_step(self._logits[index], temperature, top_p, None, keys, steps)[0]
        return tokens.tolist()

    def _forward(self, tokens: list[int]) -> None:
        """One decoding step: the sampled tokens of the rows still going through the model."""
        self._attention = torch.cat([self._attention, torch.ones_like(self._attention[:, :1])], dim=1)
        ids = torch.tensor(tokens, device=self.device)[:, None]
        with self._autocast():
            out = self.model(input_ids=ids, attention_mask=self._attention, position_ids=self._positions[:, None],
                             past_key_values=self._cache, use_cache=True)
        self._logits = out.logits[:, -1]
        self._positions = self._positions + 1

    def _autocast(self):
        return self.policy.autocast() if hasattr(self.policy, "autocast") else nullcontext()

    # ------------------------------------------------------------------ text
    def _update(self, row: _Row, token: int) -> Update | None:
        """The row's update after `token`: new text (held back while it may be the start of a stop string or an
        unfinished character), and its end (EOS, a stop string, max_tokens); None when there is nothing new."""
        text = self.tokenizer.decode(row.tokens, skip_special_tokens=True)
        stops = [i for i in (text.find(s) for s in row.job.stop) if i >= 0]
        reason = None
        if stops:
            text, reason = text[:min(stops)], "stop"
        elif token in self.eos:
            reason = "stop"
        elif len(row.tokens) >= row.job.max_tokens:
            reason = "length"
        if reason is None:
            hold = max((len(s) for s in row.job.stop), default=1) - 1
            ready = text.rstrip("\ufffd")
            ready = ready[:len(ready) - hold] if hold else ready
            if len(ready) <= len(row.sent) or not ready.startswith(row.sent):
                return None
            delta, row.sent = ready[len(row.sent):], ready
            return Update(row.index, delta)
        delta = text[len(row.sent):] if text.startswith(row.sent) else ""
        return Update(row.index, delta, reason, row.sent + delta, len(row.tokens))


def left(tensor: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """`tensor` left-padded with zeros along `dim` to `width`."""
    missing = width - tensor.shape[dim]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)


def send(job: StreamJob, item: list[Update] | BaseException) -> None:
    """`job.publish(item)`, never failing the engine (a client's event loop may be gone)."""
    try:
        job.publish(item)
    except Exception:  # noqa: BLE001, S110 - a listener gone is a job nobody waits for
        pass


def streams(policy) -> bool:
    """Whether `policy` can be served by the engine: an HF causal LM as `policy.model` and its tokenizer."""
    model = getattr(policy, "model", None)
    return isinstance(model, torch.nn.Module) and getattr(policy, "tokenizer", None) is not None \
        and hasattr(model, "config") and any(True for _ in model.parameters())
