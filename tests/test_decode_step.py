"""The fast decoder's device-side step (policies/decoding/step.py) against the host loop it replaced, and the
capture of that step keyed on the sampling settings, on the CPU."""
import pytest
import torch

from lmgym.policies.decoding.fast import FastDecoder
from lmgym.policies.decoding.generation import RowKeys, _eos_ids, keyed_uniform, row_key, sample_tokens
from lmgym.policies.decoding.step import LoopState, Outputs, Sampling, sample_and_record
from tests.test_fast_decode import eos_prone_model, prompts_for
from tests.tiers import slow

BATCH, COUNT, VOCAB, STEPS, EOS, PAD = 8, 6, 16, 10, [3, 7], 0
SETTINGS = [(0.0, 1.0, "torch"), (1.0, 1.0, "torch"), (1.3, 0.8, "torch"), (1.0, 1.0, "keys"), (0.7, 0.9, "keys")]


def noise(kind: str):
    return torch.Generator().manual_seed(4) if kind == "torch" else RowKeys([row_key(9, i) for i in range(COUNT)])


def host_loop(logits, temperature, top_p, generator, compact_after, permute):
    """The previous fast loop's bookkeeping: Python-int steps, prompt-indexed outputs, compaction by `keep`."""
    rows = torch.arange(BATCH)
    out_tokens = torch.full((COUNT, STEPS), PAD)
    out_logp = torch.zeros((COUNT, STEPS))
    lengths = torch.full((COUNT,), STEPS)
    reason_eos = torch.zeros(COUNT, dtype=torch.bool)
    done = torch.arange(BATCH) >= COUNT
    inputs = []
    for t in range(STEPS):
        tokens, logp = sample_tokens(logits[t], temperature, top_p, generator, rows, t)
        real = rows < COUNT
        live = real & ~done
        idx = rows[real]
        out_tokens[idx, t] = torch.where(live[real], tokens[real], out_tokens[idx, t])
        out_logp[idx, t] = torch.where(live[real], logp[real], out_logp[idx, t])
        hit_eos = live & torch.isin(tokens, torch.tensor(EOS))
        lengths[rows[hit_eos]] = t + 1
        reason_eos[rows[hit_eos]] = True
        done = done | hit_eos
        if t == compact_after:
            keep, live_count = permute(done)
            rows, done, tokens = rows[keep].clone(), done[keep].clone(), tokens[keep]
            rows[live_count:] = torch.iinfo(torch.long).max
            done[live_count:] = True
        inputs.append(torch.where(done, PAD, tokens))
    cut = lengths.tolist()
    return ([r[:k] for r, k in zip(out_tokens.tolist(), cut)], [r[:k] for r, k in zip(out_logp.tolist(), cut)],
            reason_eos.tolist(), inputs)


def reversed_live(done):
    """Compaction's `keep` in another order: the live rows reversed, padded with duplicates of the first."""
    keep = (~done).nonzero().squeeze(-1).flip(0)
    return torch.cat([keep, keep[:1].repeat(BATCH - keep.numel())]), keep.numel()


