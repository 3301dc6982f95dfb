"""One rule for the padding id (`lmgym.policies.pad_id`): the pad token, else EOS; every padding site uses it,
so a tokenizer without a pad token pads with EOS everywhere (SFT included, which used to pad with 0)."""
from __future__ import annotations

import pytest
import torch

from lmgym.algorithms import GRPO, SFT, GRPOConfig, SFTConfig
from lmgym.algorithms.mcts_search import last_step_logits
from lmgym.algorithms.preference_encoding import completion_logprobs
from lmgym.envs import make
from lmgym.policies import HFPolicy, ProcessRewardModel, build_tiny_model, build_tiny_tokenizer, pad_id
from lmgym.policies.decoding import generation
from lmgym.traindata import SFTExample


@pytest.fixture(scope="module")
def no_pad_policy() -> HFPolicy:
    tok = build_tiny_tokenizer()
    tok.pad_token = None
    assert tok.pad_token_id is None and tok.eos_token_id not in (None, 0)
    return HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")


def test_pad_id_is_the_pad_token_else_eos_else_one_line():
    tok = build_tiny_tokenizer()
    assert pad_id(tok) == tok.pad_token_id == 0
    tok.pad_token = None
    assert pad_id(tok) == tok.eos_token_id
    tok.eos_token = None
    with pytest.raises(ValueError, match=r"^the tokenizer has neither a pad nor an EOS token: set tokenizer.pad_token"):
        pad_id(tok)


def test_a_tokenizer_without_a_pad_token_pads_with_eos_everywhere(no_pad_policy, tmp_path, monkeypatch):
    eos = no_pad_policy.tokenizer.eos_token_id
    sft = SFT(no_pad_policy, [SFTExample("What is 1 + 2?", "#### 3")],
              SFTConfig(train_iterations=1, examples_per_iteration=1, micro_batch_size=1, max_length=60,
                        progress=False, output_dir=str(tmp_path / "sft")))
    assert sft.pad_id == eos  # was 0
    grpo = GRPO(no_pad_policy, make("Arithmetic-v0", level=1), GRPOConfig(output_dir=str(tmp_path / "grpo"),
                                                                          progress=False))
    assert grpo.pad_id == eos
    padded = []
    real_left_pad = generation.left_pad
    monkeypatch.setattr(generation, "left_pad", lambda rows, pad, device: padded.append(pad) or real_left_pad(rows, pad,
                                                                                                             device))
    no_pad_policy.sample([[5, 6, 7], [5]], max_new_tokens=2, temperature=0.0)
    assert padded == [eos]
    prm = ProcessRewardModel.from_policy(no_pad_policy)
    ids, _, _ = prm.step_batch([[5, 6, 7], [5]], [[2], [0]])
    assert ids[1].tolist() == [5, eos, eos]
    # these built a tensor of None before: rows of different lengths now pad with EOS
    assert last_step_logits(prm, [("What is 1 + 2?", ("1 + 2 = 3",)), ("Hi?", ("a\n", "b"))]).shape == (2,)
    summed, counts = completion_logprobs(no_pad_policy, [([5, 6, 7], [8]), ([5], [8, 9])])
    assert counts.tolist() == [1, 2] and torch.isfinite(summed).all()
