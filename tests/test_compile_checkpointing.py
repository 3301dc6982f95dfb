"""Compiled layers with activation checkpointing (policies/compiled_layers.py): two stages train in one process,
and a checkpointed entry Dynamo cannot compile falls back to uncompiled checkpointing with one warning and the
eager gradients.

Both places transformers puts its checkpoint are covered: inside the layer's forward (the release installed
here) and around the layer's call (releases up to 5.17, the GPU image's), set up by `layout`. On CUDA autograd
runs the backward, so the checkpoint's recomputation, on a device thread of its own, whose intra-op thread
count (part of Dynamo's guarded global state) differs from the main thread's; `device_thread_backward` runs
every backward with another thread count to put the CPU in the same position.
"""
import functools
import warnings

import pytest
import torch

from lmgym.algorithms import GRPO, SFT, GRPOConfig, SFTConfig
from lmgym.envs import make
from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.compiled_layers import COMPILATION, compiled_layers
from lmgym.policies.padded_passes import checkpointed_layers
from tests.distributed_worker import fixed_trajectories
from tests.test_compile_training import batch
from tests.test_gradient_checkpointing import LAYERS, assert_same, training_pass
from tests.test_sft import PAIRS
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401

pytestmark = slow  # the slow tier (tests/tiers.py): compiles the training layers

BACKEND = "aot_eager"  # as tests/test_compile_training.py: traces and differentiates as Inductor does
FALLBACK = "the checkpointed forward could not be compiled whole"


@pytest.fixture(params=["installed", "around_call"])
def layout(request, monkeypatch) -> str:
    """Where transformers checkpoints a layer: as installed, or around its call (transformers <= 5.17's
    `GradientCheckpointingLayer.__call__`, put back when the installed release checkpoints inside `forward`)."""
    from transformers.modeling_layers import GradientCheckpointingLayer
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    wrapped = LlamaDecoderLayer.forward
    if request.param == "around_call" and wrapped.__code__.co_name == "forward_with_checkpointing":
        def call_around(self, *args, **kwargs):
            if self.gradient_checkpointing and self.training:
                return self._gradient_checkpointing_func(functools.partial(torch.nn.Module.__call__, self, **kwargs),
                                                         *args)
            return torch.nn.Module.__call__(self, *args, **kwargs)

        monkeypatch.setattr(LlamaDecoderLayer, "forward", wrapped.__wrapped__)
        monkeypatch.setattr(GradientCheckpointingLayer, "__call__", call_around, raising=False)
    return request.param


@pytest.fixture
def device_thread_backward(monkeypatch) -> None:
    """Every backward runs with another intra-op thread count than the forward, as on CUDA's autograd thread."""
    backward = torch.Tensor.backward

    def elsewhere(self, *args, **kwargs):
        threads = torch.get_num_threads()
        torch.set_num_threads(1 if threads > 1 else 2)
        try:
            return backward(self, *args, **kwargs)
        finally:
            torch.set_num_threads(threads)

    monkeypatch.setattr(torch.Tensor, "backward", elsewhere)


def lora_policy(checkpointing: bool = False) -> HFPolicy:
    """The tiny model with a LoRA adapter (nonzero B, so both adapter matrices get gradients)."""
    tok = build_tiny_tokenizer()
    torch.manual_seed(1)
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu", lora=LoraSettings(r=4, alpha=8),
                      gradient_checkpointing=checkpointing)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(2)) * 0.1)
    return policy


def test_sft_then_lora_grpo_with_checkpointing_train_compiled_in_one_process(layout, device_thread_backward,
                                                                              tmp_path):
    """The issue's crash in small (examples/rag_agent.py's gpu preset until it dropped checkpointing, and any
    --grpo_config that sets it): full-weight SFT, then GRPO with LoRA and checkpointing, each with compiled
    layers, in one process. The second stage compiles its own graphs; its checkpointed passes
    stay compiled and the recomputation never looks a graph up again."""
    tok = build_tiny_tokenizer()
    sft = SFT(HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu"), PAIRS,
              SFTConfig(train_iterations=1, examples_per_iteration=2, max_length=120, micro_batch_size=2,
                        learning_rate=3e-3, progress=False, eval_at_start=False, save_every=0,
                        output_dir=str(tmp_path / "sft"), torch_compile=True, torch_compile_backend=BACKEND))
    sft_rows = sft.train()
    assert compiled_layers(sft.policy.model) == LAYERS and checkpointed_layers(sft.policy.model) == 0

    config = GRPOConfig(learning_rate=1e-2, micro_batch_size=2, samples_per_prompt=4, prompts_per_iteration=2,
                        kl_coeff=0.04, progress=False, output_dir=str(tmp_path / "grpo"), torch_compile=True,
                        torch_compile_backend=BACKEND, gradient_checkpointing=True)
    grpo = GRPO(lora_policy(), make("ToyDigits-v0"), config)
    layers = grpo.policy.backbone_and_head()[0].layers
    assert checkpointed_layers(grpo.policy.model) == LAYERS == compiled_layers(grpo.policy.model)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=f".*{FALLBACK}")
        trajectories = fixed_trajectories()
        grpo.prepare(trajectories)
        stats = grpo.update(trajectories)  # in training mode, as `train` runs it
    assert torch.isfinite(torch.tensor(list(stats.values()))).all(), stats
    assert [row["loss"] for row in sft_rows] and all(torch.isfinite(torch.tensor(row["loss"])) for row in sft_rows)
    compilation = getattr(layers[0], COMPILATION)
    assert compilation.eager_reason is None  # checkpointed passes compiled throughout
    assert compilation is not getattr(sft.policy.backbone_and_head()[0].layers[0], COMPILATION)  # caches of its own


