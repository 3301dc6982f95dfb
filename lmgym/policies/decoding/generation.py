"""Batched sampling with a KV cache, recording each sampled token's log-probability.

One decode loop serves the CPU and the GPU. Prompts are left-padded; every step samples with the
Gumbel-max trick (same distribution as softmax sampling, no host sync), or by inverse CDF with one
number per row keyed by (row key, token index) when given `RowKeys` (batch-invariant), and records
log softmax(logits / T) of the sampled token, the exact quantity the trainer recomputes, so importance
ratios start at 1. Finished rows (EOS or a stop string) are dropped from the batch and the KV cache as
they accumulate, so long tails don't pay for short answers.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import torch

from lmgym.buffers.batch import copy_to
from lmgym.policies.prompting import pad_id as padding_id

# transformers 5.2x renames `past_key_values` to `cache`; older 5.x releases only know the first name.
warnings.filterwarnings("ignore", message=".*past_key_values.*deprecated")


@dataclass
class Generation:
    """One sampled completion: exact token ids, their behaviour log-probs and the decoded text."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str  # "eos" | "stop" | "length" | "cancelled" (ended by the caller's `cancelled_rows`)
    extra: dict = field(default_factory=dict)


def filter_top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Set logits outside the nucleus of mass `top_p` to -inf (the top token always stays)."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    remove_sorted = cumulative - sorted_logits.softmax(-1) > top_p
    remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # splitmix64's stride


