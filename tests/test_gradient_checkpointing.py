"""`gradient_checkpointing` (TrainerConfig, TRL's name; HFPolicy's flag): each decoder layer's activations are
recomputed in the backward pass instead of kept, and the gradients are those of a pass without it: full
fine-tuning, LoRA, layers compiled with a CPU backend, a trainer's policy, PPO's critic and a PRM, and FSDP2
on two gloo ranks. "Kept" is measured as the bytes autograd saves for the backward beyond the weights."""
from pathlib import Path

import pytest
import torch

from lmgym.algorithms import GRPO, PPO, GRPOConfig, PPOConfig, PRMConfig, PRMTrainer
from lmgym.envs import make
from lmgym.policies import HFPolicy, LoraSettings, ProcessRewardModel, build_tiny_model, build_tiny_tokenizer
from lmgym.policies.compiled_layers import compiled_layers
from lmgym.policies.padded_passes import checkpointed_layers
from lmgym.training import ConfigError, load_config
from tests.distributed_worker import build_algorithm, fixed_trajectories, join_gloo, whole
from tests.test_compile_training import batch
from tests.test_config_validation import one_line_error
from tests.test_prm_trainer import PAIRS
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401
from tests.two_ranks import Job

BACKEND = "aot_eager"  # as tests/test_compile_training.py: traces and differentiates as Inductor does
LAYERS = 2  # the tiny model's decoder layers


def tiny_policy(lora: bool = False, checkpointing: bool = False) -> HFPolicy:
    """The tiny model (LoRA: r 4 with nonzero B, so both adapter matrices get gradients)."""
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=0)
    torch.manual_seed(1)  # the LoRA A matrices
    policy = HFPolicy(model, tok, device="cpu", lora=LoraSettings(r=4, alpha=8) if lora else None,
                      gradient_checkpointing=checkpointing)
    if lora:
        with torch.no_grad():
            for name, p in policy.model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(2)) * 0.1)
    return policy


def training_pass(policy: HFPolicy, rows: tuple | None = None) -> tuple[int, torch.Tensor, dict[str, torch.Tensor]]:
    """(bytes saved for the backward beyond the weights, log-probs, gradients) of one training pass (the model in
    training mode, as the trainers run it) over `rows` (ids, mask, completion; default `batch()`)."""
    weights = {p.untyped_storage().data_ptr() for p in policy.model.parameters()}
    kept = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in weights:
            kept[0] += t.numel() * t.element_size()
        return t

    policy.model.zero_grad()
    policy.model.train()
    ids, mask, completion = rows or batch()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logprobs, entropy = policy.token_logprobs(ids, mask, completion)
    (logprobs.sum() + 0.1 * entropy.sum()).backward()
    policy.model.eval()
    grads = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}
    return kept[0], logprobs.detach(), grads


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float) -> None:
    assert a and set(a) == set(b)
    for name in a:
        assert torch.allclose(a[name], b[name], atol=atol, rtol=1e-5), name


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_checkpointed_layers_give_the_same_gradients_and_keep_fewer_activations(lora):
    plain, checkpointed = tiny_policy(lora), tiny_policy(lora, checkpointing=True)
    assert checkpointed_layers(plain.model) == 0 and checkpointed_layers(checkpointed.model) == LAYERS
    (kept_plain, lp_plain, grads_plain), (kept, lp, grads) = training_pass(plain), training_pass(checkpointed)
    assert torch.equal(lp, lp_plain)
    assert_same(grads, grads_plain, atol=1e-6)
    if lora:  # the adapters learn behind the frozen embedding; the base gets no gradient
        assert all(("lora_A" in n or "lora_B" in n) and g.abs().sum() > 0 for n, g in grads.items())
        assert sum("lora_" in n for n in grads) == 2 * 7 * LAYERS  # A and B of 7 projections per layer
    assert kept < kept_plain / 4  # the layers keep their inputs only


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@slow
def test_compiled_checkpointed_layers_give_the_eager_gradients(lora):
    """`torch_compile` with `gradient_checkpointing`: the compiled layer holds the checkpoint
    (policies/compiled_layers.py), and AOTAutograd recomputes it."""
    plain, compiled = tiny_policy(lora), tiny_policy(lora, checkpointing=True)
    assert compiled.compile_layers(BACKEND)
    assert compiled_layers(compiled.model) == LAYERS == checkpointed_layers(compiled.model)
    (kept_plain, lp_plain, grads_plain), (kept, lp, grads) = training_pass(plain), training_pass(compiled)
    assert torch.allclose(lp, lp_plain, atol=1e-5)
    assert_same(grads, grads_plain, atol=1e-5)
    assert kept < kept_plain / 2  # layer inputs, rotary tables, the mask and the RNG states the recompute replays
    with torch.no_grad():  # scoring without gradients (the KL reference, old log-probs) through the same layers
        assert torch.allclose(compiled.token_logprobs(*batch())[0], lp_plain, atol=1e-5)


