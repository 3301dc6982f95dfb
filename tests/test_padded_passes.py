"""Padding without [batch, query, key] masks computes what the masked passes computed (policies/padded_passes.py,
the plain sampler's chunked prefill, the fast decoder's causal prefill)."""
import pytest
import torch

from lmgym.policies import build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding.fast import FastDecoder
from lmgym.policies.decoding.generation import decode
from lmgym.policies.padded_passes import backbone_hidden, column_multiple, contiguous_starts

LAYOUTS = {  # 1: token, 0: padding
    "right-padded": [[1] * 9 + [0] * 3, [1] * 12, [1] * 5 + [0] * 7],
    "left-padded": [[0] * 3 + [1] * 9, [1] * 12, [0] * 7 + [1] * 5],
    "prompt left, completion right": [[0] * 2 + [1] * 8 + [0] * 2, [1] * 11 + [0], [0] * 4 + [1] * 8],
    "a hole in a row": [[1] * 4 + [0] * 2 + [1] * 6, [1] * 12, [1] * 5 + [0] * 7],
}


def _masked_hidden(backbone, ids, mask):
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return backbone(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False).last_hidden_state


@pytest.mark.parametrize("multiple", [1, 8])
@pytest.mark.parametrize("layout", [*LAYOUTS, "no padding"])
def test_hidden_states_and_gradients_equal_the_masked_pass(layout, multiple):
    """Also with the columns padded to a multiple of 8 (CUDA's default: 12 columns run as 16)."""
    model = build_tiny_model(build_tiny_tokenizer(), seed=0)
    mask = torch.tensor(LAYOUTS[layout]) if layout in LAYOUTS else torch.ones(3, 12, dtype=torch.long)
    ids = torch.randint(3, 100, mask.shape, generator=torch.Generator().manual_seed(0)) * mask
    real = mask.bool()
    results = []
    for run in (_masked_hidden, lambda backbone, i, m: backbone_hidden(backbone, i, m, multiple)):
        model.zero_grad()
        hidden = run(model.model, ids, mask)
        assert hidden.shape[:2] == ids.shape
        (hidden[real] ** 2).sum().backward()
        results.append((hidden[real].detach(), [p.grad.clone() for p in model.parameters()]))
    (masked, masked_grads), (free, free_grads) = results
    assert torch.allclose(masked, free, atol=1e-5)
    # rows of another length or offset sum the weights' gradients in another order, and the order is the
    # processor's kernels' to pick: on an AMD EPYC (AVX2) the left-padded rows differ by up to 1.2e-4 of a
    # gradient's largest entry, where an Intel AVX-512 machine matched to 1e-5. A wrong mask or position is
    # off by far more than 1e-3 of it
    worst = max(float((a - b).abs().max()) - 1e-3 * float(a.abs().max()) for a, b in zip(masked_grads, free_grads))
    assert worst <= 1e-5, worst


def test_passes_run_on_lengths_padded_to_the_multiple():
    model = build_tiny_model(build_tiny_tokenizer(), seed=0)
    seen = []
    model.model.register_forward_pre_hook(lambda module, args, kwargs: seen.append(kwargs["input_ids"].shape[1]),
                                          with_kwargs=True)
    mask = torch.tensor(LAYOUTS["right-padded"])
    for multiple in (1, 8, 5):
        backbone_hidden(model.model, torch.ones_like(mask), mask, multiple)
    assert seen == [12, 16, 15]
    assert column_multiple(torch.device("cpu")) == 1 and column_multiple(torch.device("cuda", 0)) == 8


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


def test_training_layers_compile_with_options_that_make_no_size_guards(monkeypatch):
    """HFPolicy.compile_layers hands Inductor the options of policies/hf.py (this torch knows the
    mix-order non-strict mode), and no options to another backend; the checkpointed entry compiles whole."""
    from lmgym.policies import HFPolicy
    from lmgym.policies.hf import inductor_options

    policy = HFPolicy(build_tiny_model(build_tiny_tokenizer(), seed=0), build_tiny_tokenizer(), device="cpu")
    calls = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: calls.append((fn.__name__, kwargs)) or fn)
    assert policy.compile_layers("inductor") and policy.compile_layers("aot_eager")
    for (plain, kw_plain), (checkpointed, kw_checkpointed), (backend, options) in zip(
            calls[0::2], calls[1::2], [("inductor", inductor_options()), ("aot_eager", None)]):
        assert (plain, checkpointed) == ("_class_forward", "_checkpointed_forward")
        assert kw_plain == {"backend": backend, "dynamic": True, "options": options}
        assert kw_checkpointed == {**kw_plain, "fullgraph": True}
    assert len(calls) == 4  # one compilation per call, shared by every layer
    assert inductor_options() == {"triton.mix_order_reduction_non_strict_mode": True}
