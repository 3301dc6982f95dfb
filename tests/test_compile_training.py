"""Regional compilation of the training and scoring passes (`torch_compile`), and the frozen reference's
linear weights stored in the autocast dtype, against the eager passes, on the CPU."""
import copy

import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.compiled_layers import compiled_layers
from lmgym.policies.hf import cast_linear_weights
from tests.distributed_worker import fixed_trajectories
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401

pytestmark = slow  # the slow tier (tests/tiers.py): compiles the training layers

BACKEND = "aot_eager"  # traces and differentiates as Inductor does, without compiling kernels (seconds, not minutes)


def batch():
    ids = torch.tensor([[1, 5, 9, 14, 22, 31, 7], [1, 6, 9, 40, 3, 0, 0]])
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    return ids, mask, torch.tensor([[3, 4, 5, 6], [3, 4, 4, 4]])


def scored(policy):
    policy.model.zero_grad()
    ids, mask, completion = batch()
    logprobs, entropy = policy.token_logprobs(ids, mask, completion)
    (logprobs.sum() + 0.1 * entropy.sum()).backward()
    return logprobs.detach(), {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}


def test_compiled_layers_score_and_differentiate_as_the_eager_ones():
    tok = build_tiny_tokenizer()
    eager = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    compiled = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    assert compiled.compile_layers(BACKEND)
    assert compiled_layers(compiled.model) == len(compiled.model.model.layers) == 2
    (lp_a, grads_a), (lp_b, grads_b) = scored(eager), scored(compiled)
    assert torch.allclose(lp_a, lp_b, atol=1e-5)
    assert set(grads_a) == set(grads_b) and all(torch.allclose(grads_a[n], grads_b[n], atol=1e-5) for n in grads_a)


def grpo_step(tmp_path, torch_compile):
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    config = GRPOConfig(learning_rate=1e-2, micro_batch_size=2, output_dir=str(tmp_path / str(torch_compile)),
                        progress=False, samples_per_prompt=4, prompts_per_iteration=2, kl_coeff=0.5,
                        torch_compile=torch_compile, torch_compile_backend=BACKEND)
    algo = GRPO(policy, make("ToyDigits-v0"), config)
    trajectories = fixed_trajectories()
    algo.prepare(trajectories)
    algo.update_step(trajectories)
    return algo


def test_a_grpo_step_with_torch_compile_ends_where_the_eager_step_does(tmp_path):
    eager, compiled = grpo_step(tmp_path, None), grpo_step(tmp_path, True)  # None: off on the CPU
    assert compiled_layers(eager.policy.model) == 0
    for algo in (compiled.policy, compiled.ref_policy):  # the KL reference has its own model: compiled too
        assert compiled_layers(algo.model) == len(algo.model.model.layers)
    a, b = dict(eager.policy.model.named_parameters()), dict(compiled.policy.model.named_parameters())
    assert all(torch.allclose(a[n], b[n], atol=1e-5) for n in a)
    initial = dict(build_tiny_model(build_tiny_tokenizer(), seed=0).named_parameters())
    assert any(not torch.equal(a[n], initial[n]) for n in a)  # the step moved the weights


def test_a_reference_with_linear_weights_in_the_autocast_dtype_scores_the_same():
    """Autocast casts every linear weight to bf16 at each pass; storing them so gives the same log-probs."""
    tok = build_tiny_tokenizer()
    reference = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    stored = copy.deepcopy(reference)
    cast_linear_weights(stored.model.model, torch.bfloat16)
    assert stored.model.model.layers[0].mlp.down_proj.weight.dtype == torch.bfloat16
    assert stored.model.model.embed_tokens.weight.dtype == torch.float32  # embeddings and norms keep theirs
    assert stored.model.model.norm.weight.dtype == torch.float32
    ids, mask, completion = batch()
    for policy in (reference, stored):  # what `autocast()` is on CUDA, here on the CPU
        policy.autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    with torch.no_grad():
        expected, _ = reference.token_logprobs(ids, mask, completion)
        got, _ = stored.token_logprobs(ids, mask, completion)
    assert torch.equal(expected, got)
    assert reference.frozen_copy().model.model.layers[0].mlp.down_proj.weight.dtype == torch.float32  # CPU: kept


def test_compiled_lora_layers_score_and_differentiate_as_the_eager_ones():
    """LoRA (peft) layers inside the compiled decoder layers, adapters on and switched off (the KL reference)."""
    from lmgym.policies import LoraSettings

    def lora_policy():
        tok = build_tiny_tokenizer()
        torch.manual_seed(1)  # the LoRA A matrices
        policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu", lora=LoraSettings(r=4, alpha=8))
        with torch.no_grad():  # a nonzero adapter (peft starts B at zero)
            for name, p in policy.model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.1)
        return policy

    eager, compiled = lora_policy(), lora_policy()
    assert compiled.compile_layers(BACKEND)
    (lp_a, grads_a), (lp_b, grads_b) = scored(eager), scored(compiled)
    assert torch.allclose(lp_a, lp_b, atol=1e-5)
    assert set(grads_a) == set(grads_b) and all(torch.allclose(grads_a[n], grads_b[n], atol=1e-5) for n in grads_a)
    ids, mask, completion = batch()
    with torch.no_grad(), eager.model.disable_adapter(), compiled.model.disable_adapter():
        assert torch.allclose(eager.token_logprobs(ids, mask, completion)[0],
                              compiled.token_logprobs(ids, mask, completion)[0], atol=1e-5)


def test_one_row_rotary_tables_are_expanded_once_a_forward_and_grad_free_passes_get_detached_inputs():
    """Every layer of a forward gets the same one-row tables: one expansion serves them all (a copy a layer call
    was 30 copies a forward), a new forward's tables or row count make a new one; the values are the same."""
    from lmgym.policies.compiled_layers import OneGraphInputs

    prepare = OneGraphInputs()
    cos, sin = torch.randn(1, 5, 4), torch.randn(1, 5, 4)
    hidden = torch.randn(3, 5, 8, requires_grad=True)
    with torch.no_grad():
        (first,), kwargs = prepare(3, (hidden,), {"position_embeddings": (cos, sin)})
        _, again = prepare(3, (hidden,), {"position_embeddings": (cos, sin)})
    assert not first.requires_grad and torch.equal(first, hidden.detach())
    expanded = kwargs["position_embeddings"]
    assert again["position_embeddings"] is expanded and expanded[0].shape == (3, 5, 4)
    assert torch.equal(expanded[0], cos.expand(3, -1, -1)) and expanded[0].is_contiguous()
    assert prepare(2, (hidden,), {"position_embeddings": (cos, sin)})[1]["position_embeddings"][0].shape[0] == 2
    assert prepare(3, (hidden,), {"position_embeddings": (cos.clone(), sin)})[1]["position_embeddings"] is not expanded
    (kept,), _ = prepare(3, (hidden,), {})  # gradients on: the hidden states keep theirs
    assert kept is hidden
