"""The fast sampling path (static cache; CUDA graphs on GPU) against the plain loop, on the CPU."""
import pytest
import torch

from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.decoding.fast import FastDecoder, supports_fast_decode
from lmgym.policies.decoding.generation import RowKeys, decode
from lmgym.policies.logprobs import chunked_token_logprobs
from tests.tiers import slow


def eos_prone_model(seed=1):
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=seed).eval()
    with torch.no_grad():  # EOS scores like 'x': rows finish at different times (exercises compaction)
        model.lm_head.weight[tok.eos_token_id] = 1.2 * model.lm_head.weight[tok.convert_tokens_to_ids("x")]
    return model, tok


def prompts_for(tok, n):
    return [tok(f"question {i}: " + "x" * (i % 7))["input_ids"] for i in range(n)]


def test_greedy_output_and_logprobs_match_the_plain_path():
    model, tok = eos_prone_model()
    prompts = prompts_for(tok, 12)
    plain = decode(model, tok, prompts, 40, temperature=0.0)
    fast = FastDecoder(model, sync_every=4).generate(tok, prompts, 40, temperature=0.0)
    assert any(g.finish_reason == "eos" for g in fast) and any(g.finish_reason == "length" for g in fast)
    for a, b in zip(plain, fast):
        assert a.completion_ids == b.completion_ids
        assert a.finish_reason == b.finish_reason
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4


def test_sampled_logprobs_equal_the_trainers_recomputation():
    model, tok = eos_prone_model()
    prompts = prompts_for(tok, 20)
    gens = FastDecoder(model, sync_every=8).generate(tok, prompts, 32, temperature=1.3,
                                                     generator=torch.Generator().manual_seed(0))
    policy = HFPolicy(model, tok, device="cpu", fast_decode=False)
    for g in gens:
        assert all(0 <= t < len(tok) for t in g.completion_ids)
        ids = torch.tensor([g.prompt_ids + g.completion_ids])
        lp, _ = policy.token_logprobs(ids, torch.ones_like(ids), len(g.prompt_ids), temperature=1.3)
        assert torch.allclose(lp[0], torch.tensor(g.logprobs), atol=1e-4)


def test_same_distribution_as_plain_sampling():
    """Both paths sample with the same Gumbel noise stream, so the same seed gives the same tokens."""
    model, tok = eos_prone_model()
    prompts = prompts_for(tok, 1) * 8
    plain = decode(model, tok, prompts, 6, temperature=1.0, generator=torch.Generator().manual_seed(3))
    fast = FastDecoder(model, sync_every=100).generate(tok, prompts, 6, temperature=1.0,
                                                       generator=torch.Generator().manual_seed(3))
    assert [g.completion_ids for g in plain] == [g.completion_ids for g in fast]


def test_stop_strings_cut_at_the_same_token():
    model, tok = eos_prone_model(seed=2)
    prompts = prompts_for(tok, 6)
    plain = decode(model, tok, prompts, 30, temperature=0.0, stop=["e", "a"])
    fast = FastDecoder(model, sync_every=5).generate(tok, prompts, 30, temperature=0.0, stop=["e", "a"])
    assert [g.completion_ids for g in plain] == [g.completion_ids for g in fast]
    assert [g.finish_reason for g in plain] == [g.finish_reason for g in fast]


def test_policy_uses_fast_path_when_asked_and_architecture_is_supported():
    model, tok = eos_prone_model()
    assert supports_fast_decode(model)
    assert HFPolicy(model, tok, device="cpu").fast_decoder is None  # CPU default: plain loop
    assert HFPolicy(model, tok, device="cpu", fast_decode=True).fast_decoder is not None


