"""The fast decoder's fused weight copy (policies/decoding/weights.py) and layer functions
(policies/decoding/layers.py) against the decoder calling the model's own modules, on the CPU."""
import torch

from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding.fast import FastDecoder
from lmgym.policies.decoding.generation import decode
from lmgym.policies.decoding.layers import (
    attention_inputs,
    attention_output_and_mlp,
    compiled_layer_functions,
)
from lmgym.policies.decoding.weights import DecodeWeights
from tests.tiers import slow


def setup(seed=1):
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=seed).eval()
    with torch.no_grad():  # EOS scores like 'x': rows finish at different times (exercises compaction)
        model.lm_head.weight[tok.eos_token_id] = 1.2 * model.lm_head.weight[tok.convert_tokens_to_ids("x")]
    prompts = [tok(f"question {i}: " + "x" * (i % 7))["input_ids"] for i in range(12)]
    return model, tok, prompts


def same(a, b, tol=1e-5):
    assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
    assert [g.finish_reason for g in a] == [g.finish_reason for g in b]
    assert max(abs(x - y) for ga, gb in zip(a, b) for x, y in zip(ga.logprobs, gb.logprobs)) < tol


@slow
def test_fused_weights_decode_what_the_modules_decode():
    model, tok, prompts = setup()
    fused = FastDecoder(model, sync_every=4)
    modules = FastDecoder(model, sync_every=4, fused_weights=False)
    out = fused.generate(tok, prompts, 40, temperature=0.0)
    assert fused.weights is not None and modules.weights is None
    same(out, modules.generate(tok, prompts, 40, temperature=0.0))
    same(out, decode(model, tok, prompts, 40, temperature=0.0), tol=1e-4)
    sampled = [d.generate(tok, prompts, 24, temperature=1.2, generator=torch.Generator().manual_seed(5))
               for d in (fused, modules)]
    same(*sampled)


def test_the_copy_follows_in_place_updates():
    """The trainer updates weights in place between calls; each call decodes with the current ones."""
    model, tok, prompts = setup()
    fused = FastDecoder(model, sync_every=4)
    before = fused.generate(tok, prompts, 30, temperature=0.0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.05)
    after = fused.generate(tok, prompts, 30, temperature=0.0)
    assert [g.completion_ids for g in after] != [g.completion_ids for g in before]
    same(after, FastDecoder(model, sync_every=4, fused_weights=False).generate(tok, prompts, 30, temperature=0.0))


def test_lora_adapters_are_merged_into_the_copy():
    model, tok, prompts = setup()
    policy = HFPolicy(model, tok, device="cpu", lora=LoraSettings(r=4, alpha=8), fast_decode=True)
    with torch.no_grad():  # a nonzero adapter (peft starts B at zero)
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.3)
    policy.model.eval()
    fused = FastDecoder(policy.model, sync_every=4)
    out = fused.generate(tok, prompts, 30, temperature=0.0)
    assert fused.weights is not None
    same(out, FastDecoder(policy.model, sync_every=4, fused_weights=False).generate(tok, prompts, 30, temperature=0.0))
    with policy.model.disable_adapter():  # the copy then holds the base weights alone
        base = fused.generate(tok, prompts, 30, temperature=0.0)
        modules = FastDecoder(policy.model, sync_every=4, fused_weights=False)
        same(base, modules.generate(tok, prompts, 30, temperature=0.0))
    assert [g.completion_ids for g in base] != [g.completion_ids for g in out]


def test_a_call_copies_the_weights_only_when_what_they_are_made_from_changed():
    """A multi-step run makes many decoding calls between two optimizer steps: a call copies the weights only
    after a change, an optimizer step of any kind among them (a fused one's kernel counts no versions), and
    always decodes with the current weights. (An adapter switched off: test_lora_adapters_are_merged_into_the_copy.)"""
    model, tok, prompts = setup()
    fused = FastDecoder(model, sync_every=4)

    def decodes_current_weights(copies: int) -> None:
        out = fused.generate(tok, prompts[:4], 6, temperature=0.0)
        assert fused.stats["weight_copies"] == copies
        same(out, FastDecoder(model, sync_every=4, fused_weights=False).generate(tok, prompts[:4], 6,
                                                                                 temperature=0.0))

    decodes_current_weights(1)
    decodes_current_weights(1)  # nothing changed: no copy
    for copies, kind in ((2, {"foreach": True}), (3, {"fused": True})):
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, **kind)
        model(torch.tensor([prompts[0]])).logits.float().pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        decodes_current_weights(copies)
    model.load_state_dict({name: value * 0.5 for name, value in model.state_dict().items()})
    decodes_current_weights(4)
    model.lm_head.weight.data.mul_(1.5)  # an edit PyTorch does not count: said with weights_changed()
    fused.weights_changed()
    decodes_current_weights(5)


