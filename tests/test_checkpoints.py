"""Checkpoint folders: atomic layout, retention, resume selection, old layout, safe loading."""
import json
import os
import random
import shutil

import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.training.checkpoints import folders as ckpt
from lmgym.training.checkpoints import layout
from lmgym.training.cli import run_with_clear_errors
from tests import checkpoint_state
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


def tiny_algo(tmp_path, **overrides):
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    values = dict(train_iterations=1, prompts_per_iteration=1, samples_per_prompt=2, max_new_tokens=4,
                  output_dir=str(tmp_path / "run"), progress=False, eval_at_start=False, learning_rate=1e-2)
    values.update(overrides)
    return GRPO(policy, make("ToyDigits-v0"), GRPOConfig(**values))


def save_at(algo, iteration):
    algo.iteration = iteration
    return algo.save()


def names(folder):
    return sorted(p.name for p in folder.iterdir())


def test_each_save_is_a_complete_folder_and_the_newest_k_are_kept(tmp_path):
    algo = tiny_algo(tmp_path, keep_checkpoints=2)
    run = tmp_path / "run"
    for it in (1, 2, 3):
        folder = save_at(algo, it)
        assert folder == run / f"checkpoint-{it}"
    assert checkpoint_state.entries(run) == ["checkpoint-2", "checkpoint-3"]
    manifest = json.loads((run / "checkpoint-3" / "MANIFEST.json").read_text())
    assert manifest["iteration"] == 3 and set(manifest["files"]) == {
        "model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "buffer.jsonl",
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}
    assert manifest["files"]["model.safetensors"]["bytes"] == (folder / "model.safetensors").stat().st_size
    ckpt.verify(folder)


def test_resume_takes_the_newest_that_verifies_and_says_which(tmp_path, capsys):
    algo = tiny_algo(tmp_path, keep_checkpoints=3)
    run = tmp_path / "run"
    for it in (1, 2, 3):
        save_at(algo, it)
    state = run / "checkpoint-3" / "model.safetensors"
    state.write_bytes(state.read_bytes()[:-10])                      # truncated
    buffer = run / "checkpoint-2" / "buffer.jsonl"
    buffer.write_text(buffer.read_text().replace("capacity", "capacitx"))  # altered, same size
    (run / ".tmp-checkpoint-4").mkdir()                               # a save killed half-way
    fresh = tiny_algo(tmp_path)
    assert fresh.resume_from(run) == run / "checkpoint-1"
    assert fresh.iteration == 1
    out, err = capsys.readouterr()
    assert out.strip() == f"resuming from {run / 'checkpoint-1'} (iteration 1)"
    warnings = err.strip().splitlines()
    assert len(warnings) == 2 and all(w.startswith("warning: skipping a checkpoint") for w in warnings)
    assert "checkpoint-3/model.safetensors: " in warnings[0] and "truncated" in warnings[0]
    assert "checkpoint-2/buffer.jsonl: sha256 differs" in warnings[1]
    assert checkpoint_state.entries(run) == [".tmp-checkpoint-4", "checkpoint-1", "corrupt-checkpoint-2",
                                             "corrupt-checkpoint-3"]
    save_at(fresh, 2)  # the next save clears the leftover temp folder, keeps the set-aside copies
    assert checkpoint_state.entries(run) == ["checkpoint-1", "checkpoint-2", "corrupt-checkpoint-2",
                                             "corrupt-checkpoint-3"]


def test_the_old_checkpoint_layout_is_still_resumed(tmp_path, capsys):
    algo = tiny_algo(tmp_path)
    folder = save_at(algo, 5)
    run = tmp_path / "run"
    legacy = run / "checkpoint"
    shutil.copytree(folder, legacy)
    (legacy / "MANIFEST.json").unlink()
    checkpoint_state.write_legacy(legacy, algo.state_dict())  # one state.pt, as earlier versions wrote
    shutil.rmtree(folder)
    fresh = tiny_algo(tmp_path)
    assert fresh.resume_from(run) == legacy and fresh.iteration == 5
    assert capsys.readouterr().out.strip() == f"resuming from {legacy} (iteration 5)"
    for a, b in zip(algo.policy.parameters(), fresh.policy.parameters()):
        assert torch.equal(a, b)


