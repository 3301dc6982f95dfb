"""Batched sampling with a KV cache, recording each sampled token's log-probability.

One decode loop serves the CPU and the GPU. Prompts are left-padded; every step samples with the
Gumbel-max trick (same distribution as softmax sampling, no host sync) and records
log softmax(logits / T) of the sampled token, the exact quantity the trainer recomputes, so importance
ratios start at 1. Finished rows (EOS or a stop string) are dropped from the batch and the KV cache as
they accumulate, so long tails don't pay for short answers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import warnings

import torch

# transformers 5.2x renames `past_key_values` to `cache`; older 5.x releases only know the first name.
warnings.filterwarnings("ignore", message=".*past_key_values.*deprecated")


@dataclass
class Generation:
    """One sampled completion: exact token ids, their behaviour log-probs and the decoded text."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str  # "eos" | "stop" | "length"
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


def sample_tokens(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row; return (tokens, log softmax(logits / T) at those tokens).

    temperature == 0 means greedy; its log-probs are those of the untempered distribution.
    """
    logits = logits.float()
    if temperature <= 0:
        tokens = logits.argmax(-1)
        return tokens, torch.log_softmax(logits, -1).gather(-1, tokens[:, None]).squeeze(-1)
    scaled = logits / temperature
    logp = torch.log_softmax(scaled, -1)
    candidates = filter_top_p(scaled, top_p)
    uniform = torch.rand(candidates.shape, device=logits.device, generator=generator).clamp_(1e-10, 1.0)
    tokens = (candidates - torch.log(-torch.log(uniform))).argmax(-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


def left_pad(sequences: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token lists into (input_ids, attention_mask)."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if seq:
            ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
            mask[row, width - len(seq):] = 1
    return ids.to(device), mask.to(device)


class StopChecker:
    """Detects stop strings in the tail of each row's completion (checks only newly decoded text)."""

    def __init__(self, tokenizer, stop: list[str] | None):
        self.tokenizer = tokenizer
        self.stop = [s for s in (stop or []) if s]
        self.lookback = 1 + max((len(s) for s in self.stop), default=0)

    def hit(self, completion: list[int]) -> bool:
        if not self.stop:
            return False
        tail = self.tokenizer.decode(completion[-self.lookback:], skip_special_tokens=True)
        return any(s in tail for s in self.stop)


@torch.no_grad()
def decode(
    model,
    tokenizer,
    prompts: list[list[int]],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    stop: list[str] | None = None,
    generator: torch.Generator | None = None,
    prune_every: int = 8,
    on_tokens=None,
) -> list[Generation]:
    """Sample one completion per prompt with a dynamic KV cache; returns Generations in prompt order.

    `on_tokens(n)`, when given, is called after each decoding step with the tokens it added (progress)."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    eos_ids = _eos_ids(tokenizer, model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    input_ids, attention = left_pad(prompts, pad_id, device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()
    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                past_key_values=cache, use_cache=True, logits_to_keep=1)
    logits = out.logits[:, -1]
    next_pos = positions[:, -1] + 1
    rows = torch.arange(len(prompts), device=device)  # original index of each live row
    completions: list[list[int]] = [[] for _ in prompts]
    logprobs: list[list[float]] = [[] for _ in prompts]
    reasons = ["length"] * len(prompts)
    done = [False] * len(prompts)
    stopper = StopChecker(tokenizer, stop)
    eos_set = set(eos_ids)
    for step in range(max_new_tokens):
        tokens, token_logp = sample_tokens(logits, temperature, top_p, generator)
        row_list = rows.tolist()
        added = 0
        for i, (r, tok, lp) in enumerate(zip(row_list, tokens.tolist(), token_logp.tolist())):
            if done[r]:
                continue  # finished, not pruned yet: its decoded pad tokens are ignored
            completions[r].append(tok)
            logprobs[r].append(lp)
            added += 1
            if tok in eos_set:
                reasons[r], done[r] = "eos", True
            elif stopper.hit(completions[r]):
                reasons[r], done[r] = "stop", True
        if on_tokens is not None:
            on_tokens(added)
        live = torch.tensor([not done[r] for r in row_list], device=device)
        if all(done) or step == max_new_tokens - 1:
            break
        attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=-1)
        if not bool(live.all()) and (step % prune_every == 0 or live.float().mean() < 0.5):
            keep = live.nonzero().squeeze(-1)
            cache.batch_select_indices(keep)
            rows, tokens, attention, next_pos, live = rows[keep], tokens[keep], attention[keep], next_pos[keep], live[keep]
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