@pytest.mark.parametrize("temperature,top_p,kind", SETTINGS)
def test_the_device_step_records_what_the_host_loop_did(temperature, top_p, kind):
    """Tokens, log-probs, lengths, EOS flags and next inputs equal the host-int loop's, through a compaction that
    reorders the rows (their RowKeys keys must follow them) and adds finished filler rows."""
    torch.manual_seed(0)
    logits = torch.randn(STEPS, BATCH, VOCAB) * 2  # two EOS ids of 16: rows finish at different steps
    expected = host_loop(logits, temperature, top_p, noise(kind), 3, reversed_live)
    generator = noise(kind)
    sampling = Sampling(temperature, top_p, generator, EOS, PAD, torch.device("cpu"))
    state, other = LoopState(BATCH, 32, torch.device("cpu")), LoopState(BATCH, 32, torch.device("cpu"))
    state.start(COUNT, torch.arange(BATCH) + 5, 11, STEPS, generator)
    outputs = Outputs(COUNT, STEPS, PAD, torch.device("cpu"))
    inputs = []
    for t in range(STEPS):
        sample_and_record(state, logits[t], sampling)
        if t == 3:
            keep, live_count = reversed_live(state.done)
            outputs.take(state, (state.rows < COUNT) & state.done)
            other.select(state, keep, live_count, PAD)
            state = other
        inputs.append(state.tokens.clone())
        assert state.step.tolist() == [t + 1] and state.column.tolist() == [12 + t]
        assert state.valid[:, 12:13 + t].all() and not state.valid[:, 13 + t:].any()
    outputs.take(state, state.rows < COUNT)
    tokens, logp, eos = outputs.lists()
    assert tokens == expected[0] and logp == expected[1] and eos == expected[2]
    assert all(torch.equal(a, b) for a, b in zip(inputs, expected[3]))
    assert any(eos) and not all(eos)  # the test saw rows finish and rows run on
    real = state.rows < COUNT
    assert state.positions[real].tolist() == [5 + r + STEPS for r in state.rows[real].tolist()]


def test_keyed_noise_reads_the_step_from_a_tensor_as_from_an_int():
    keys = torch.tensor([row_key(i, 3) for i in range(16)])
    for step in (0, 1, 255, 2 ** 20, 2 ** 40 + 3):
        assert torch.equal(keyed_uniform(keys, step), keyed_uniform(keys, torch.tensor([step])))


@slow
def test_a_captured_step_is_replayed_only_for_the_settings_it_was_captured_with():
    """A fake capture stands for a CUDA graph: its replay runs the step with the settings seen at capture, as a
    graph would (temperature, top_p and the generator baked in). Replaying it for other settings would sample
    other tokens than the eager decoder does."""
    model, tok = eos_prone_model()
    prompts = prompts_for(tok, 8)
    graphed = FastDecoder(model, sync_every=4, use_cuda_graphs=True)
    captures = []

    def capture(buf, sampling):
        captures.append((len(buf.rows), sampling.key))
        return type("FakeGraph", (), {"replay": lambda self: graphed._decode_and_sample(buf, sampling)})()

    graphed._capture = capture
    eager = FastDecoder(model, sync_every=4)
    first, second = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    keys_a, keys_b = RowKeys(list(range(10, 18))), RowKeys(list(range(30, 38)))
    calls = [  # (temperature, top_p, generator name): whether it may reuse an earlier capture
        ((1.0, 1.0, "first"), False), ((1.0, 1.0, "first"), True), ((0.7, 1.0, "first"), False),
        ((0.7, 0.8, "first"), False), ((0.7, 0.8, "second"), False), ((0.7, 0.8, "keys_a"), False),
        ((0.7, 0.8, "keys_b"), True), ((0.0, 1.0, "first"), False), ((0.0, 1.0, "second"), True),
    ]
    eos_ids = _eos_ids(tok, model)
    for call, ((temperature, top_p, name), reuses) in enumerate(calls):
        before = len(captures)
        generator = {"first": first, "second": second, "keys_a": keys_a, "keys_b": keys_b}[name]
        outs = []
        for decoder in (graphed, eager):
            if isinstance(generator, torch.Generator):  # the same noise stream for both decoders
                generator.manual_seed(call)
            outs.append(decoder.generate(tok, prompts, 12, temperature, top_p, generator=generator))
        assert [g.completion_ids for g in outs[0]] == [g.completion_ids for g in outs[1]]
        assert [g.logprobs for g in outs[0]] == [g.logprobs for g in outs[1]]
        key = Sampling(temperature, top_p, generator, eos_ids, tok.pad_token_id, torch.device("cpu")).key
        assert all(k == key for _, k in captures[before:])
        assert (len(captures) == before) == reuses, (temperature, top_p, name)
    assert graphed._buckets[(8, 256)].graph is not None