def test_weights_it_cannot_copy_whole_leave_the_modules_in_charge():
    model, tok, prompts = setup()
    layers, head = list(model.model.layers), model.lm_head
    assert DecodeWeights.build(layers, head, torch.float32) is not None
    model.model.layers[1].mlp.act_fn = torch.nn.GELU()  # not the Llama family's SiLU gate
    assert DecodeWeights.build(layers, head, torch.float32) is None
    decoder = FastDecoder(model, sync_every=4)
    decoder.generate(tok, prompts[:2], 5, temperature=0.0)
    assert decoder.weights is None


@slow
def test_compiled_layer_functions_trace_whole_and_once_for_every_layer_and_batch():
    """fullgraph=True: no graph breaks. One graph per function serves both layers (the weights are
    arguments) and, after one recompilation, every batch size (dynamic shapes)."""
    import torch._dynamo

    model, _, _ = setup()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = compiled_layer_functions(backend="aot_eager")
    weights = DecodeWeights.build(list(model.model.layers), model.lm_head, torch.float32)
    for batch in (8, 16, 32):
        h = torch.randn(batch, 1, 64)
        cos, sin = model.model.rotary_emb(h, torch.arange(batch)[:, None])
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        for w in weights.layers:
            plain = attention_inputs(h, w, cos, sin, 4, 2, 16, weights.norm_eps, None)
            traced = compiled[0](h, w, cos, sin, 4, 2, 16, weights.norm_eps, None)
            assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(plain, traced))
            attended = torch.randn(batch, 1, 64)
            assert torch.allclose(attention_output_and_mlp(h, attended, w, weights.norm_eps),
                                  compiled[1](h, attended, w, weights.norm_eps), atol=1e-6)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] <= 4
    torch._dynamo.reset()


def test_a_failing_compilation_falls_back_to_the_eager_layer_functions(monkeypatch):
    import pytest
    import torch._dynamo

    import lmgym.policies.decoding.fast as fast_decode

    def broken(*args, **kwargs):
        raise torch._dynamo.exc.TorchDynamoException("no compiler here")

    monkeypatch.setattr(fast_decode, "compiled_layer_functions", lambda *args, **kwargs: (broken, broken))
    model, tok, prompts = setup()
    decoder = FastDecoder(model, sync_every=4, compile_layers=True)
    assert decoder.compile_prefill is True  # follows compile_layers
    with pytest.warns(UserWarning) as warned:
        out = decoder.generate(tok, prompts, 20, temperature=0.0)
    messages = [str(w.message) for w in warned]
    assert sum("compiling the prefill failed" in m and "no compiler here" in m for m in messages) == 1
    assert sum("compiling the decode step failed" in m and "no compiler here" in m for m in messages) == 1
    assert decoder.compile_layers is False and decoder.compile_prefill is False
    same(out, FastDecoder(model, sync_every=4, fused_weights=False).generate(tok, prompts, 20, temperature=0.0))


@slow
def test_compiled_prefill_decodes_what_the_eager_prefill_decodes(monkeypatch):
    """Passes of many tokens (the prompts' prefill, then the turns appended mid-episode) through the layer
    functions compiled for dynamic shapes: the same tokens and log-probs, greedy and sampled, and one graph
    per function serves prompts of every batch and length (a one-row pass runs eagerly: dynamo would compile
    a second graph specialised to one row, seconds of Inductor mid-run on a GPU)."""
    import torch._dynamo

    monkeypatch.setattr(FastDecoder, "compile_backend", "eager")  # dynamo traces; no AOT pass
    model, tok, prompts = setup()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = FastDecoder(model, sync_every=4, compile_prefill=True)
    eager = FastDecoder(model, sync_every=4, compile_prefill=False)
    assert compiled.compile_layers is False  # the CPU default: the one-token steps stay eager here
    for some in (prompts, [p + p for p in prompts[:3]], prompts[4:5]):  # other batches and lengths, one row
        same(compiled.generate(tok, some, 20, temperature=0.0), eager.generate(tok, some, 20, temperature=0.0))
    sampled = [d.generate(tok, prompts, 16, temperature=1.2, generator=torch.Generator().manual_seed(5))
               for d in (compiled, eager)]
    same(*sampled)
    assert compiled.compile_prefill is True
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2  # one graph a function: no recompilation
    torch._dynamo.reset()