def test_chunked_logprobs_equal_unchunked_with_gradients():
    torch.manual_seed(0)
    hidden = torch.randn(3, 37, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    targets = torch.randint(0, 50, (3, 37))
    full_lp, full_ent = chunked_token_logprobs(hidden, weight, targets, 0.7, chunk_size=0)
    chunk_lp, chunk_ent = chunked_token_logprobs(hidden, weight, targets, 0.7, chunk_size=8)
    assert torch.allclose(full_lp, chunk_lp, atol=1e-5) and torch.allclose(full_ent, chunk_ent, atol=1e-5)
    g_full = torch.autograd.grad(full_lp.sum(), (hidden, weight))
    g_chunk = torch.autograd.grad(chunk_lp.sum(), (hidden, weight))
    for a, b in zip(g_full, g_chunk):
        assert torch.allclose(a, b, atol=1e-4)


def test_both_decoders_report_every_sampled_token_for_progress_bars():
    model, tok = eos_prone_model()
    prompts = prompts_for(tok, 12)
    for sample in (lambda hook: decode(model, tok, prompts, 40, temperature=0.0, on_tokens=hook),
                   lambda hook: FastDecoder(model, sync_every=4).generate(tok, prompts, 40, temperature=0.0,
                                                                          on_tokens=hook)):
        calls = []
        gens = sample(calls.append)
        assert len(calls) > 1 and sum(calls) == sum(len(g.completion_ids) for g in gens)


@slow
def test_per_prompt_stop_lists_cut_each_row_at_its_own_strings_in_both_paths():
    model, tok = eos_prone_model(seed=1)
    prompts, keys = prompts_for(tok, 6), RowKeys(list(range(40, 46)))  # keyed noise: rows don't share a stream
    free = decode(model, tok, prompts, 30, temperature=1.0, generator=keys)
    chars = [g.text[3] for g in free]  # a character each row writes early
    stops = [[chars[0]], None, [chars[2], "never"], [], [chars[4]], [chars[5], chars[0]]]
    plain = decode(model, tok, prompts, 30, temperature=1.0, stop=stops, generator=keys)
    fast = FastDecoder(model, sync_every=5).generate(tok, prompts, 30, temperature=1.0, stop=stops, generator=keys)
    assert [g.completion_ids for g in plain] == [g.completion_ids for g in fast]
    assert [g.finish_reason for g in plain] == [g.finish_reason for g in fast]
    for row, own in enumerate(stops):  # each row as if the whole batch had its stop list
        shared = decode(model, tok, prompts, 30, temperature=1.0, stop=own, generator=keys)[row]
        assert plain[row].completion_ids == shared.completion_ids and plain[row].finish_reason == shared.finish_reason
    for row in (0, 2, 4, 5):
        assert plain[row].finish_reason == "stop" and len(plain[row].text) <= 4
    for row in (1, 3):  # no stop strings: as free as without any
        assert plain[row].completion_ids == free[row].completion_ids and plain[row].finish_reason == "length"


def test_a_stop_list_per_prompt_must_match_the_prompts():
    model, tok = eos_prone_model()
    with pytest.raises(ValueError, match="2 per-prompt lists for 3 prompts"):
        decode(model, tok, prompts_for(tok, 3), 4, temperature=0.0, stop=[["a"], ["b"]])
    with pytest.raises(ValueError, match="stop must be"):
        FastDecoder(model).generate(tok, prompts_for(tok, 2), 4, temperature=0.0, stop="a")


def test_more_prompts_than_max_batch_are_sampled_in_chunks_with_the_same_tokens():
    """Keyed sampling does not depend on the batch, so chunks of 3 sample what one batch of 10 does; stop
    lists stay with their prompts."""
    model, tok = eos_prone_model()
    prompts = prompts_for(tok, 10)
    stops = [["x"] if i % 2 else None for i in range(10)]
    keys = RowKeys(list(range(100, 110)))
    whole = FastDecoder(model, sync_every=4, share_prefill=False).generate(tok, prompts, 24, 1.0, stop=stops,
                                                                           generator=keys)
    chunked_decoder = FastDecoder(model, sync_every=4, max_batch=3, share_prefill=False)
    chunked = chunked_decoder.generate(tok, prompts, 24, 1.0, stop=stops, generator=RowKeys(list(range(100, 110))))
    assert [g.completion_ids for g in chunked] == [g.completion_ids for g in whole]
    assert [g.finish_reason for g in chunked] == [g.finish_reason for g in whole]
    assert max(batch for batch, _ in chunked_decoder._buckets) <= 8  # never a bucket for 10 rows (16)


def test_the_bucket_cache_stays_within_its_byte_budget_dropping_the_least_recently_used_for_a_more_used_shape():
    model, tok = eos_prone_model()
    one_bucket = FastDecoder(model)
    one_bucket.generate(tok, prompts_for(tok, 8), 8, temperature=0.0)
    budget = one_bucket.cached_bytes // 2  # half of one (8, 256) bucket
    decoder = FastDecoder(model, cache_bytes=budget, length_bucket=16)
    decoder.admit_by_use = True  # the admission rule (off by default until measured on a GPU)
    for visit, length in enumerate((4, 20, 36, 36)):  # buckets (8, 32), (8, 48), (8, 64): 1/8, 3/16, 1/4 of it
        decoder.generate(tok, [p + [5] * length for p in prompts_for(tok, 8)], 8, temperature=0.0)
        assert decoder.cached_bytes <= budget
        if visit == 2:  # (8, 64) asked for once, as often as (8, 32) it would drop: it served its call alone
            assert list(decoder._buckets) == [(8, 32), (8, 48)] and decoder.stats["buckets_transient"] == 1
    assert list(decoder._buckets) == [(8, 48), (8, 64)]  # asked for twice, it dropped the least recently used


def test_captured_graphs_are_dropped_when_a_weight_moves_and_kept_when_updated_in_place():
    """A CUDA graph replays fixed addresses: FSDP2 re-allocates the whole weights at each gather (W1 under
    fsdp sampled garbage after the first update on two H100s), so graphs captured before must go."""
    model, tok = eos_prone_model()
    decoder = FastDecoder(model)
    prompts = prompts_for(tok, 8)
    decoder.generate(tok, prompts, 4, temperature=0.0)
    [buf] = decoder._buckets.values()
    captured = object()  # stands for a captured graph (the CPU captures none)
    buf.graph = captured
    with torch.no_grad():
        model.lm_head.weight.add_(0.01)  # an optimizer step: in place, same addresses
    decoder.generate(tok, prompts, 4, temperature=0.0)
    assert buf.graph is captured
    layer = model.model.layers[0].mlp.up_proj
    layer.weight.data = layer.weight.data.clone()  # same values at a new address, as an FSDP2 gather
    decoder.generate(tok, prompts, 4, temperature=0.0)
    assert buf.graph is None


def test_a_chunk_of_logits_holds_at_most_max_chunk_tokens_rows_times_positions(monkeypatch):
    """Many short rows (a token-budget micro-batch): the chunk shrinks to max_chunk_tokens // rows positions,
    with the same log-probs; few rows keep chunk_size positions."""
    import lmgym.policies.logprobs as logprobs

    shapes = []
    real = logprobs._chunk_logprobs
    monkeypatch.setattr(logprobs, "_chunk_logprobs",
                        lambda h, *rest: shapes.append(tuple(h.shape[:2])) or real(h, *rest))
    torch.manual_seed(0)
    hidden, weight = torch.randn(40, 30, 16), torch.randn(50, 16)
    targets = torch.randint(0, 50, (40, 30))
    whole, _ = real(hidden, weight, targets, 1.0, False)
    chunked, _ = logprobs.chunked_token_logprobs(hidden, weight, targets, chunk_size=64, max_chunk_tokens=200)
    assert torch.allclose(whole, chunked, atol=1e-6)
    assert max(rows * positions for rows, positions in shapes) <= 200 and shapes[0] == (40, 5)
    shapes.clear()
    logprobs.chunked_token_logprobs(hidden[:2], weight, targets[:2], chunk_size=8, max_chunk_tokens=200)
    assert shapes[0] == (2, 8)


@pytest.mark.parametrize("fast", [False, True])
def test_a_cancelled_row_ends_at_the_next_check_and_the_others_sample_on(fast):
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=0).eval()
    prompts = prompts_for(tok, 3)
    run = FastDecoder(model, sync_every=4).generate if fast else (lambda *args, **kw: decode(model, *args, **kw))
    whole = run(tok, prompts, 24, temperature=0.0)
    asked = []

    def cancelled_rows():  # the second check cancels row 1: after 2 steps (plain) or 2 host syncs of 4 (fast)
        asked.append(len(asked))
        return [1] if len(asked) >= 2 else []

    cut = run(tok, prompts, 24, temperature=0.0, cancelled_rows=cancelled_rows)
    kept = 8 if fast else 2
    assert len(whole[1].completion_ids) > kept
    assert cut[1].completion_ids == whole[1].completion_ids[:kept] and cut[1].finish_reason == "cancelled"
    assert cut[1].text == tok.decode(whole[1].completion_ids[:kept], skip_special_tokens=True)
    for i in (0, 2):
        assert cut[i].completion_ids == whole[i].completion_ids and cut[i].finish_reason == whole[i].finish_reason


