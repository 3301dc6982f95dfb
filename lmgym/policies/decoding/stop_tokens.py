"""Which sampled tokens can complete a stop string: a device-side filter for the fast decoder's stop checks.

A stop string is completed at the token that holds its last character. When that character is a printable
ASCII character other than the space, or a line break or tab, it is encoded as one byte in every tokenizer the
toolkit supports (byte-level BPE, SentencePiece with byte fallback), so the tokens that can hold it are exactly
those whose own decoded text contains it, whatever comes before them. `StopTokens` marks those tokens in a
[vocab] boolean tensor: the fast decoder then decodes text (`StopChecker.hit`, the exact check the plain
path makes) only at the positions of marked tokens, instead of at every position of every live row. A
stop string that ends in any other character (a space, a non-ASCII character) marks every token, which is
the exact check everywhere, as before.
"""
from __future__ import annotations

import weakref

import torch

_VOCAB_TEXTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> each id's own text
_MASKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> {(last characters, device): mask}


def vocab_texts(tokenizer) -> list[str]:
    """Each token id's own decoded text (special tokens skipped, as completions are decoded), cached per
    tokenizer."""
    try:
        return _VOCAB_TEXTS[tokenizer]
    except (KeyError, TypeError):
        pass
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=True)
    try:
        _VOCAB_TEXTS[tokenizer] = texts
    except TypeError:  # a tokenizer that cannot be weakly referenced is decoded each time
        pass
    return texts


def filterable(stop: str) -> bool:
    """Whether a stop string's completing token can be found from the token's own text: its last character is
    printable ASCII other than the space, or a line break or tab (one byte each)."""
    last = stop[-1:]
    return last in ("\n", "\t", "\r") or (last != "" and 33 <= ord(last) <= 126)


def _mask(tokenizer, last: frozenset[str], device: torch.device) -> torch.Tensor:
    """The [vocab] mask of tokens whose own text holds one of `last`, made once per tokenizer, characters and
    device (a multi-turn run asks for the same few sets at every call)."""
    try:
        masks = _MASKS.setdefault(tokenizer, {})
    except TypeError:  # a tokenizer that cannot be weakly referenced: made each time
        masks = {}
    key = (last, str(device))
    if key not in masks:
        marked = [any(c in text for c in last) for text in vocab_texts(tokenizer)]
        masks[key] = torch.tensor(marked, dtype=torch.bool, device=device)
    return masks[key]


class StopTokens:
    """The tokens that may complete one of `stops` (every stop string of a call's rows), on `device`;
    `everything` is True when some stop string cannot be filtered (then every token is marked)."""

    def __init__(self, tokenizer, stops: set[str], device: torch.device):
        stops = {s for s in stops if s}
        self.stops = frozenset(stops)
        self.everything = not all(filterable(s) for s in stops)
        if self.everything:
            self.mask = torch.ones(len(tokenizer), dtype=torch.bool, device=device)
            return
        self.mask = _mask(tokenizer, frozenset(s[-1] for s in stops), device)

    def positions(self, tokens: torch.Tensor, within: torch.Tensor | None = None) -> list[tuple[int, int]]:
        """(row, column) of every marked token in `tokens` [rows, columns] (where `within` is True, when given),
        row-major (one host sync)."""
        size = len(self.mask)  # ids past the tokenizer's vocabulary (a padded head) are always checked
        marked = torch.where(tokens < size, self.mask[tokens.clamp(0, size - 1)], True)
        if within is not None:
            marked &= within
        return [tuple(p) for p in marked.nonzero().tolist()]
