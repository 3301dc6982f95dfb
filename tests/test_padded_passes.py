"""Padding without [batch, query, key] masks computes what the masked passes computed (policies/padded_passes.py,
the plain sampler's chunked prefill, the fast decoder's causal prefill)."""
import pytest
import torch

from policies import build_tiny_model, build_tiny_tokenizer
from policies.fast_decode import FastDecoder
from policies.generation import decode
from policies.padded_passes import backbone_hidden, contiguous_starts

LAYOUTS = {  # 1: token, 0: padding
    "right-padded": [[1] * 9 + [0] * 3, [1] * 12, [1] * 5 + [0] * 7],
    "left-padded": [[0] * 3 + [1] * 9, [1] * 12, [0] * 7 + [1] * 5],
    "prompt left, completion right": [[0] * 2 + [1] * 8 + [0] * 2, [1] * 11 + [0], [0] * 4 + [1] * 8],
    "a hole in a row": [[1] * 4 + [0] * 2 + [1] * 6, [1] * 12, [1] * 5 + [0] * 7],
}


def _masked_hidden(backbone, ids, mask):
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return backbone(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False).last_hidden_state


@pytest.mark.parametrize("layout", LAYOUTS)
def test_hidden_states_and_gradients_equal_the_masked_pass(layout):
    model = build_tiny_model(build_tiny_tokenizer(), seed=0)
    mask = torch.tensor(LAYOUTS[layout])
    ids = torch.randint(3, 100, mask.shape, generator=torch.Generator().manual_seed(0)) * mask
    real = mask.bool()
    results = []
    for run in (_masked_hidden, backbone_hidden):
        model.zero_grad()
        hidden = run(model.model, ids, mask)
        (hidden[real] ** 2).sum().backward()
        results.append((hidden[real].detach(), [p.grad.clone() for p in model.parameters()]))
    (masked, masked_grads), (free, free_grads) = results
    assert torch.allclose(masked, free, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(masked_grads, free_grads))


def test_rows_with_holes_are_told_apart():
    assert contiguous_starts(torch.tensor(LAYOUTS["left-padded"])).tolist() == [3, 0, 7]
    assert contiguous_starts(torch.tensor(LAYOUTS["a hole in a row"])) is None


def test_chunked_prefill_and_the_fast_decoders_causal_prefill_sample_what_one_masked_pass_does():
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=1).eval()
    prompts = [tok(f"question {i}: " + "x" * (3 * i))["input_ids"] for i in range(6)]  # 11 to 26 tokens
    whole = decode(model, tok, prompts, 12, temperature=0.0, prefill_chunk=0)
    chunked = decode(model, tok, prompts, 12, temperature=0.0, prefill_chunk=5)
    fast = FastDecoder(model).generate(tok, prompts, 12, temperature=0.0)
    for a, b, c in zip(whole, chunked, fast):
        assert a.completion_ids == b.completion_ids == c.completion_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-5
        assert max(abs(x - y) for x, y in zip(a.logprobs, c.logprobs)) < 1e-4