def test_a_checkpointed_layer_past_the_recompile_limit_runs_uncompiled_with_one_warning(layout,
                                                                                         device_thread_backward,
                                                                                         monkeypatch):
    """A recompile limit of 1: the first training pass compiles the checkpointed entry (its recomputation, on
    the 'device thread', needs no second graph); a batch of one row, compiled at once here (not left to run
    eagerly while such batches are rare, as `RowTiering` does), needs another graph, past the limit: one
    warning, and from there on the checkpointed passes run uncompiled, with the eager model's log-probs and
    gradients, while scoring without gradients stays compiled."""
    from lmgym.policies.compiled_layers import RowTiering

    monkeypatch.setattr(RowTiering, "compiles", lambda self, rows: True)
    plain, compiled = lora_policy(), lora_policy(checkpointing=True)
    assert compiled.compile_layers(BACKEND)
    ids, mask, completion = batch()
    one_row = (ids[:1], mask[:1], completion[:1])
    with warnings.catch_warnings(record=True) as caught, torch._dynamo.config.patch(recompile_limit=1):
        warnings.simplefilter("always")
        for rows in (None, one_row, None, one_row):
            (_, lp, grads), (_, lp_plain, grads_plain) = training_pass(compiled, rows), training_pass(plain, rows)
            assert torch.allclose(lp, lp_plain, atol=1e-5)
            assert_same(grads, grads_plain, atol=1e-5)
            with torch.no_grad():
                assert torch.allclose(compiled.token_logprobs(*(rows or batch()))[0], lp_plain, atol=1e-5)
    fallbacks = [str(w.message) for w in caught if FALLBACK in str(w.message)]
    assert fallbacks == [f"LlamaDecoderLayer: {FALLBACK} (torch._dynamo.config.recompile_limit (1) reached); "
                         "checkpointed passes of these layers run uncompiled from here, passes without a "
                         "checkpoint stay compiled"]
    assert getattr(compiled.backbone_and_head()[0].layers[0], COMPILATION).eager_reason is not None


def test_checkpointing_turned_on_after_compiling_moves_inside_the_compiled_code_too():
    """`compile_layers` then `enable_gradient_checkpointing` (either order works): transformers' own checkpoint
    is off for the compiled layers, theirs on; a copied model's layers share the compiled entries."""
    import copy

    policy = lora_policy()
    assert policy.compile_layers(BACKEND) and checkpointed_layers(policy.model) == 0
    policy.enable_gradient_checkpointing()
    layers = policy.backbone_and_head()[0].layers
    assert checkpointed_layers(policy.model) == LAYERS and not any(layer.gradient_checkpointing for layer in layers)
    copied = copy.deepcopy(policy.model)
    copied_layer = copied.get_base_model().model.layers[0]
    assert getattr(copied_layer, COMPILATION) is getattr(layers[0], COMPILATION)
    assert copied_layer.forward.__self__ is copied_layer and checkpointed_layers(copied) == LAYERS


def test_a_graph_break_in_a_checkpointed_layer_runs_it_uncompiled_with_one_warning(monkeypatch):
    """A layer Dynamo cannot capture whole (a graph break in its MLP): the checkpointed passes run uncompiled,
    forward and recomputation alike, with one warning naming the break, and the eager gradients."""
    from transformers.models.llama.modeling_llama import LlamaMLP

    mlp_forward = LlamaMLP.forward

    def with_a_break(self, x):
        torch._dynamo.graph_break()
        return mlp_forward(self, x)

    monkeypatch.setattr(LlamaMLP, "forward", with_a_break)
    plain, compiled = lora_policy(), lora_policy(checkpointing=True)
    assert compiled.compile_layers(BACKEND)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            (_, lp, grads), (_, lp_plain, grads_plain) = training_pass(compiled), training_pass(plain)
            assert torch.allclose(lp, lp_plain, atol=1e-5)
            assert_same(grads, grads_plain, atol=1e-5)
    fallbacks = [str(w.message) for w in caught if FALLBACK in str(w.message)]
    assert len(fallbacks) == 1 and "(Unsupported: Call to `torch._dynamo.graph_break()`)" in fallbacks[0]


