"""Memory grows linearly with the context and not with the vocabulary (issue 23).

No sampling or scoring pass materialises a [batch, query, key] tensor (an attention mask, a bias or a score
matrix) or logits over the vocabulary for more positions than one log-prob chunk of the micro-batch. Every op's
outputs are recorded by a TorchDispatchMode (deterministic on the CPU, unlike peak memory) while a tiny model
with a large vocabulary and a long context of padded rows samples (the fast decoder, the plain loop) and scores
(the training pass with its backward, the KL reference, a separate critic and the shared value head).
"""
from types import SimpleNamespace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from lmgym.algorithms.reference import reference_logprobs
from lmgym.policies import HFPolicy, build_tiny_tokenizer
from lmgym.policies.decoding.fast import FastDecoder
from lmgym.policies.decoding.generation import PREFILL_CHUNK, decode
from lmgym.policies.value import ValueHead, build_value_model
from tests.tiers import slow

VOCAB, CONTEXT, CHUNK = 50_000, 2 * PREFILL_CHUNK, 64  # the plain sampler's prefill chunks have CONTEXT // 2 queries
PROMPT_LENGTHS = (CONTEXT + 64, CONTEXT - 300, CONTEXT, 600)  # padded rows: masks would be needed
ROWS = ((CONTEXT - 416, 512), (300, 500))  # (prompt, completion) tokens of a scored micro-batch


class _OutputSizes(TorchDispatchMode):
    """Records each op's output tensors: (op, shape, dtype, elements its storage holds)."""

    def __init__(self):
        super().__init__()
        self.outputs: list[tuple[str, tuple[int, ...], torch.dtype, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                stored = t.untyped_storage().nbytes() // max(t.element_size(), 1)
                self.outputs.append((str(func), tuple(t.shape), t.dtype, stored))
        return out

    def query_by_key(self) -> list:
        """Tensors with two trailing dimensions of context scale whose storage holds them: masks, biases, scores."""
        return [o for o in self.outputs if len(o[1]) >= 2 and min(o[1][-2:]) > CONTEXT // 2
                and o[3] >= o[1][-2] * o[1][-1]]

    def vocabulary_wide(self, batch: int) -> list:
        """Tensors over the vocabulary for more positions than one log-prob chunk of `batch` rows."""
        return [o for o in self.outputs if o[1] and o[1][-1] == VOCAB and o[3] > batch * CHUNK * VOCAB]


def _check(recorder: _OutputSizes, batch: int) -> None:
    quadratic, wide = recorder.query_by_key(), recorder.vocabulary_wide(batch)
    assert not quadratic, f"[batch, query, key] tensors: {quadratic[:3]}"
    assert not wide, f"vocabulary-wide tensors: {wide[:3]}"


def _wide_model():
    """The tiny Llama (2 layers, grouped-query attention) with a 50k vocabulary and a long context."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_tiny_tokenizer()
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4 * CONTEXT,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval(), tok


def _prompts(lengths) -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(3, 100, (n,), generator=g).tolist() for n in lengths]


def _batch(left_padded: bool) -> SimpleNamespace:
    """A scored micro-batch: prompt + completion rows, right-padded as lmgym.buffers.batch.collate pads them (completion
    positions per row), or with left-padded prompts (one completion start column); every completion token is
    sampled (loss_mask 1), as in a single-turn row."""
    width = max(p + c for p, c in ROWS)
    prompt_width = max(p for p, _ in ROWS)
    ids = torch.zeros((len(ROWS), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    tokens = _prompts([p + c for p, c in ROWS])
    if left_padded:
        for i, ((p, c), row) in enumerate(zip(ROWS, tokens)):
            start = prompt_width - p
            ids[i, start:start + p + c], mask[i, start:start + p + c] = torch.tensor(row), 1
        sampled = torch.tensor([[1.0] * c + [0.0] * (width - prompt_width - c) for _, c in ROWS])
        return SimpleNamespace(input_ids=ids, attention_mask=mask, completion_positions=prompt_width, loss_mask=sampled)
    completion = max(c for _, c in ROWS)
    positions = torch.zeros((len(ROWS), completion), dtype=torch.long)
    for i, ((p, c), row) in enumerate(zip(ROWS, tokens)):
        ids[i, :p + c], mask[i, :p + c] = torch.tensor(row), 1
        positions[i] = (p + torch.arange(completion)).clamp(max=width - 1)
    sampled = torch.tensor([[1.0] * c + [0.0] * (completion - c) for _, c in ROWS])
    return SimpleNamespace(input_ids=ids, attention_mask=mask, completion_positions=positions, loss_mask=sampled)


@slow
@pytest.mark.parametrize("fused_weights", [True, False])
def test_the_fast_decoders_prefill_builds_no_query_by_key_tensor(fused_weights):
    model, tok = _wide_model()
    decoder = FastDecoder(model, fused_weights=fused_weights)
    with _OutputSizes() as recorder:
        decoder.generate(tok, _prompts(PROMPT_LENGTHS), 2, temperature=1.0, generator=torch.Generator().manual_seed(0))
    _check(recorder, batch=8)  # the decoder's smallest batch bucket


@slow
def test_the_plain_sampler_builds_no_query_by_key_tensor():
    model, tok = _wide_model()
    with _OutputSizes() as recorder:
        decode(model, tok, _prompts(PROMPT_LENGTHS), 2, temperature=1.0, generator=torch.Generator().manual_seed(0))
    _check(recorder, batch=len(PROMPT_LENGTHS))


@slow
@pytest.mark.parametrize("left_padded", [False, True])
def test_the_training_pass_and_its_backward_stay_linear(left_padded):
    model, tok = _wide_model()
    policy = HFPolicy(model, tok, device="cpu", logprob_chunk=CHUNK, fast_decode=False)
    batch = _batch(left_padded)
    with _OutputSizes() as recorder:
        logprobs, entropy = policy.token_logprobs(batch.input_ids, batch.attention_mask, batch.completion_positions,
                                                  entropy_grad=True)
        (logprobs.sum() + entropy.sum()).backward()
    _check(recorder, batch=len(ROWS))


@slow
def test_the_reference_and_value_passes_stay_linear():
    model, tok = _wide_model()
    policy = HFPolicy(model, tok, device="cpu", logprob_chunk=CHUNK, fast_decode=False)
    reference, critic = policy.frozen_copy(), build_value_model(policy, "copy")
    head = ValueHead(model.config.hidden_size)
    batch = _batch(left_padded=False)
    with _OutputSizes() as recorder:
        reference_logprobs(reference, batch, 1.0)
        critic(batch.input_ids, batch.attention_mask, batch.completion_positions).sum().backward()
        hidden = policy.completion_hidden(batch.input_ids, batch.attention_mask, batch.completion_positions)
        head(hidden).sum().backward()
    _check(recorder, batch=len(ROWS))


@slow
def test_the_guards_catch_a_masked_pass_and_unchunked_logits():
    """Neither guard is vacuous: a backbone pass given the padded 2-D mask (transformers then builds a
    [batch, 1, length, length] one) and scoring without log-prob chunks are both caught."""
    model, tok = _wide_model()
    policy = HFPolicy(model, tok, device="cpu", logprob_chunk=0, fast_decode=False)
    batch = _batch(left_padded=False)
    with torch.no_grad(), _OutputSizes() as recorder:
        model.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
    assert recorder.query_by_key()
    with torch.no_grad(), _OutputSizes() as recorder:
        policy.token_logprobs(batch.input_ids, batch.attention_mask, batch.completion_positions)
    assert recorder.vocabulary_wide(len(ROWS)) and not recorder.query_by_key()
