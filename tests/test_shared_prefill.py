"""Rows with the same prompt share one prefill row in the fast decoder: the same tokens and log-probs as
prefilling every row (and as the plain decode loop), greedy and sampled, with LoRA too."""
import pytest
import torch

from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding.fast import FastDecoder
from lmgym.policies.decoding.generation import RowKeys, decode


def grouped_prompts(tok):
    """4 questions x 8 samples (a group's rows side by side), then 3 step prefixes x k = 4 rollouts, interleaved."""
    questions = [tok(f"question {i}: " + "x" * i)["input_ids"] for i in range(4)]
    prefixes = [tok(f"question 1: x\nstep {j}: " + "y" * j)["input_ids"] for j in range(3)]
    return [q for q in questions for _ in range(8)] + [prefixes[i % 3] for i in range(12)]


def same(a, b):
    assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
    assert [g.finish_reason for g in a] == [g.finish_reason for g in b]
    for x, y in zip(a, b):
        assert len(x.logprobs) == len(y.logprobs)
        assert max((abs(p - q) for p, q in zip(x.logprobs, y.logprobs)), default=0.0) < 1e-4


@pytest.mark.parametrize("noise", ["greedy", "keyed", "generator"])
def test_shared_prefill_samples_what_a_prefill_of_every_row_does(noise):
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=5).eval()
    prompts = grouped_prompts(tok)

    def run(share):
        temperature = 0.0 if noise == "greedy" else 1.0
        generator = (RowKeys(list(range(len(prompts)))) if noise == "keyed"
                     else torch.Generator().manual_seed(7) if noise == "generator" else None)
        decoder = FastDecoder(model, sync_every=4, share_prefill=share)
        return decoder.generate(tok, prompts, 24, temperature, stop=["\n"], generator=generator), decoder.stats

    (shared, shared_stats), (full, full_stats) = run(True), run(False)
    same(shared, full)
    if noise != "generator":  # the plain loop draws Gumbel noise for its own (left-padded) batch layout
        same(shared, decode(model, tok, prompts, 24, 0.0 if noise == "greedy" else 1.0, stop=["\n"],
                            generator=RowKeys(list(range(len(prompts)))) if noise == "keyed" else None))
    everything = sum(len(p) for p in prompts) + 20  # and 20 padding rows of one token (44 rows in a 64 bucket)
    distinct = sum(len(p) for p in {tuple(p) for p in prompts}) + 1
    assert shared_stats["prefill_tokens"] == distinct and full_stats["prefill_tokens"] == everything
    assert shared_stats["prefill_tokens_shared"] == everything - distinct and full_stats["prefill_tokens_shared"] == 0


def test_shared_prefill_with_a_lora_adapter_matches_the_plain_path():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=2), tok, device="cpu", fast_decode=True,
                      lora=LoraSettings(r=4, alpha=8))
    torch.manual_seed(0)
    with torch.no_grad():  # adapters that change the output (peft starts B at zero)
        for name, weight in policy.model.named_parameters():
            if "lora_B" in name:
                weight.normal_(0, 0.3)
    prompts = grouped_prompts(tok)
    keys = list(range(100, 100 + len(prompts)))
    fast = [g for (g,) in policy.sample(prompts, 1, 20, 1.0, stop=["\n"], generator=RowKeys(keys))]
    assert policy.fast_decoder.stats["prefill_tokens_shared"] > 0
    with policy.plain_decoding():
        plain = [g for (g,) in policy.sample(prompts, 1, 20, 1.0, stop=["\n"], generator=RowKeys(keys))]
    same(fast, plain)