def bucket_unit(model, tok) -> int:
    """Bytes of an (8 rows, 16 columns) bucket of `model`, measured from one a decoder made."""
    sizing = FastDecoder(model, length_bucket=16)
    sizing.generate(tok, prompts_for(tok, 8), 4, temperature=0.0)
    return sizing.cached_bytes // next(length for _, length in sizing._buckets) * 16


def test_shapes_cycling_past_the_budget_keep_the_ones_that_fit_instead_of_making_every_one_anew():
    """Three shapes visited in turn, a budget for two: least-recently-used eviction alone would drop each bucket
    just before it is wanted again (3 made a round). A new bucket pushes kept ones out only when they were asked
    for less often (bucket_admission.py), so two stay and the third serves its call alone (1 made a round), with
    the same tokens as an unbounded cache."""
    model, tok = eos_prone_model()
    unit = bucket_unit(model, tok)
    bounded = FastDecoder(model, cache_bytes=7 * unit, length_bucket=16)
    bounded.admit_by_use = True  # the admission rule (off by default until measured on a GPU)
    unbounded = FastDecoder(model, length_bucket=16)
    rounds, outputs = 4, {}
    for decoder in (bounded, unbounded):
        outputs[decoder] = [[g.completion_ids for g in decoder.generate(
            tok, [p + [5] * length for p in prompts_for(tok, 8)], 8, temperature=0.0)]
            for _ in range(rounds) for length in (4, 20, 36)]  # buckets (8, 32), (8, 48), (8, 64): 2, 3, 4 units
    assert outputs[bounded] == outputs[unbounded]
    assert list(bounded._buckets) == [(8, 32), (8, 48)] and bounded.cached_bytes <= 7 * unit
    assert bounded.stats["buckets_made"] == 3 + (rounds - 1)
    assert bounded.stats["buckets_transient"] == rounds and bounded.stats["buckets_evicted"] == 0
    lru = FastDecoder(model, cache_bytes=7 * unit, length_bucket=16)
    assert lru.admit_by_use is False  # the default: least recently used alone
    for _ in range(rounds):
        for length in (4, 20, 36):
            lru.generate(tok, [p + [5] * length for p in prompts_for(tok, 8)], 8, temperature=0.0)
    assert lru.stats["buckets_made"] == 3 * rounds and lru.stats["buckets_transient"] == 0


