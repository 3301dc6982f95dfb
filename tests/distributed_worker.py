"""Worker for tests/test_distributed.py and tests/test_ddp.py: one rank of a 2-process gloo group running one
GRPO step per case (a case: its name, `TrainerConfig.data_parallel`, and the variant: "full" fine-tuning,
"lora", "untied": full fine-tuning with an lm-head of its own, outside the backbone DDP wraps, or "kl": full
fine-tuning with a KL term, so a frozen copy of the policy as the reference, or "lora_kl": LoRA with a KL
term, the reference being the model with its adapter switched off). FSDP cases
(tests/test_fsdp.py) also record which parameters are sharded and greedy samples from the sharded model."""
import os
import sys
from pathlib import Path

import torch
import torch.distributed as td

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lmgym.training import distributed as dist  # noqa: E402

STORE = None  # the running job's store (tests/two_ranks.py: one for the launch, a prefix per job); None: `port`
_JOINED = [0]  # groups joined over STORE in the running job (each group gets keys of its own)


def use_store(store) -> None:
    """Join the next groups over `store` (a job's own prefix of the launch's store; None: at the port)."""
    global STORE
    STORE, _JOINED[0] = store, 0


def join_gloo(rank: int, world: int, port: int) -> None:
    """Join a `world`-process gloo group on this machine as `rank` (one torch thread each): over the
    launch's shared STORE when tests/two_ranks.py runs the job, else at 127.0.0.1:`port`."""
    if STORE is not None:
        _JOINED[0] += 1
        td.init_process_group("gloo", store=td.PrefixStore(f"group{_JOINED[0]}/", STORE), rank=rank,
                              world_size=world)
    else:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        td.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)


def fixed_trajectories():
    """Two groups of four hand-made trajectories with mixed rewards and lengths (no sampling)."""
    from lmgym.buffers import Trajectory

    trajs = []
    for i in range(8):
        n = 3 + (i * 5) % 7
        ids = [(7 * i + 3 * j) % 90 + 3 for j in range(n)]
        trajs.append(Trajectory([1, 5, 9 + i % 3], ids, [-2.0 - 0.1 * j for j in range(n)], [1] * n,
                                reward=float((i * 3) % 4 == 0), group_id=i // 4))
    return trajs


def build_algorithm(output_dir: str, data_parallel: str = "allreduce", variant: str = "full", **settings):
    from lmgym.algorithms import GRPO, GRPOConfig
    from lmgym.envs import make
    from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
    from tests.toy_env import DigitsEnv  # noqa: F401

    tok = build_tiny_tokenizer()
    model, lora = build_tiny_model(tok, seed=0), variant in ("lora", "lora_kl")
    if variant == "untied":
        model.config.tie_word_embeddings = False
        model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone() * 0.5)
    torch.manual_seed(1)  # the LoRA A matrices
    policy = HFPolicy(model, tok, device="cpu", lora=LoraSettings(r=4, alpha=8) if lora else None)
    if lora:  # peft starts B at zero (no gradient for A in a first step): start from a nonzero adapter
        with torch.no_grad():
            for name, p in policy.model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(2)) * 0.1)
    settings.setdefault("kl_coeff", 0.5 if variant in ("kl", "lora_kl") else 0.0)
    if variant == "keep":  # full fine-tuning, the layers kept gathered through the step's two micro-batches
        settings.setdefault("fsdp_reshard_after_forward", False)
    if variant == "compiled":  # full fine-tuning with a KL reference, every layer compiled (before sharding)
        settings.update(torch_compile=True, torch_compile_backend="aot_eager", kl_coeff=0.5)
    config = GRPOConfig(learning_rate=1e-2, micro_batch_size=2, output_dir=output_dir, progress=False,
                        samples_per_prompt=4, prompts_per_iteration=2, data_parallel=data_parallel, **settings)
    return GRPO(policy, make("ToyDigits-v0"), config)


def one_step(trajectories, output_dir: str, data_parallel: str = "allreduce", variant: str = "full", on_build=None,
             after_step=None):
    algo = build_algorithm(output_dir, data_parallel, variant)
    if on_build is not None:
        on_build(algo)
    algo.prepare(trajectories)
    algo.update_step(trajectories)
    if after_step is not None:
        after_step(algo)
    return {n: whole(p) for n, p in algo.policy.model.named_parameters() if p.requires_grad}