def test_one_row_passes_run_uncompiled_until_they_are_common_and_match_eager_either_way(monkeypatch):
    """A one-row micro-batch among wider ones compiles nothing new (Dynamo would specialise size 1: about 15 s of an
    H200 in issue 35's W4b); it scores and differentiates as the eager layers do. Once one-row passes are common
    (micro_batch_size 1), the one-row shape compiles once and stays compiled."""
    from lmgym.policies.compiled_layers import RowTiering

    eager = torch._dynamo.lookup_backend("eager")  # Dynamo guards and specialises shapes whatever the backend
    graphs = []

    def counting(gm, example_inputs, **kwargs):
        graphs.append(gm)
        return eager(gm, example_inputs, **kwargs)

    monkeypatch.setattr(RowTiering, "HOT_AFTER", 3)  # the test's bound on passes; the rule is the same
    torch._dynamo.reset()
    plain, compiled = lora_policy(checkpointing=True), lora_policy(checkpointing=True)
    assert compiled.compile_layers(counting)
    ids, mask, completion = batch()
    wide = (torch.cat([ids, ids[:1]]), torch.cat([mask, mask[:1]]), torch.cat([completion, completion[:1]]))
    one = (ids[1:], mask[1:], completion[1:])

    def both(rows):
        (_, lp, grads), (_, lp_plain, grads_plain) = training_pass(compiled, rows), training_pass(plain, rows)
        assert torch.allclose(lp, lp_plain, atol=1e-5)
        assert_same(grads, grads_plain, atol=1e-5)
        with torch.no_grad():  # the plain entry: a pass without gradients
            scored_now, scored_plain = compiled.token_logprobs(*rows)[0], plain.token_logprobs(*rows)[0]
        assert torch.allclose(scored_now, scored_plain, atol=1e-5)

    both(batch())
    both(wide)  # three rows: the same symbolic graphs
    both(tuple(t[:1].repeat(2, 1) for t in batch()))  # no padding: the rows share one row of rotary tables
    warm = len(graphs)
    assert warm == 2  # one graph an entry (compiled_layers._one_graph_inputs; 6 without it)
    both(one)
    assert len(graphs) == warm  # the one-row passes compiled nothing
    tiering = getattr(compiled.backbone_and_head()[0].layers[0], COMPILATION).tiering
    assert not tiering["checkpointed"].single_row_compiled and not tiering["plain"].single_row_compiled
    both(one)
    assert not tiering["checkpointed"].single_row_compiled  # 2 of 3
    both(one)  # the third of 5 passes: common
    assert tiering["checkpointed"].single_row_compiled and tiering["plain"].single_row_compiled
    hot = len(graphs)
    assert hot > warm  # now common: compiled once
    both(wide)
    assert len(graphs) == hot


@pytest.mark.parametrize("compiled", [False, True], ids=["transformers_checkpoint", "one_row_eager_tier"])
def test_the_recomputation_may_use_only_the_attention_kernels_its_forward_could(compiled):
    """Training passes run inside `variable_length_attention` (no cuDNN attention) and their backward outside it.
    An uncompiled checkpoint (transformers', or a compiled layer's one-row eager tier) must recompute under the
    forward's kernels: with cuDNN allowed again, SDPA saved a log-sum-exp of another shape, and a one-row micro-batch
    of the RAG agent's GRPO raised CheckpointError on an H200. Each attention call records whether cuDNN was allowed;
    the flag is global state on the CPU too."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    policy = lora_policy(checkpointing=True)
    if compiled:
        assert policy.compile_layers(BACKEND)
    seen = []
    for layer in policy.backbone_and_head()[0].layers:
        layer.self_attn.register_forward_pre_hook(lambda *_: seen.append(torch.backends.cuda.cudnn_sdp_enabled()))
    ids, mask, completion = batch()
    policy.model.train()
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        logprobs, _ = policy.token_logprobs(ids[1:], mask[1:], completion[1:])  # one row
    assert torch.backends.cuda.cudnn_sdp_enabled()  # the backward runs where cuDNN is allowed
    logprobs.sum().backward()
    assert seen == [False] * (2 * LAYERS)  # the forward, then the recomputation