def _signed(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x >> 63 else x


_MIX1, _MIX2 = (_signed(c) for c in (0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _shr(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 values (torch's >> is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _splitmix(x: torch.Tensor) -> torch.Tensor:
    x = (x ^ _shr(x, 30)) * _MIX1
    x = (x ^ _shr(x, 27)) * _MIX2
    return x ^ _shr(x, 31)


def row_key(*parts: int) -> int:
    """One signed 64-bit sampling key from integers (e.g. seed, iteration, group id, member, episode step)."""
    x = 0
    for part in parts:
        x = (x ^ (int(part) & _MASK64)) + _GOLDEN & _MASK64
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK64
        x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK64
        x ^= x >> 31
    return _signed(x)


def keyed_uniform(row_keys: torch.Tensor, step: int | torch.Tensor) -> torch.Tensor:
    """One uniform number in (0, 1) (float64) per row from its key and the token index `step`: a Python int, or
    an int64 tensor of one element read on the device (int64 arithmetic wraps as the Python form's mask does)."""
    offset = _signed((step + 1) * _GOLDEN) if isinstance(step, int) else (step + 1) * _signed(_GOLDEN)
    bits = _splitmix(row_keys + offset)
    return (_shr(bits, 11).double() + 0.5) / float(1 << 53)


@dataclass
class RowKeys:
    """Batch-invariant sampling: row i's t-th token is drawn by inverse CDF with one uniform number that
    depends only on (keys[i], t).

    Pass it where a `torch.Generator` goes (`Policy.sample(..., generator=RowKeys(keys))`, one key per
    prompt): what a prompt samples no longer depends on which other prompts share its batch or process,
    so prompts sharded over torchrun ranks sample exactly what one process would.
    """

    keys: list[int]
    _tensors: dict = field(default_factory=dict, repr=False, compare=False)  # keys per device, made once

    def row_keys(self, rows: torch.Tensor) -> torch.Tensor:
        """The key of each batch row (int64); `rows` are the rows' original indices (past the end: the last key)."""
        keys = self._tensors.get(rows.device)
        if keys is None:
            keys = self._tensors[rows.device] = torch.tensor(self.keys, dtype=torch.long, device=rows.device)
        return keys[rows.clamp(max=len(self.keys) - 1)]

    def uniform(self, rows: torch.Tensor, step: int) -> torch.Tensor:
        """One uniform number in (0, 1) (float64) per batch row; `rows` are the rows' original indices."""
        return keyed_uniform(self.row_keys(rows), step)

    def repeat(self, n: int) -> RowKeys:
        """Keys for each prompt repeated `n` times (n samples per prompt), each sample its own key."""
        return RowKeys([row_key(k, j) for k in self.keys for j in range(n)])


def sample_tokens(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | RowKeys | None,
    rows: torch.Tensor | None = None, step: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row; return (tokens, log softmax(logits / T) at those tokens).

    temperature == 0 means greedy; its log-probs are those of the untempered distribution. With
    `RowKeys`, `rows` are the batch rows' original prompt indices and `step` the token index.
    """
    if isinstance(generator, RowKeys):
        index = rows if rows is not None else torch.arange(len(logits), device=logits.device)
        return sample_step(logits, temperature, top_p, None, generator.row_keys(index), step)
    return sample_step(logits, temperature, top_p, generator, None, step)


def sample_step(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None,
    row_keys: torch.Tensor | None, step: int | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`sample_tokens` without host work: Gumbel noise from `generator`, or, given `row_keys` (each row's
    RowKeys key), inverse CDF keyed by the token index `step`, which may be a one-element int64 tensor on the
    device (the fast decoder's captured step reads it there)."""
    logits = logits.float()
    if temperature <= 0:
        tokens = logits.argmax(-1)
        return tokens, torch.log_softmax(logits, -1).gather(-1, tokens[:, None]).squeeze(-1)
    scaled = logits / temperature
    logp = torch.log_softmax(scaled, -1)
    candidates = filter_top_p(scaled, top_p)
    if row_keys is not None:  # inverse CDF: one keyed number per row
        cdf = torch.softmax(candidates.double(), -1).cumsum(-1)
        target = (keyed_uniform(row_keys, step) * cdf[:, -1])[:, None]
        tokens = torch.searchsorted(cdf, target).squeeze(-1).clamp_(max=cdf.shape[-1] - 1)
    else:
        uniform = torch.rand(candidates.shape, device=logits.device, generator=generator).clamp_(1e-10, 1.0)
        tokens = (candidates - torch.log(-torch.log(uniform))).argmax(-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


# Host-to-device copies that do not wait for the GPU (`copy_to`, lmgym.buffers.batch). In continuous play
# (continuous.py) the host settles a sync's ended actions while the next decode steps run on the GPU; one
# `torch.tensor(values, device="cuda")` there made the host wait for all of those steps, and the GPU then idled
# while the host finished the sync (about 3,000 stream syncs in a 64-problem W4a chunk on an H200,
# benchmarks/RESULTS.md).


def to_device(values, device: torch.device, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """`torch.tensor(values, dtype=dtype, device=device)`, without a stream sync on CUDA."""
    return copy_to(torch.tensor(values, dtype=dtype), device)


def _pad(sequences: list[list[int]], pad_id: int, device: torch.device, left: bool
         ) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if seq:
            columns = slice(width - len(seq), width) if left else slice(0, len(seq))
            ids[row, columns] = torch.tensor(seq, dtype=torch.long)
            mask[row, columns] = 1
    return copy_to(ids, device), copy_to(mask, device)


def left_pad(sequences: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token lists into (input_ids, attention_mask)."""
    return _pad(sequences, pad_id, device, left=True)


def right_pad(sequences: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token lists into (input_ids, attention_mask)."""
    return _pad(sequences, pad_id, device, left=False)


PREFILL_CHUNK = 1024  # prompt columns per prefill pass of padded prompts (on an H200, 32 prompts of 3-4k tokens
# of a 135M model: 0.41 s and 7.1 GiB, against 0.51 s and 9.3 GiB in one pass, with the same logits)


def prefill(model, input_ids: torch.Tensor, attention: torch.Tensor, positions: torch.Tensor, cache,
            chunk: int) -> torch.Tensor:
    """Run padded prompts [B, P] into the KV `cache` and return the logits [B, vocab] of their last column.

    With padding, transformers masks attention with a [batch, 1, queries, keys] tensor, so the prompts go
    through in chunks of `chunk` columns: that mask then grows with the prompts' length, not its square (and
    so do the scores of a kernel that materialises them). Without padding no mask is built: one pass.
    """
    width = input_ids.shape[1]
    step = width if chunk <= 0 or bool(attention.all()) else chunk
    for start in range(0, width, step):
        end = min(start + step, width)
        out = model(input_ids=input_ids[:, start:end], attention_mask=attention[:, :end],
                    position_ids=positions[:, start:end], past_key_values=cache, use_cache=True, logits_to_keep=1)
    return out.logits[:, -1]


StopLists = list[str] | list[list[str] | None] | None  # one list for all prompts, or one per prompt


def stop_lists(stop, count: int) -> list[list[str]]:
    """One stop list per prompt from `stop`: None (no stop strings), one list of strings for all `count`
    prompts, or a list of `count` per-prompt lists (each a list of strings or None)."""
    if stop is None:
        return [[] for _ in range(count)]
    if isinstance(stop, str) or not isinstance(stop, (list, tuple)):
        raise ValueError(f"stop must be None, a list of strings or one list per prompt; got {type(stop).__name__}")
    if all(isinstance(s, str) for s in stop):
        return [list(stop) for _ in range(count)]
    if not all(s is None or (isinstance(s, (list, tuple)) and all(isinstance(x, str) for x in s)) for s in stop):
        raise ValueError("stop must be None, a list of strings or one list of strings (or None) per prompt")
    if len(stop) != count:
        raise ValueError(f"stop has {len(stop)} per-prompt lists for {count} prompts")
    return [list(s or []) for s in stop]


class StopChecker:
    """Detects each row's stop strings in the tail of its completion (checks only newly decoded text)."""

    def __init__(self, tokenizer, stop, count: int):
        self.tokenizer = tokenizer
        self.stops = [[s for s in row if s] for row in stop_lists(stop, count)]
        self.lookbacks = [1 + max((len(s) for s in row), default=0) for row in self.stops]
        self.any = any(self.stops)

    def set_row(self, row: int, stops: list[str] | None) -> None:
        """Row `row`'s stop strings from now on (a continued episode's next action may have others)."""
        self.stops[row] = [s for s in (stops or []) if s]
        self.lookbacks[row] = 1 + max((len(s) for s in self.stops[row]), default=0)
        self.any = self.any or bool(self.stops[row])

    def hit(self, row: int, completion: list[int]) -> bool:
        """Whether row `row`'s completion ends within a stop string's reach of one of its stop strings."""
        stops = self.stops[row]
        if not stops:
            return False
        tail = self.tokenizer.decode(completion[-self.lookbacks[row]:], skip_special_tokens=True)
        return any(s in tail for s in stops)


@torch.no_grad()
def decode(
    model,
    tokenizer,
    prompts: list[list[int]],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    stop: StopLists = None,
    generator: torch.Generator | RowKeys | None = None,
    prune_every: int = 8,
    on_tokens=None,
    prefill_chunk: int = PREFILL_CHUNK,
    cancelled_rows: Callable[[], Collection[int]] | None = None,
) -> list[Generation]:
    """Sample one completion per prompt with a dynamic KV cache; returns Generations in prompt order.

    `stop`: None, one list of stop strings for every prompt, or one list (or None) per prompt.
    `prefill_chunk`: prompt columns per prefill pass when prompts are padded (0: all at once; see `prefill`).

    `on_tokens(n)`, when given, is called after each decoding step with the tokens it added (progress).
    `cancelled_rows()`, when given, is asked after each decoding step which rows (indices into `prompts`) nobody
    wants any more: they end there with what they have (finish_reason "cancelled") and leave the batch."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    eos_ids = _eos_ids(tokenizer, model)
    pad_id = padding_id(tokenizer)
    input_ids, attention = left_pad(prompts, pad_id, device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()
    logits = prefill(model, input_ids, attention, positions, cache, prefill_chunk)
    next_pos = positions[:, -1] + 1
    rows = torch.arange(len(prompts), device=device)  # original index of each live row
    completions: list[list[int]] = [[] for _ in prompts]
    logprobs: list[list[float]] = [[] for _ in prompts]
    reasons = ["length"] * len(prompts)
    done = [False] * len(prompts)
    stopper = StopChecker(tokenizer, stop, len(prompts))
    eos_set = set(eos_ids)
    for step in range(max_new_tokens):
        tokens, token_logp = sample_tokens(logits, temperature, top_p, generator, rows, step)
        row_list = rows.tolist()
        added = 0
        for r, tok, lp in zip(row_list, tokens.tolist(), token_logp.tolist()):
            if done[r]:
                continue  # finished, not pruned yet: its decoded pad tokens are ignored
            completions[r].append(tok)
            logprobs[r].append(lp)
            added += 1
            if tok in eos_set:
                reasons[r], done[r] = "eos", True
            elif stopper.hit(r, completions[r]):
                reasons[r], done[r] = "stop", True
        if on_tokens is not None:
            on_tokens(added)
        if cancelled_rows is not None:
            for r in cancelled_rows():
                if not done[r]:
                    reasons[r], done[r] = "cancelled", True
        live = torch.tensor([not done[r] for r in row_list], device=device)
        if all(done) or step == max_new_tokens - 1:
            break
        attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=-1)
        if not bool(live.all()) and (step % prune_every == 0 or live.float().mean() < 0.5):
            keep = live.nonzero().squeeze(-1)
            cache.batch_select_indices(keep)
            rows, tokens, attention = rows[keep], tokens[keep], attention[keep]
            next_pos, live = next_pos[keep], live[keep]
        tokens = torch.where(live, tokens, torch.full_like(tokens, pad_id))
        out = model(input_ids=tokens[:, None], attention_mask=attention, position_ids=next_pos[:, None],
                    past_key_values=cache, use_cache=True)
        logits = out.logits[:, -1]
        next_pos = next_pos + 1
    return assemble(tokenizer, prompts, completions, logprobs, reasons)


def assemble(tokenizer, prompts, completions, logprobs, reasons) -> list[Generation]:
    """Generations from per-row token ids, log-probs and finish reasons (the text decoded from the ids)."""
    return [
        Generation(list(p), c, lp, tokenizer.decode(c, skip_special_tokens=True), reason)
        for p, c, lp, reason in zip(prompts, completions, logprobs, reasons)
    ]


def _eos_ids(tokenizer, model) -> list[int]:
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    cfg = getattr(model, "generation_config", None)
    eos = getattr(cfg, "eos_token_id", None) if cfg is not None else None
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(e) for e in eos)
    if not ids:
        raise ValueError("tokenizer has no EOS token: set tokenizer.eos_token")
    return sorted(ids)