# ---------------------------------------------------------------------------------------------- trainers
def count_checkpoints(model: torch.nn.Module) -> list[int]:
    """Counts each call of the checkpoint function of `model`'s decoder layers (training passes only)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    calls: list[int] = []
    for layer in model.modules():
        if isinstance(layer, GradientCheckpointingLayer) and layer.gradient_checkpointing:
            def counted(*args, _inner=layer._gradient_checkpointing_func, **kwargs):
                calls.append(1)
                return _inner(*args, **kwargs)
            layer._gradient_checkpointing_func = counted
    return calls


def grpo(tmp_path: Path, checkpointing: bool, policy: HFPolicy | None = None) -> GRPO:
    config = GRPOConfig(learning_rate=1e-2, micro_batch_size=2, output_dir=str(tmp_path / str(checkpointing)),
                        progress=False, samples_per_prompt=4, prompts_per_iteration=2, kl_coeff=0.5,
                        gradient_checkpointing=checkpointing)
    return GRPO(policy or tiny_policy(), make("ToyDigits-v0"), config)


def test_the_config_checkpoints_the_policy_and_not_its_reference_and_the_update_is_the_same(tmp_path):
    plain, checkpointed = grpo(tmp_path, False), grpo(tmp_path, True)
    assert checkpointed_layers(plain.policy.model) == 0
    assert checkpointed_layers(checkpointed.policy.model) == LAYERS and checkpointed.policy.gradient_checkpointing
    assert checkpointed_layers(checkpointed.ref_policy.model) == 0  # a frozen copy made before: no gradients
    calls = count_checkpoints(checkpointed.policy.model)
    for algo in (plain, checkpointed):
        trajectories = fixed_trajectories()  # `prepare` writes into them: each its own
        algo.prepare(trajectories)
        assert not calls  # scoring the old and reference log-probs: no gradients, no checkpoint
        algo.update(trajectories)
    assert len(calls) == LAYERS * 4  # 8 trajectories in micro-batches of 2
    assert_same(dict(checkpointed.policy.model.named_parameters()), dict(plain.policy.model.named_parameters()),
                atol=1e-6)


def test_a_policy_built_with_checkpointing_keeps_it_when_the_config_is_off(tmp_path):
    algo = grpo(tmp_path, False, tiny_policy(checkpointing=True))
    assert algo.policy.gradient_checkpointing and checkpointed_layers(algo.policy.model) == LAYERS


@slow
def test_ppo_checkpoints_its_own_critic_and_the_update_is_the_same(tmp_path):
    def ppo(checkpointing):
        config = PPOConfig(learning_rate=1e-2, micro_batch_size=4, output_dir=str(tmp_path / str(checkpointing)),
                           progress=False, prompts_per_iteration=8, kl_coeff=0.1, value_model="copy",
                           gradient_checkpointing=checkpointing)
        return PPO(tiny_policy(), make("ToyDigits-v0"), config)

    plain, checkpointed = ppo(False), ppo(True)
    assert checkpointed_layers(checkpointed.value_model) == LAYERS == checkpointed_layers(checkpointed.policy.model)
    assert checkpointed_layers(checkpointed.ref_policy.model) == 0
    calls = count_checkpoints(checkpointed.value_model)
    for algo in (plain, checkpointed):
        trajectories = fixed_trajectories()
        algo.prepare(trajectories)
        algo.update(trajectories)
    assert calls and not checkpointed.value_model.training  # in training mode for the update, back after
    for a, b in ((checkpointed.policy.model, plain.policy.model), (checkpointed.value_model, plain.value_model)):
        assert_same(dict(a.named_parameters()), dict(b.named_parameters()), atol=1e-6)


def test_the_prm_trainer_checkpoints_the_prm_and_its_step_is_the_same(tmp_path):
    def trainer(checkpointing):
        config = PRMConfig(train_iterations=1, pairs_per_iteration=6, micro_batch_size=3, learning_rate=1e-3,
                           progress=False, output_dir=str(tmp_path / str(checkpointing)),
                           gradient_checkpointing=checkpointing)
        prm = ProcessRewardModel.from_policy(tiny_policy())
        with torch.no_grad():
            torch.nn.init.normal_(prm.head.linear.weight, generator=torch.Generator().manual_seed(3))  # backbone grads
        return PRMTrainer(prm, PAIRS, config)

    plain, checkpointed = trainer(False), trainer(True)
    assert checkpointed_layers(checkpointed.prm) == LAYERS
    calls = count_checkpoints(checkpointed.prm)
    stats = [t.train_iteration() for t in (plain, checkpointed)]
    assert len(calls) == LAYERS * 2 and not checkpointed.prm.training
    assert stats[1]["loss"] == pytest.approx(stats[0]["loss"], abs=1e-6)
    assert_same(dict(checkpointed.prm.named_parameters()), dict(plain.prm.named_parameters()), atol=1e-6)


def test_a_policy_without_the_seam_is_one_line(tmp_path):
    class NoCheckpointing(HFPolicy):
        enable_gradient_checkpointing = None

    tok = build_tiny_tokenizer()
    with pytest.raises(TypeError) as err:
        grpo(tmp_path, True, NoCheckpointing(build_tiny_model(tok, seed=0), tok, device="cpu"))
    assert str(err.value) == ("GRPO: gradient_checkpointing is on, but its NoCheckpointing has no "
                              "enable_gradient_checkpointing()")


# ---------------------------------------------------------------------------------------------- config
def test_trls_name_loads_from_yaml_and_from_trl(tmp_path):
    path = tmp_path / "trl.yaml"
    path.write_text("gradient_checkpointing: true\nnum_generations: 4\n")
    assert load_config(GRPOConfig, path).gradient_checkpointing
    assert GRPOConfig.from_trl(gradient_checkpointing=True).gradient_checkpointing
    assert not GRPOConfig().gradient_checkpointing and not PRMConfig().gradient_checkpointing
    path.write_text("gradient_checkpointing_kwargs:\n  use_reentrant: false\n")
    with pytest.raises(ConfigError) as err:
        load_config(GRPOConfig, path)
    assert str(err.value) == (f"{path}: GRPOConfig: gradient_checkpointing_kwargs has no counterpart: "
                              "gradient_checkpointing here is always non-reentrant (use_reentrant false), on every "
                              "decoder layer")
    assert "gradient_checkpointing" in one_line_error(GRPOConfig, gradient_checkpointing="sometimes")


# ---------------------------------------------------------------------------------------------- FSDP2
CASES = (("fsdp", "full"), ("fsdp", "lora"), ("ddp", "full"))


def train_mode_step(algo, trajectories) -> dict[str, torch.Tensor]:
    """One GRPO step over `trajectories` in training mode (as `update` runs it), in their given order;
    the whole parameters after it."""
    algo.prepare(trajectories)
    algo.policy.model.train()
    algo.update_step(trajectories)
    algo.policy.model.eval()
    return {n: whole(p) for n, p in algo.policy.model.named_parameters() if p.requires_grad}


def checkpointed_rank(rank: int, world: int, port: int, out_dir: str) -> None:
    """One rank of `CASES` with gradient_checkpointing on: its half of the groups, one step; saves the gathered
    parameters, how many layer passes were checkpointed and whether the layers are sharded."""
    from torch.distributed.tensor import DTensor

    from lmgym.training import distributed as dist

    join_gloo(rank, world, port)
    mine = [t for t in fixed_trajectories() if t.group_id == rank]
    for data_parallel, variant in CASES:
        algo = build_algorithm(str(Path(out_dir) / f"{data_parallel}_{variant}"), data_parallel, variant,
                               gradient_checkpointing=True)
        assert algo.gradients.mode == data_parallel, algo.gradients.mode
        layers = algo.policy.backbone_and_head()[0].layers
        calls = count_checkpoints(layers)
        params = train_mode_step(algo, mine)
        sharded = all(isinstance(p, DTensor) for p in layers.parameters())
        torch.save({"params": params, "calls": len(calls), "sharded": sharded},
                   Path(out_dir) / f"{data_parallel}_{variant}_rank{rank}.pt")
        del algo
    dist.destroy()


TWO_RANK_JOBS = (Job("gradient_checkpointing", checkpointed_rank),)  # the session's one launch (tests/two_ranks.py)


@pytest.fixture(scope="module")
def two_ranks(two_rank_jobs) -> Path:
    return two_rank_jobs.folder("gradient_checkpointing")


@pytest.mark.parametrize("data_parallel,variant", CASES)
def test_two_checkpointed_ranks_match_one_process_without_checkpointing(two_ranks, tmp_path, data_parallel, variant):
    rank0, rank1 = (torch.load(two_ranks / f"{data_parallel}_{variant}_rank{r}.pt") for r in (0, 1))
    single = train_mode_step(build_algorithm(str(tmp_path), "allreduce", variant), fixed_trajectories())
    assert rank0["sharded"] == (data_parallel == "fsdp")
    assert rank0["calls"] == LAYERS * 2  # 4 trajectories a rank, micro-batches of 2: every layer checkpointed
    for name, value in single.items():
        assert torch.equal(rank0["params"][name], rank1["params"][name]), name
        assert torch.allclose(rank0["params"][name], value, atol=1e-6, rtol=1e-5), name