def test_a_keeping_block_holds_more_buckets_and_trims_them_to_the_usual_budget_after_it():
    """Step labels visit more (batch, length) shapes than the usual budget holds; inside `keeping` they stay (no
    bucket and graph made anew), and after it the least recently used beyond the usual budget are dropped."""
    model, tok = eos_prone_model()
    unit = bucket_unit(model, tok)
    decoder = FastDecoder(model, cache_bytes=5 * unit, length_bucket=16)
    decoder.admit_by_use = True  # the admission rule (off by default until measured on a GPU)

    def visit_three_shapes():  # buckets (8, 32), (8, 48), (8, 64): 2, 3 and 4 units
        for length in (4, 20, 36):
            decoder.generate(tok, [p + [5] * length for p in prompts_for(tok, 8)], 8, temperature=0.0)

    with decoder.keeping(9 * unit):
        visit_three_shapes()
        visit_three_shapes()
        assert list(decoder._buckets) == [(8, 32), (8, 48), (8, 64)]
        assert decoder.stats["buckets_made"] == 3  # the second round made none
    assert decoder.cache_bytes == 5 * unit and list(decoder._buckets) == [(8, 64)]
    assert decoder.stats["buckets_evicted"] == 2  # trimmed to the usual budget
    visit_three_shapes()  # the usual budget: each shape made again
    assert decoder.stats["buckets_made"] == 6 and decoder.cached_bytes <= 5 * unit
    made, evicted, transient = (decoder.stats[k] for k in ("buckets_made", "buckets_evicted", "buckets_transient"))
    assert (made, evicted, transient) == (6, 3, 1) and made - evicted - transient == len(decoder._buckets)
    # (8, 32) pushed out (8, 64), asked for less often; (8, 64) would have pushed out both, asked for as often: it
    # served its call and was dropped
    with decoder.keeping(None):  # no bound inside
        visit_three_shapes()
        assert len(decoder._buckets) == 3
    assert decoder.cached_bytes <= 5 * unit


def test_the_label_configs_kept_cache_share_is_checked():
    from lmgym.traindata.step_data.policy_labels import PolicyLabelConfig

    assert PolicyLabelConfig().kept_cache_share == 0.4
    with pytest.raises(ValueError, match="kept_cache_share"):
        PolicyLabelConfig(kept_cache_share=1.0)
