"""Rows with the same prompt share one prefill row in the fast decoder: the same tokens and log-probs as
prefilling every row (and as the plain decode loop), greedy and sampled, with LoRA too."""
import pytest
import torch

from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding.fast import FastDecoder
from lmgym.policies.decoding.generation import RowKeys, decode

HEADER = "Solve the problem step by step, one step a line.\n"  # 49 tokens of the character-level tokenizer


def grouped_prompts(tok):
    """4 questions x 8 samples (a group's rows side by side), then 3 step prefixes x k = 4 rollouts, interleaved."""
    questions = [tok(HEADER + f"question {i}: " + "x" * i)["input_ids"] for i in range(4)]
    prefixes = [tok(HEADER + f"question 1: x\nstep {j}: " + "y" * j)["input_ids"] for j in range(3)]
    return [q for q in questions for _ in range(8)] + [prefixes[i % 3] for i in range(12)]


def same(a, b):
    assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
    assert [g.finish_reason for g in a] == [g.finish_reason for g in b]
    for x, y in zip(a, b):
        assert len(x.logprobs) == len(y.logprobs)
        assert max((abs(p - q) for p, q in zip(x.logprobs, y.logprobs)), default=0.0) < 1e-4


@pytest.mark.parametrize("noise", ["greedy", "keyed"])
def test_shared_prompts_sample_what_a_prefill_and_cache_of_every_row_do(noise):
    """Grouped: each prompt prefilled once and its keys/values read once per group (shared_prefix.py)."""
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=5).eval()
    prompts = grouped_prompts(tok)

    def run(share):
        temperature = 0.0 if noise == "greedy" else 1.0
        generator = RowKeys(list(range(len(prompts)))) if noise == "keyed" else None
        decoder = FastDecoder(model, sync_every=4, share_prefill=share)
        out = decoder.generate(tok, prompts, 24, temperature, stop=["\n"], generator=generator)
        assert any(key[0] == "grouped" for key in decoder._buckets) == share
        return out, decoder.stats

    (shared, shared_stats), (full, full_stats) = run(True), run(False)
    same(shared, full)
    same(shared, decode(model, tok, prompts, 24, 0.0 if noise == "greedy" else 1.0, stop=["\n"],
                        generator=RowKeys(list(range(len(prompts)))) if noise == "keyed" else None))
    everything = sum(len(p) for p in prompts) + 20  # and 20 padding rows of one token (44 rows in a 64 bucket)
    distinct = sum(len(p) for p in {tuple(p) for p in prompts})
    assert full_stats["prefill_tokens"] == everything  # every prompt token is computed once or shared
    assert shared_stats["prefill_tokens"] + shared_stats["prefill_tokens_shared"] == everything - 20
    assert shared_stats["prefill_tokens"] < distinct * 1.2 < everything / 2
    assert full_stats["prefill_tokens_shared"] == 0


def test_a_few_duplicates_share_the_prefill_only_and_sample_the_same():
    """One repeated prompt among distinct ones: grouping would double the rows, so the rows keep their own cache
    and only the prefill is shared (copied)."""
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=4).eval()
    prompts = [tok(f"q{i}: " + "z" * i)["input_ids"] for i in range(15)] + [tok("q0: ")["input_ids"]]
    keys = RowKeys(list(range(16)))
    decoder = FastDecoder(model, sync_every=4)
    shared = decoder.generate(tok, prompts, 16, 1.0, generator=keys)
    assert not any(key[0] == "grouped" for key in decoder._buckets)
    assert decoder.stats["prefill_tokens_shared"] == len(prompts[0])
    same(shared, FastDecoder(model, sync_every=4, share_prefill=False).generate(tok, prompts, 16, 1.0, generator=keys))


def test_grouped_sampling_from_a_generator_records_the_trainers_logprobs():
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=6).eval()
    prompts = grouped_prompts(tok)
    gens = FastDecoder(model, sync_every=8).generate(tok, prompts, 20, temperature=1.2,
                                                     generator=torch.Generator().manual_seed(0))
    policy = HFPolicy(model, tok, device="cpu", fast_decode=False)
    for g in gens:
        ids = torch.tensor([g.prompt_ids + g.completion_ids])
        logprobs, _ = policy.token_logprobs(ids, torch.ones_like(ids), len(g.prompt_ids), temperature=1.2)
        assert torch.allclose(logprobs[0], torch.tensor(g.logprobs), atol=1e-4)


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


def finishing_groups():
    """(tokenizer, model, prompts, keys, stop strings): 16 prompts x 4 samples whose rows end at different times
    (EOS scores like 'x', vowels stop them), so whole groups finish and leave."""
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=1).eval()
    with torch.no_grad():
        model.lm_head.weight[tok.eos_token_id] = 1.2 * model.lm_head.weight[tok.convert_tokens_to_ids("x")]
    prompts = [tok(HEADER + f"question {i}: " + "x" * (i % 7))["input_ids"] for i in range(16) for _ in range(4)]
    return tok, model, prompts, RowKeys(list(range(64))), ["a", "e", "i", "o", "u", "7"]


def test_groups_that_finish_leave_for_a_smaller_grouped_bucket_and_sample_the_same():
    tok, model, prompts, keys, stop = finishing_groups()
    decoder = FastDecoder(model, sync_every=2)
    grouped = decoder.generate(tok, prompts, 40, 1.0, stop=stop, generator=keys)
    sizes = sorted(key[1] for key in decoder._buckets if key[0] == "grouped")
    assert len(sizes) > 1  # fewer groups once whole groups finished
    same(grouped, FastDecoder(model, sync_every=2, share_prefill=False).generate(tok, prompts, 40, 1.0, stop=stop,
                                                                                  generator=keys))


def test_chunks_keep_the_rows_of_a_prompt_together_and_sample_the_same():
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=5).eval()
    prompts = grouped_prompts(tok)[::-1]  # 44 rows
    keys = RowKeys(list(range(44)))
    chunked = FastDecoder(model, sync_every=4, max_batch=16)
    out = chunked.generate(tok, prompts, 12, 1.0, stop=["\n"], generator=keys)
    assert all(key[1] * key[2] <= 16 for key in chunked._buckets if key[0] == "grouped")
    assert chunked.stats["prefill_tokens_shared"] > sum(map(len, prompts)) // 2
    same(out, FastDecoder(model, sync_every=4, share_prefill=False).generate(tok, prompts, 12, 1.0, stop=["\n"],
                                                                             generator=keys))


@pytest.mark.parametrize("share", [True, False])
def test_a_prefill_in_passes_of_few_rows_samples_what_one_pass_does(monkeypatch, share):
    from lmgym.policies.decoding import fast

    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=5).eval()
    prompts, keys = grouped_prompts(tok), RowKeys(list(range(44)))
    whole = FastDecoder(model, sync_every=4, share_prefill=share).generate(tok, prompts, 12, 1.0, generator=keys)
    monkeypatch.setattr(fast, "PREFILL_ROWS", 5)
    monkeypatch.setattr(fast, "OWN_PREFILL_BYTES", 1)  # grouped: one group a pass
    parts = FastDecoder(model, sync_every=4, share_prefill=share).generate(tok, prompts, 12, 1.0, generator=keys)
    same(parts, whole)