def test_a_state_pt_checkpoint_of_earlier_versions_still_resumes(tmp_path, capsys):
    algo = tiny_algo(tmp_path)
    folder = save_at(algo, 4)
    checkpoint_state.write_legacy(folder, algo.state_dict())
    assert sorted(json.loads((folder / "MANIFEST.json").read_text())["files"]) == ["buffer.jsonl", "state.pt"]
    fresh = tiny_algo(tmp_path)
    assert fresh.resume_from(tmp_path / "run") == folder and fresh.iteration == 4
    for a, b in zip(algo.policy.parameters(), fresh.policy.parameters()):
        assert torch.equal(a, b)


@slow
def test_without_a_checkpoint_resume_starts_over_and_keeps_the_history(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    old = '{"iteration": 1, "reward_mean": 0.5}\n{"iteration": 2, "reward_mean": 0.6}\n'
    (run / "metrics.jsonl").write_text(old)
    (run / "checkpoint-2").mkdir()  # no manifest: incomplete
    rows = tiny_algo(tmp_path).train(resume=True)
    assert [r["iteration"] for r in rows] == [1]
    out, err = capsys.readouterr()
    assert f"note: --resume: no checkpoint in {run}, starting from iteration 0" in out
    assert err == (f"warning: skipping {run / 'checkpoint-2'}: no MANIFEST.json (incomplete); "
                   f"no other checkpoint to resume from\n")
    assert (run / "metrics.1.jsonl.bak").read_text() == old
    assert (run / "checkpoint-2.1.bak").is_dir()
    assert checkpoint_state.entries(run) == ["checkpoint-1"]
    tiny_algo(tmp_path).train()  # a new run (no --resume) in a used folder moves it aside too
    assert (run / "metrics.2.jsonl.bak").read_text().count("\n") == 1


def test_a_newest_checkpoint_without_its_manifest_is_skipped_with_one_warning_naming_both(tmp_path, capsys):
    algo = tiny_algo(tmp_path, keep_checkpoints=3)
    older, newest = save_at(algo, 1), save_at(algo, 2)
    (newest / "MANIFEST.json").unlink()
    capsys.readouterr()
    fresh = tiny_algo(tmp_path)
    assert fresh.resume_from(tmp_path / "run") == older and fresh.iteration == 1
    out, err = capsys.readouterr()
    assert err == (f"warning: skipping {newest}: no MANIFEST.json (incomplete); resuming from {older} instead "
                   f"(the next save removes checkpoint-2)\n")
    assert out == f"resuming from {older} (iteration 1)\n"


def trained_then_resumed(tmp_path, edit_metrics):
    """Train 2 iterations (a checkpoint at 2), `edit_metrics(path)`, then resume to 3 through the examples'
    error handler: the SystemExit's message, or None when the run finished."""
    tiny_algo(tmp_path, train_iterations=2).train()
    edit_metrics(tmp_path / "run" / "metrics.jsonl")
    try:
        run_with_clear_errors(tiny_algo(tmp_path, train_iterations=3).train, True)
    except SystemExit as stop:
        return str(stop.code)
    return None


@slow
def test_resume_is_refused_in_one_line_when_metrics_jsonl_is_missing(tmp_path):
    run = tmp_path / "run"
    message = trained_then_resumed(tmp_path, lambda path: path.unlink())
    assert message == (f"error: {run / 'metrics.jsonl'}: missing, but {run / 'checkpoint-2'} has "
                       f"trained 2 iterations; checkpoints do not hold the logged rows, so they cannot be rebuilt: "
                       f"put the file back (a copy, or a metrics.<n>.jsonl.bak of this run), or run without --resume "
                       f"to start over")
    assert checkpoint_state.entries(run) == ["checkpoint-2"] and not (run / "metrics.jsonl").exists()  # nothing trained


def test_resume_is_refused_in_one_line_when_metrics_jsonl_lost_rows(tmp_path):
    def keep_the_first_row(path):  # iteration 1's (no evaluation at the start)
        path.write_text(path.read_text().splitlines(keepends=True)[0])

    run = tmp_path / "run"
    message = trained_then_resumed(tmp_path, keep_the_first_row)
    assert message.startswith(f"error: {run / 'metrics.jsonl'}: no rows for 1 of the 2 iterations "
                              f"{run / 'checkpoint-2'} has trained (the first missing: iteration 2); "
                              f"checkpoints do not hold the logged rows")
    assert "\n" not in message and checkpoint_state.entries(run) == ["checkpoint-2"]


@slow
def test_resume_with_every_row_continues(tmp_path):
    assert trained_then_resumed(tmp_path, lambda path: None) is None
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3]


