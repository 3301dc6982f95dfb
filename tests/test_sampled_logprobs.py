"""Log-probs of the sampled tokens alone (policies/logprobs.py: sampled_token_outputs): the lm-head runs on the
positions a loss reads, with the values and gradients the full pass gives there, and 0 elsewhere."""
import torch

from lmgym.buffers import Trajectory, collate
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.logprobs import PACK_BELOW, sampled_token_outputs


def multi_turn_rows(tok, rows: int = 3, sampled_every: int = 3):
    """Trajectories whose completions interleave sampled tokens (mask 1: two in every `sampled_every` pairs)
    with env turns (mask 0)."""
    out = []
    for r in range(rows):
        ids = tok(f"turn {r} " + "abc " * (3 + r))["input_ids"]
        mask = [int((i // 2 + r) % sampled_every == 0) for i in range(len(ids))]
        out.append(Trajectory(prompt_ids=tok("question")["input_ids"], completion_ids=ids,
                              logprobs=[0.0] * len(ids), completion_mask=mask, reward=0.0))
    return out


def spy_on_select(policy, seen: list):
    real = policy.completion_outputs
    policy.completion_outputs = lambda *a, **kw: seen.append(kw.get("select")) or real(*a, **kw)


def test_sampled_positions_get_the_full_passs_log_probs_and_gradients_and_the_rest_zero():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=3), tok, device="cpu", logprob_chunk=2)  # several chunks
    batch = collate(multi_turn_rows(tok), pad_id=tok.pad_token_id)
    select = batch.loss_mask > 0
    assert 0 < int(select.sum()) <= PACK_BELOW * select.numel()  # a multi-turn micro-batch: packed
    full_lp, full_ent, _ = policy.completion_outputs(batch.input_ids, batch.attention_mask,
                                                     batch.completion_positions)
    (full_lp * batch.loss_mask).sum().backward()
    full_grads = [p.grad.clone() for p in policy.model.parameters()]
    policy.model.zero_grad()
    seen = []
    spy_on_select(policy, seen)
    lp, ent, _ = sampled_token_outputs(policy, batch, 1.0)
    assert seen[0] is select or torch.equal(seen[0], select)
    (lp * batch.loss_mask).sum().backward()
    torch.testing.assert_close(lp[select], full_lp[select], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ent[select], full_ent[select], rtol=1e-5, atol=1e-6)
    assert (lp[~select] == 0).all() and (ent[~select] == 0).all()
    for p, g in zip(policy.model.parameters(), full_grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)


def test_a_micro_batch_mostly_sampled_takes_the_full_pass_bit_for_bit():
    """Single-turn rows (only padding unread): the full pass as before, the same bits at the sampled tokens."""
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=3), tok, device="cpu", logprob_chunk=2)
    batch = collate(multi_turn_rows(tok, sampled_every=1), pad_id=tok.pad_token_id)
    select = batch.loss_mask > 0
    assert int(select.sum()) > PACK_BELOW * select.numel()
    seen = []
    spy_on_select(policy, seen)
    lp, ent, _ = sampled_token_outputs(policy, batch, 1.0)
    full_lp, full_ent, _ = policy.completion_outputs(batch.input_ids, batch.attention_mask,
                                                     batch.completion_positions)
    assert seen[0] is None
    assert torch.equal(lp[select], full_lp[select]) and torch.equal(ent[select], full_ent[select])
    assert (lp[~select] == 0).all()


class ScoresOnly:
    """A policy with no backbone to reach into: every position gets a log-prob and an entropy of 1."""

    def token_logprobs(self, input_ids, attention_mask, completion_start, temperature=1.0):
        return torch.ones(completion_start.shape), torch.ones(completion_start.shape)


def test_a_policy_without_a_backbone_reads_zero_outside_the_sampled_tokens():
    tok = build_tiny_tokenizer()
    batch = collate(multi_turn_rows(tok), pad_id=tok.pad_token_id)
    lp, ent, hidden = sampled_token_outputs(ScoresOnly(), batch, 1.0)
    select = batch.loss_mask > 0
    assert hidden is None and (lp[~select] == 0).all() and (ent[~select] == 0).all()
    assert (lp[select] == 1).all() and (ent[select] == 1).all()