def whole(p: torch.Tensor) -> torch.Tensor:
    """A parameter's full value (an FSDP shard gathered: a collective every rank runs)."""
    from torch.distributed.tensor import DTensor

    return (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone()


SAMPLE_PROMPTS = ["12+3=", "7*8="]


def sharded_names(algo) -> list[str]:
    from torch.distributed.tensor import DTensor

    return [n for n, p in algo.policy.model.named_parameters() if isinstance(p, DTensor)]


def record_sharding(algo, found: dict) -> None:
    """Which parameters FSDP sharded, and greedy samples from the sharded model (every rank samples)."""
    from torch.distributed.tensor import DTensor

    from lmgym.policies.compiled_layers import COMPILATION

    assert algo.gradients.mode == "fsdp", algo.gradients.mode
    found["sharded"] = sharded_names(algo)
    # sampling through the sharded layers; not in the compiled case, where each rank recompiled the layers for the
    # growing cache (about 50 CPU s in all) on a path no GPU run takes (CUDA samples with the fast decoder's copy)
    compiled = algo.config.torch_compile
    found["samples"] = None if compiled else algo.policy.generate_text(SAMPLE_PROMPTS, max_new_tokens=6)
    layer = algo.policy.data_parallel_module().layers[0]
    found["compiled"] = [getattr(m, COMPILATION, None) is not None
                         for m in (layer, getattr(algo.ref_policy, "model", None)
                                   and algo.ref_policy.backbone_and_head()[0].layers[0]) if m is not None]
    found["sharded_at_training_forwards"] = forwards = []

    def before_fsdp_gathers(module, args):  # prepended: runs before FSDP's own pre-forward all-gather
        if torch.is_grad_enabled():
            forwards.append(isinstance(next(module.parameters()), DTensor))

    layer.register_forward_pre_hook(before_fsdp_gathers, prepend=True)


def count_synced_backwards(algo, counts: list[int]) -> None:
    """A DDP comm hook that counts backward passes which all-reduced (one `is_last` bucket each)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    def hook(state, bucket):
        counts.append(int(bucket.is_last()))
        return allreduce_hook(state, bucket)

    assert algo.gradients.mode == "ddp", algo.gradients.mode
    algo.gradients.ddp.register_comm_hook(None, hook)


CASES = (("allreduce", "allreduce", "full"),)


def run(rank: int, world: int, port: int, out_dir: str, cases=CASES) -> None:
    join_gloo(rank, world, port)
    mine = [t for t in fixed_trajectories() if t.group_id == rank]  # each rank holds whole groups
    for name, data_parallel, variant in cases:
        counts: list[int] = []
        found: dict = {}
        hook = {"ddp": lambda algo, counts=counts: count_synced_backwards(algo, counts),
                "fsdp": lambda algo, found=found: record_sharding(algo, found)}.get(data_parallel)
        after = ((lambda algo, found=found: found.update(sharded_after_step=sharded_names(algo)))
                 if data_parallel == "fsdp" else None)
        params = one_step(mine, str(Path(out_dir) / name), data_parallel, variant, hook, after)
        prefix = "" if name == "allreduce" else f"{name}_"
        torch.save({"params": params, "synced_backwards": sum(counts), **found} if hook else params,
                   Path(out_dir) / f"{prefix}rank{rank}.pt")
    dist.destroy()  # frees the cases' models first (gloo's teardown may abort under FSDP otherwise)


def ranks_and_one_process(out: Path, tmp_path: Path, name: str, data_parallel: str, variant: str):
    """(rank 0's, rank 1's results for the case `name`, one process's parameters after the same step on
    every group), checked to hold the same parameter names."""
    rank0, rank1 = (torch.load(out / f"{name}_rank{r}.pt") for r in (0, 1))
    single = one_step(fixed_trajectories(), str(tmp_path / "single"), data_parallel, variant)
    assert single and set(single) == set(rank0["params"])
    return rank0, rank1, single


def resync_run(rank: int, world: int, port: int, out_dir: str) -> None:
    """One rank of REINFORCE-stable under LoRA with the reference re-synced every 2 iterations, 3 iterations
    (`world` 2: FSDP over 2 gloo ranks); rank 0 saves the KL per iteration and the gathered parameters."""
    from lmgym.algorithms import ReinforceStable, ReinforceStableConfig
    from lmgym.envs import make
    from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
    from tests.toy_env import DigitsEnv  # noqa: F401

    if world > 1:
        join_gloo(rank, world, port)
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=0)
    torch.manual_seed(1)  # the LoRA A matrices, the same in every process
    policy = HFPolicy(model, tok, device="cpu", lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))
    config = ReinforceStableConfig(
        train_iterations=3, prompts_per_iteration=4, max_new_tokens=4, micro_batch_size=2, learning_rate=5e-2,
        kl_coeff=0.1, ref_sync_every=2, save_every=10**6, eval_at_start=False, progress=False,
        data_parallel="fsdp", output_dir=str(Path(out_dir) / f"run{world}"))
    algo = ReinforceStable(policy, make("ToyDigits-v0"), config)
    rows = algo.train()
    params = {n: whole(p) for n, p in algo.policy.model.named_parameters()}
    if rank == 0:
        torch.save({"kl": {r["iteration"]: r["kl"] for r in rows if "kl" in r}, "params": params},
                   Path(out_dir) / f"resync_world{world}.pt")
    del algo, policy
    dist.destroy()  # frees FSDP's modules first (gloo's teardown may abort otherwise)


def whiten_run(rank: int, world: int, port: int, out_dir: str) -> None:
    """One rank whitening (PPO's advantages) and RMS-scaling (MCTSSearch's) its half of a fixed batch; saves its
    rows of each."""
    from lmgym.algorithms.advantages import rms_scale, whiten

    join_gloo(rank, world, port)
    values, mask = whiten_batch()
    half = slice(rank * 3, rank * 3 + 3)
    torch.save(whiten(values[half], mask[half]), Path(out_dir) / f"whiten_rank{rank}.pt")
    torch.save(rms_scale(values[half], mask[half]), Path(out_dir) / f"rms_rank{rank}.pt")
    dist.destroy()


def whiten_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Six rows of advantages with ragged masks, the second half larger (ranks' halves differ in mean)."""
    values = torch.arange(30, dtype=torch.float).view(6, 5) ** 1.5 / 10
    mask = (torch.arange(5)[None, :] < torch.tensor([5, 3, 4, 2, 5, 1])[:, None]).float()
    return values, mask


def foreach_run(rank: int, world: int, port: int, out_dir: str) -> None:
    """AdamW's step over an FSDP shard beside a whole embedding (as FSDP here keeps it), with foreach on and
    with `optimizer_foreach`'s choice; writes one line each to foreach.txt ("mixed": torch refused the mix)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from lmgym.training.fsdp import optimizer_foreach

    join_gloo(rank, world, port)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4))
    fully_shard(model[1], mesh=init_device_mesh("cpu", (world,)))
    lines = []
    for foreach in (True, optimizer_foreach([{"params": list(model.parameters())}])):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=foreach)
        model(torch.tensor([1, 2])).sum().backward()
        try:
            optimizer.step()
            lines.append(f"foreach {foreach} ok")
        except RuntimeError as err:
            lines.append(f"foreach {foreach} " + ("mixed" if "mixed" in str(err) else str(err)))
    Path(out_dir, "foreach.txt").write_text("\n".join(lines))
    del model, optimizer
    dist.destroy()



def save_copy_run(rank: int, world: int, port: int, out_dir: str) -> None:
    """Rank 1 of a 2-rank group writes the tiny model's plain copy (as the rank that wins the embedded
    model's build lock may); rank 0 only joins."""
    from lmgym.policies import build_tiny_model, build_tiny_tokenizer
    from lmgym.policies.loading.models import save_plain_copy

    join_gloo(rank, world, port)
    if rank == 1:
        tok = build_tiny_tokenizer()
        save_plain_copy(build_tiny_model(tok, seed=0), tok, Path(out_dir) / "copy")
    td.barrier()
    dist.destroy()