def test_python_random_is_seeded_with_the_run_seed(tmp_path):
    random.seed(123)
    tiny_algo(tmp_path, seed=7)
    first = random.random()
    random.seed(456)
    tiny_algo(tmp_path, seed=7)
    assert random.random() == first  # whatever the state before, the run's seed sets it
    random.seed(123)
    tiny_algo(tmp_path, seed=8)
    assert random.random() != first


class Payload:
    """Unpickling this runs `open(<path>, "w")`: what a hostile checkpoint would do."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _plant_payload(folder, marker, name="scheduler.pt"):
    state_path = folder / name
    state = torch.load(state_path, weights_only=True)
    state["x"] = Payload(marker)
    torch.save(state, state_path)
    manifest = json.loads((folder / "MANIFEST.json").read_text())  # a consistent manifest: hashes prove nothing
    manifest["files"][name] = {"bytes": state_path.stat().st_size, "sha256": ckpt._sha256(state_path)}
    (folder / "MANIFEST.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("name", ["scheduler.pt", "rng_state.pth", "optimizer.pt"])
def test_a_checkpoint_that_would_run_code_is_refused_in_one_line(tmp_path, monkeypatch, capsys, name):
    algo = tiny_algo(tmp_path, train_iterations=2)
    folder = save_at(algo, 1)
    marker = tmp_path / "pwned"
    _plant_payload(folder, marker, name)
    with pytest.raises(ckpt.UnsafeCheckpointError) as info:
        tiny_algo(tmp_path).load(folder)
    message = str(info.value)
    assert message.startswith(f"{folder / name}: refused") and "GLOBAL" in message and "\n" not in message
    # through --resume and the examples' error handler: one line, nothing executed, nothing deleted
    monkeypatch.delenv("RLGYM_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        run_with_clear_errors(tiny_algo(tmp_path, train_iterations=2).train, True)
    assert str(exit_info.value.code).startswith("error: ") and "\n" not in str(exit_info.value.code)
    assert not marker.exists()
    assert (folder / name).is_file()


def test_a_truncated_state_file_is_a_one_line_error(tmp_path):
    algo = tiny_algo(tmp_path)
    folder = save_at(algo, 1)
    legacy = tmp_path / "legacy"
    shutil.copytree(folder, legacy)
    (legacy / "MANIFEST.json").unlink()
    checkpoint_state.write_legacy(legacy, algo.state_dict())
    for where in (folder, legacy):
        state = where / ("rng_state.pth" if where == folder else "state.pt")
        state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
        with pytest.raises(ckpt.CorruptCheckpointError) as info:
            tiny_algo(tmp_path).load(where)
        assert str(info.value).startswith(f"{state}: ") and "\n" not in str(info.value)
        assert "truncated" in str(info.value)


def test_a_checkpoint_of_another_model_is_a_one_line_error(tmp_path):
    folder = save_at(tiny_algo(tmp_path), 1)
    checkpoint_state.rewrite(folder, lambda state: state.update(
        policy={k: v[..., :1].contiguous() for k, v in state["policy"].items()}))
    (folder / "MANIFEST.json").unlink()
    shutil.move(folder, tmp_path / "other")
    with pytest.raises(ckpt.CheckpointError, match="does not fit this model and algorithm") as info:
        tiny_algo(tmp_path).load(tmp_path / "other")
    assert "\n" not in str(info.value)


def test_a_corrupt_model_safetensors_is_a_one_line_error(tmp_path):
    from lmgym.policies import HFPolicy, ModelLoadError, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    build_tiny_model(tok).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    weights = tmp_path / "model" / "model.safetensors"
    data = weights.read_bytes()
    for broken in (data[: len(data) // 2], b"\x00" * 64):
        weights.write_bytes(broken)
        with pytest.raises(ModelLoadError) as info:
            HFPolicy(str(tmp_path / "model"), device="cpu")
        message = str(info.value)
        assert message.startswith(f"{weights}: corrupt or truncated weights file") and "\n" not in message


def test_state_files_hold_plain_data_only(tmp_path):
    """Everything a checkpoint stores loads with weights_only=True (no pickled Python objects)."""
    from lmgym.algorithms import PPO, PPOConfig
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    algo = PPO(policy, make("ToyDigits-v0"), PPOConfig(output_dir=str(tmp_path / "ppo"), progress=False,
                                                       kl_coeff=0.1, value_model="copy"))
    folder = save_at(algo, 1)
    state = checkpoint_state.read(folder)
    assert state["iteration"] == 1 and "value_model" in state["extra"]
    assert os.path.getsize(folder / "value_model.safetensors") > 0
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        assert isinstance(torch.load(folder / name, weights_only=True), dict)


rewrite_state = checkpoint_state.rewrite


EDITS = {
    "iteration": (lambda s: s.update(iteration=-5), "must be a whole number >= 0, got -5"),
    "iteration ": (lambda s: s.update(iteration="3"), "must be a whole number >= 0, got '3'"),
    "iteration  ": (lambda s: s.update(iteration=2), "says 2, but the folder is iteration 1"),
    "nonfinite_streak": (lambda s: s.update(nonfinite_streak=-1), "must be a whole number >= 0, got -1"),
    "optimizer": (lambda s: s.update(optimizer=[1, 2]), "must be a dict, got list"),
    "optimizer['param_groups']": (lambda s: s["optimizer"].pop("param_groups"), "must be a list, got NoneType"),
    "scheduler": (lambda s: s.update(scheduler=7), "must be a dict, got int"),
    "extra": (lambda s: s.update(extra=None), "must be a dict, got NoneType"),
    "policy['lm_head.weight']": (lambda s: s["policy"].update({"lm_head.weight": 1.5}), "must be a tensor, got float"),
    "rng": (lambda s: s.update(rng="seed"), "must be a dict, got str"),
    "rng['python']": (lambda s: s["rng"].update(python=(3, (1, 2), None)), "is not a valid RNG state"),
    "rng['torch']": (lambda s: s["rng"].update(torch=torch.zeros(3)), "must be a 1-d uint8 tensor"),
    "rng['generator']": (lambda s: s["rng"].update(generator=torch.zeros(3, dtype=torch.uint8)),
                         "is not a valid RNG state"),
    "rng['numpy_algorithm']": (lambda s: s["rng"]["numpy_algorithm"].update(bit_generator="Lehmer"),
                               "names no known bit generator ('Lehmer')"),
    "rng['generator_device']": (lambda s: s["rng"].update(generator_device=3),
                                "must be a device type such as 'cpu' or 'cuda', got 3"),
    "rng['generator_device'] ": (lambda s: s["rng"].update(generator_device="gpu"),
                                 "must be a device type such as 'cpu' or 'cuda', got 'gpu'"),
    "rng['generator_device']  ": (lambda s: s["rng"].update(generator_device="cuda:1"),
                                  "must be a device type such as 'cpu' or 'cuda', got 'cuda:1'"),
    "reference_source": (lambda s: s.update(reference_source="elsewhere"), "must be one of none, adapter"),
    "ref_synced_at": (lambda s: s.update(ref_synced_at=9), "is 9, after the checkpoint's iteration 1"),
}


# the file a bad field is found in (an edit that leaves a field's usual type moves it to another file)
FIELD_FILES = {field: "trainer_state.json" for field in EDITS}
FIELD_FILES.update({"optimizer['param_groups']": "optimizer.pt", "policy['lm_head.weight']": layout.OTHERS,
                    "rng['python']": "rng_state.pth", "rng['torch']": "rng_state.pth",
                    "rng['generator']": "rng_state.pth", "rng['numpy_algorithm']": "rng_state.pth",
                    "rng['generator_device']": "rng_state.pth", "rng['generator_device'] ": "rng_state.pth",
                    "rng['generator_device']  ": "rng_state.pth"})


@pytest.mark.parametrize("field", list(EDITS))
def test_every_field_of_an_edited_state_is_checked_and_named_with_the_file(tmp_path, field):
    change, problem = EDITS[field]
    folder = save_at(tiny_algo(tmp_path), 1)
    rewrite_state(folder, change)
    fresh = tiny_algo(tmp_path)
    before = {k: v.clone() for k, v in fresh.policy.state_dict().items()}
    with pytest.raises(ckpt.CorruptCheckpointError) as info:
        fresh.load(folder)
    message = str(info.value)
    assert message.startswith(f"{folder / FIELD_FILES[field]}: field {field.strip()} {problem}") and "\n" not in message
    assert fresh.iteration == 0 and all(torch.equal(v, before[k]) for k, v in fresh.policy.state_dict().items())


def test_resume_skips_a_checkpoint_edited_to_a_negative_iteration_naming_file_and_field(tmp_path, capsys):
    algo = tiny_algo(tmp_path, keep_checkpoints=2)
    run = tmp_path / "run"
    save_at(algo, 1)
    rewrite_state(save_at(algo, 2), lambda s: s.update(iteration=-5))
    fresh = tiny_algo(tmp_path)
    assert fresh.resume_from(run) == run / "checkpoint-1" and fresh.iteration == 1
    warning = capsys.readouterr().err.strip()
    assert warning == (f"warning: skipping a checkpoint that does not verify: "
                       f"{run / 'checkpoint-2' / 'trainer_state.json'}: field iteration must be a whole "
                       f"number >= 0, got -5")


def a_gpu_runs_generator(state, with_device_key):
    """`state` as a GPU run wrote it: the trainer's sampling generator was a CUDA one, whose state is its seed and
    offset (16 bytes); checkpoints of earlier versions did not name the device."""
    state["rng"]["generator"] = torch.zeros(16, dtype=torch.uint8)
    if with_device_key:
        state["rng"]["generator_device"] = "cuda"
    else:
        state["rng"].pop("generator_device", None)


@slow
@pytest.mark.parametrize("with_device_key", [True, False], ids=["device_named", "earlier_version"])
def test_a_gpu_runs_checkpoint_verifies_and_resumes_here_with_the_generator_reseeded(tmp_path, capsys,
                                                                                     with_device_key):
    """A GPU run's checkpoints were refused as corrupt ("Expected a CPUGeneratorImplState of size 5056 but found
    the input RNG state size to be 16"), so a killed GPU run started over: the CUDA generator's state was tried
    on a CPU generator. It verifies now, and a resume on another device reseeds the generator in one line."""
    if torch.cuda.is_available():
        pytest.skip("checks the resume of a CUDA generator's state on a machine without CUDA")
    algo = tiny_algo(tmp_path, keep_checkpoints=2)
    run = tmp_path / "run"
    assert algo.state_dict()["rng"]["generator_device"] == "cpu"
    rewrite_state(save_at(algo, 1), lambda s: a_gpu_runs_generator(s, with_device_key))
    ckpt.verify(run / "checkpoint-1")
    generators = []
    for _ in range(2):
        fresh = tiny_algo(tmp_path)
        assert fresh.resume_from(run) == run / "checkpoint-1" and fresh.iteration == 1
        generators.append(fresh.generator.get_state())
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: the checkpoint's sampling generator was on cuda, this run's is on cpu: it is "
                        "seeded from the seed and the iteration instead, so sampling from here differs from an "
                        "uninterrupted run's"] * 2
    assert torch.equal(generators[0], generators[1])  # reseeded the same way each time
    assert not torch.equal(generators[0], tiny_algo(tmp_path).generator.get_state())  # not the run's start
