"""Checkpoints in the Hugging Face Trainer's layout: safetensors weights, weights_only torch files for the
optimizer, scheduler and RNG states, trainer_state.json; resuming from them is bit-identical."""
import json
import re

import pytest
import torch
from safetensors.torch import load_file

from lmgym.algorithms import GRPO, PPO, GRPOConfig, PPOConfig
from lmgym.envs import make
from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
from lmgym.training.checkpoints import folders as ckpt
from lmgym.training.checkpoints import layout
from tests import checkpoint_state
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

TIMING = re.compile(r"^(time_.*|tokens_per_second)$")


def algorithm(tmp_path, kind="grpo", lora=False, **overrides):
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu",
                      lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]) if lora else None)
    values = dict(train_iterations=3, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=4,
                  micro_batch_size=2, output_dir=str(tmp_path / "run"), progress=False, eval_at_start=False,
                  learning_rate=1e-2, kl_coeff=0.05, ref_sync_every=2, save_every=1, seed=5)
    values.update(overrides)
    if kind == "ppo":
        return PPO(policy, make("ToyDigits-v0"), PPOConfig(**values, value_model="copy"))
    return GRPO(policy, make("ToyDigits-v0"), GRPOConfig(**values))


def rows(run):
    return [{k: v for k, v in json.loads(line).items() if not TIMING.match(k)}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


@slow
@pytest.mark.parametrize("kind, lora", [("grpo", False), ("ppo", False), ("grpo", True)])
def test_the_files_are_safetensors_and_weights_only_torch_files(tmp_path, kind, lora):
    algo = algorithm(tmp_path, kind, lora, train_iterations=1)
    algo.train()
    folder = tmp_path / "run" / "checkpoint-1"
    weights = load_file(str(folder / "model.safetensors"))  # plain safetensors, no help from this library
    policy = algo.policy.state_dict()
    assert set(weights) <= set(policy) and all(torch.equal(weights[k], policy[k]) for k in weights)
    if lora:
        assert any("lora_A" in k for k in weights)  # the adapter's weights are in it
    if kind == "ppo":
        critic = load_file(str(folder / "value_model.safetensors"))
        assert all(torch.equal(critic[k], v) for k, v in algo.value_model.state_dict().items() if k in critic)
    optimizer = torch.load(folder / "optimizer.pt", weights_only=True)
    assert set(optimizer) == {"state", "param_groups"} and optimizer["state"]
    assert torch.load(folder / "scheduler.pt", weights_only=True)["last_epoch"] == algo.scheduler.last_epoch > 0
    rng = torch.load(folder / "rng_state.pth", weights_only=True)
    assert torch.equal(rng["generator"], algo.generator.get_state())
    state = json.loads((folder / "trainer_state.json").read_text())
    assert state["format"] == 2 and state["state"]["iteration"] == 1
    loadable = {"adapter_config.json", "adapter_model.safetensors"} if lora else {"config.json",
                                                                                  "generation_config.json"}
    tokenizer = {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}
    assert set(json.loads((folder / "MANIFEST.json").read_text())["files"]) == {*state["layout"], "trainer_state.json",
                                                                               "buffer.jsonl", *loadable, *tokenizer}
    assert not (folder / "state.pt").exists()


@slow
@pytest.mark.parametrize("kind, lora, how", [("grpo", False, "resume"), ("ppo", False, "resume"),
                                              ("grpo", True, "resume"), ("ppo", False, True), ("grpo", True, "path")])
def test_resuming_a_safetensors_checkpoint_equals_an_uninterrupted_run(tmp_path, kind, lora, how):
    """`how`: train(resume=True), or HF's resume_from_checkpoint (True: the newest, or the checkpoint-1 path)."""
    straight = algorithm(tmp_path / "a", kind, lora)
    straight.train()
    first = algorithm(tmp_path / "b", kind, lora, train_iterations=1)
    first.train()
    resumed = algorithm(tmp_path / "b", kind, lora)
    if how == "resume":
        resumed.train(resume=True)
    else:
        resumed.train(resume_from_checkpoint=True if how is True else tmp_path / "b" / "run" / "checkpoint-1")
    assert resumed.iteration == 3
    for (name, a), b in zip(straight.policy.state_dict().items(), resumed.policy.state_dict().values()):
        assert torch.equal(a, b), name
    if kind == "ppo":
        for (name, a), b in zip(straight.value_model.state_dict().items(), resumed.value_model.state_dict().values()):
            assert torch.equal(a, b), name
    for a, b in zip(straight.optimizer.state.values(), resumed.optimizer.state.values()):
        assert all(torch.equal(torch.as_tensor(a[k]), torch.as_tensor(b[k])) for k in a)
    assert rows(tmp_path / "a" / "run") == rows(tmp_path / "b" / "run")  # the losses and rewards too


def test_tied_weights_are_stored_once_and_read_back_tied(tmp_path):
    weight = torch.randn(4, 3)
    tensors = {"embed.weight": weight, "lm_head.weight": weight, "bias": torch.arange(6.0)[2:5]}
    layout.save_tensors(tensors, tmp_path / "w.safetensors")
    assert set(load_file(str(tmp_path / "w.safetensors"))) == {"embed.weight", "bias"}
    back = layout.load_tensors(tmp_path / "w.safetensors")
    assert set(back) == set(tensors) and all(torch.equal(back[k], v) for k, v in tensors.items())
    assert back["lm_head.weight"] is back["embed.weight"]


@slow
def test_a_damaged_safetensors_file_with_a_matching_manifest_is_skipped_in_one_line(tmp_path, capsys):
    algo = algorithm(tmp_path, train_iterations=2)
    algo.train()
    folder = tmp_path / "run" / "checkpoint-2"
    weights = folder / "model.safetensors"
    weights.write_bytes(b"\xff" * 64)
    manifest = json.loads((folder / "MANIFEST.json").read_text())  # a hand edit that also fixed the manifest
    manifest["files"]["model.safetensors"] = ckpt.file_entry(weights)
    (folder / "MANIFEST.json").write_text(json.dumps(manifest))
    fresh = algorithm(tmp_path, train_iterations=2)
    assert fresh.resume_from(tmp_path / "run") == tmp_path / "run" / "checkpoint-1"
    warning = capsys.readouterr().err.strip()
    assert warning.startswith(f"warning: skipping a checkpoint that does not verify: {weights}: truncated or corrupt")
    assert "\n" not in warning


@slow
def test_a_layout_naming_a_path_outside_the_folder_is_refused(tmp_path):
    algo = algorithm(tmp_path, train_iterations=1)
    algo.train()
    folder = tmp_path / "run" / "checkpoint-1"
    state = json.loads((folder / "trainer_state.json").read_text())
    state["layout"]["../../elsewhere.pt"] = ["optimizer"]
    (folder / "trainer_state.json").write_text(json.dumps(state))
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    manifest["files"]["trainer_state.json"] = ckpt.file_entry(folder / "trainer_state.json")
    (folder / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(ckpt.CorruptCheckpointError, match="layout entry '../../elsewhere.pt' is malformed") as info:
        algorithm(tmp_path).load(folder)
    assert "\n" not in str(info.value)


def test_a_field_is_named_with_the_file_that_holds_it(tmp_path):
    algo = algorithm(tmp_path, train_iterations=1)
    algo.train()
    folder = tmp_path / "run" / "checkpoint-1"
    checkpoint_state.rewrite(folder, lambda s: s["rng"].update(torch=torch.zeros(3)))
    with pytest.raises(ckpt.CorruptCheckpointError) as info:
        algorithm(tmp_path).load(folder)
    assert str(info.value).startswith(f"{folder / 'rng_state.pth'}: field rng['torch'] must be a 1-d uint8 tensor")


def test_every_kind_of_entry_comes_back_exactly(tmp_path):
    """Weights in extra (an MCTS PRM) beside an entry that is neither weights nor JSON (its optimizer)."""
    prm = {"score.weight": torch.randn(2, 3)}
    state = {"iteration": 4, "policy": {"w": torch.randn(3)}, "optimizer": {"state": {}, "param_groups": []},
             "scheduler": {"last_epoch": 4}, "rng": {"python": (3, (1, 2), None)}, "reference": None,
             "extra": {"prm": prm, "prm_optimizer": {"state": {0: {"step": torch.tensor(2.0)}}}},
             "rank_rng": [{"torch": torch.zeros(2, dtype=torch.uint8)}], "sharded": {"world_size": 1}}
    for name, write in layout.state_files(state).items():
        write(tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "extra_state.pt", "model.safetensors", "optimizer.pt", "prm.safetensors", "rng_state.pth", "scheduler.pt",
        "trainer_state.json"]
    back = layout.read_state(tmp_path)
    assert set(back) == set(state) and back["rng"] == state["rng"] and back["sharded"] == {"world_size": 1}
    assert torch.equal(back["extra"]["prm"]["score.weight"], prm["score.weight"])
    assert torch.equal(back["extra"]["prm_optimizer"]["state"][0]["step"], torch.tensor(2.0))
    assert torch.equal(back["rank_rng"][0]["torch"], state["rank_rng"][0]["torch"])


def test_an_mcts_run_with_a_prm_checkpoints_it_in_safetensors_and_loads_it_back(tmp_path, tiny_policy):
    from lmgym.algorithms import MCTSSearch
    from lmgym.policies.prm import ProcessRewardModel
    from tests.test_mcts_search import config

    def build(prm):
        c = config(tmp_path, train_iterations=1, prm_updates=2, pair_margin=1e-6, prm_learning_rate=1e-2)
        return MCTSSearch(tiny_policy, make("ToyDigits-v0", mode="stepwise", max_steps=2), c, prm=prm)

    algo = build(ProcessRewardModel.from_policy(tiny_policy))
    algo.train()
    folder = tmp_path / "run" / "checkpoint-1"
    assert load_file(str(folder / "prm.safetensors"))  # the PRM's weights; its optimizer in extra_state.pt
    assert "prm_optimizer" in torch.load(folder / "extra_state.pt", weights_only=True)["extra"]
    fresh = build(ProcessRewardModel.from_policy(tiny_policy))
    fresh.load(folder)
    for (name, a), b in zip(algo.prm.state_dict().items(), fresh.prm.state_dict().values()):
        assert torch.equal(a, b), name
