"""REINFORCE-stable's periodic reference re-sync under LoRA: a second adapter on the same model."""
from __future__ import annotations

import torch

from lmgym.algorithms import ReinforceStable, ReinforceStableConfig
from lmgym.algorithms import reference as ref
from lmgym.buffers import collate
from lmgym.envs import make
from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.reference_adapter import REFERENCE_ADAPTER, has_reference_adapter
from tests import checkpoint_state
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


def lora_policy() -> HFPolicy:
    tok = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu",
                    lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))


def algo(tmp_path, iterations: int = 3) -> ReinforceStable:
    config = ReinforceStableConfig(
        train_iterations=iterations, prompts_per_iteration=4, max_new_tokens=4, micro_batch_size=4,
        learning_rate=5e-2, kl_coeff=0.1, ref_sync_every=2, save_every=1, keep_checkpoints=5, eval_at_start=False,
        progress=False, output_dir=str(tmp_path / "run"))
    return ReinforceStable(lora_policy(), make("ToyDigits-v0"), config)


def kl_to_reference(a: ReinforceStable, trajectories) -> float:
    """Mean |policy - reference| log-prob gap over the completion tokens of `trajectories`."""
    batch = collate(trajectories, a.pad_id, "cpu")
    with torch.no_grad():
        policy = a.policy.token_logprobs(batch.input_ids, batch.attention_mask, batch.completion_positions)[0]
    reference = ref.reference_logprobs(a.ref_policy, batch, 1.0)
    mask = batch.loss_mask.float()
    return float(((policy - reference).abs() * mask).sum() / mask.sum())


def test_reinforce_stable_under_lora_resyncs_its_reference_adapter(tmp_path):
    a = algo(tmp_path)
    trainable = [id(p) for p in a.policy.parameters()]
    rows = a.train()
    kl = {row["iteration"]: row["kl"] for row in rows if "kl" in row}
    assert kl[1] == 0.0 and kl[2] > 1e-4  # the base until the first sync, which follows iteration 2
    assert abs(kl[3]) < 1e-6  # measured before iteration 3's update: the reference is the policy again
    assert has_reference_adapter(a.policy.model) and a.policy.model.active_adapter == "default"
    assert [id(p) for p in a.policy.parameters()] == trainable  # the reference adapter never trains
    assert not any(REFERENCE_ADAPTER in n for n, p in a.policy.model.named_parameters() if p.requires_grad)
    sample = a.collect()
    assert kl_to_reference(a, sample) > 1e-4  # iteration 3 moved the policy away from the synced reference
    ref.sync_reference(a.ref_policy, a.policy)
    assert kl_to_reference(a, sample) < 1e-6


@slow
def test_a_resume_restores_the_reference_adapter_and_a_saved_model_leaves_it_out(tmp_path):
    a = algo(tmp_path)
    a.train()
    sample = a.collect()
    folders = tmp_path / "run"
    state = checkpoint_state.read(folders / "checkpoint-3")
    assert state["reference_source"] == "adapter" and state["reference"] is None
    fresh = algo(tmp_path / "fresh")
    fresh.load(folders / "checkpoint-3")
    batch = collate(sample, a.pad_id, "cpu")
    assert torch.allclose(ref.reference_logprobs(fresh.ref_policy, batch, 1.0),
                          ref.reference_logprobs(a.ref_policy, batch, 1.0), atol=1e-6)
    assert kl_to_reference(fresh, sample) > 1e-4  # the policy is iteration 3's, the reference iteration 2's
    fresh.load(folders / "checkpoint-1")  # never synced: the reference is the base again
    assert not has_reference_adapter(fresh.policy.model)
    base = HFPolicy(build_tiny_model(build_tiny_tokenizer(), seed=0), build_tiny_tokenizer(), device="cpu")
    assert torch.allclose(ref.reference_logprobs(fresh.ref_policy, batch, 1.0),
                          ref.reference_logprobs(base, batch, 1.0), atol=1e-5)
    a.policy.save(tmp_path / "adapter")
    assert not (tmp_path / "adapter" / REFERENCE_ADAPTER).exists()
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
