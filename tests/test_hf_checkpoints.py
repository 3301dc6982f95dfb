"""Checkpoints shaped as the Hugging Face Trainer's: `output_dir/checkpoint-N/` with the tokenizer, HF's keys in
trainer_state.json, every file 0644, `train(resume_from_checkpoint=True|path)` continuing bit-identically, the old
`checkpoints/iter-N` layout still resumed, `save_total_limit` / `save_only_model`; tiny model, CPU."""
import json
import os
import shutil
import stat

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.training import TrainerConfig
from lmgym.training.checkpoints import CheckpointError
from lmgym.training.cli import run_with_clear_errors
from tests import checkpoint_state
from tests.test_pretrained_checkpoint import IDS, trained
from tests.test_trainer import HELD_OUT, TEXTS, SupervisedTrainer
from tests.tiers import slow


def supervised(run_dir, iterations: int, **overrides) -> SupervisedTrainer:
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    settings = dict(train_iterations=iterations, micro_batch_size=4, learning_rate=3e-3, warmup_iterations=3,
                    eval_every=2, save_every=1, keep_checkpoints=2, progress=False, output_dir=str(run_dir))
    return SupervisedTrainer(policy, TEXTS, TrainerConfig(**{**settings, **overrides}), held_out=HELD_OUT)


def same_weights(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.policy.parameters(), b.policy.parameters(), strict=True))


@slow
def test_checkpoints_are_checkpoint_n_folders_that_transformers_loads_with_the_tokenizer(tmp_path):
    algo, folder = trained(tmp_path, iterations=2)
    run = tmp_path / "run"
    assert folder == run / "checkpoint-2" and checkpoint_state.entries(run) == ["checkpoint-1", "checkpoint-2"]
    assert not (run / "checkpoints").exists()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer("7 + 8").input_ids == algo.policy.tokenizer("7 + 8").input_ids
    assert tokenizer.chat_template == algo.policy.tokenizer.chat_template
    with torch.no_grad():
        assert torch.equal(AutoModelForCausalLM.from_pretrained(folder)(IDS).logits, algo.policy.model(IDS).logits)


def test_a_lora_checkpoint_holds_its_tokenizer_and_peft_loads_its_adapter(tmp_path):
    algo, folder = trained(tmp_path, lora=True, iterations=1)
    assert AutoTokenizer.from_pretrained(folder)("3 * 4").input_ids == algo.policy.tokenizer("3 * 4").input_ids
    loaded = PeftModel.from_pretrained(build_tiny_model(build_tiny_tokenizer(), seed=0), folder)
    with torch.no_grad():
        assert torch.allclose(loaded(IDS).logits, algo.policy.model(IDS).logits, atol=1e-5)


def test_trainer_state_json_has_hf_s_keys_beside_ours(tmp_path):
    trainer = supervised(tmp_path / "run", 3)
    rows = trainer.train()
    state = json.loads((tmp_path / "run" / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3 and state["max_steps"] == 3 and state["save_steps"] == 1
    assert state["best_model_checkpoint"] is None and state["best_metric"] is None
    assert state["is_world_process_zero"] is True and state["logging_steps"] == 1
    assert [entry["step"] for entry in state["log_history"]] == [row["iteration"] for row in rows] == [0, 1, 2, 3]
    assert state["log_history"][1]["loss"] == pytest.approx(rows[1]["loss"], rel=1e-12)
    assert "eval_loss" in state["log_history"][2] and "iteration" not in state["log_history"][1]
    assert state["format"] == 2 and state["state"]["iteration"] == 3 and "model.safetensors" in state["layout"]
    earlier = json.loads((tmp_path / "run" / "checkpoint-2" / "trainer_state.json").read_text())
    assert earlier["global_step"] == 2 and [e["step"] for e in earlier["log_history"]] == [0, 1, 2]


@slow
def test_every_file_of_a_checkpoint_and_of_the_model_folder_has_the_usual_mode(tmp_path):
    old = os.umask(0o022)
    try:
        trainer = supervised(tmp_path / "run", 1)
        trainer.train()
        trainer.save_model()
    finally:
        os.umask(old)
    files = [p for sub in ("checkpoint-1", "model") for p in (tmp_path / "run" / sub).rglob("*") if p.is_file()]
    assert any(p.name == "model.safetensors" for p in files) and len(files) > 10
    assert {p.relative_to(tmp_path): oct(stat.S_IMODE(p.stat().st_mode)) for p in files
            if stat.S_IMODE(p.stat().st_mode) != 0o644} == {}


@slow
@pytest.mark.parametrize("how", ["true", "path", "config"])
def test_resume_from_checkpoint_continues_bit_identically(tmp_path, capsys, how):
    whole = supervised(tmp_path / "whole", 4)
    whole_rows = whole.train()
    run = tmp_path / "split"
    supervised(run, 2, keep_checkpoints=3).train()
    if how == "config":  # the flag `--resume_from_checkpoint true` of every example sets this field
        resumed = supervised(run, 4, resume_from_checkpoint="true")
        rows = resumed.train()
    else:
        resumed = supervised(run, 4)
        rows = resumed.train(resume_from_checkpoint=True if how == "true" else str(run / "checkpoint-2"))
    assert f"resuming from {run / 'checkpoint-2'} (iteration 2)" in capsys.readouterr().out
    assert same_weights(resumed, whole)
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3, 4]
    for mine, theirs in zip(rows, whole_rows, strict=True):
        assert {k: v for k, v in mine.items() if not k.startswith("time_")} == \
            {k: v for k, v in theirs.items() if not k.startswith("time_")}
    for a, b in zip(resumed.optimizer.state_dict()["state"].values(), whole.optimizer.state_dict()["state"].values()):
        assert torch.equal(a["exp_avg"], b["exp_avg"]) and torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])


@slow
def test_resume_from_an_earlier_checkpoint_path_redoes_the_later_iterations(tmp_path):
    whole = supervised(tmp_path / "whole", 3)
    whole.train()
    run = tmp_path / "again"
    supervised(run, 3, keep_checkpoints=3).train()
    again = supervised(run, 3, keep_checkpoints=3)
    rows = again.train(resume_from_checkpoint=run / "checkpoint-1")
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3] and same_weights(again, whole)


def test_resume_from_checkpoint_true_without_a_checkpoint_and_a_missing_path_refuse_in_one_line(tmp_path):
    with pytest.raises(CheckpointError, match="no complete checkpoint in") as info:
        supervised(tmp_path / "empty", 2).train(resume_from_checkpoint=True)
    assert "\n" not in str(info.value) and not (tmp_path / "empty" / "metrics.jsonl").exists()
    with pytest.raises(SystemExit) as exit_info:
        run_with_clear_errors(lambda: supervised(tmp_path / "r", 2).train(
            resume_from_checkpoint=str(tmp_path / "nowhere")))
    message = str(exit_info.value.code)
    assert message.startswith("error: resume_from_checkpoint: no checkpoint at") and "\n" not in message


@slow
def test_an_old_iter_n_checkpoint_still_resumes_and_is_pruned_like_the_new_ones(tmp_path, capsys):
    whole = supervised(tmp_path / "whole", 4)
    whole.train()
    run = tmp_path / "old"
    supervised(run, 2).train()
    (run / "checkpoints").mkdir()  # the layout earlier versions wrote
    for n in (1, 2):
        os.rename(run / f"checkpoint-{n}", run / "checkpoints" / f"iter-{n:06d}")
    resumed = supervised(run, 4, keep_checkpoints=2)
    resumed.train(resume=True)
    assert f"resuming from {run / 'checkpoints' / 'iter-000002'} (iteration 2)" in capsys.readouterr().out
    assert same_weights(resumed, whole)
    assert checkpoint_state.entries(run) == ["checkpoint-3", "checkpoint-4"]
    assert list((run / "checkpoints").iterdir()) == []  # both old ones pruned: the newest 2 are kept


def test_save_total_limit_and_save_only_model_are_hf_s_names(tmp_path):
    config = TrainerConfig.from_trl(save_total_limit=1, save_only_model=True, output_dir=str(tmp_path / "run"),
                                    train_iterations=2, save_every=1, micro_batch_size=4, progress=False)
    assert config.keep_checkpoints == 1 and config.save_only_model and config.save_every == 1
    tok = build_tiny_tokenizer()
    trainer = SupervisedTrainer(HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu"), TEXTS, config, HELD_OUT)
    trainer.train()
    folder = tmp_path / "run" / "checkpoint-2"
    assert checkpoint_state.entries(tmp_path / "run") == ["checkpoint-2"]
    names = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "trainer_state.json"} <= names
    assert not names & {"optimizer.pt", "scheduler.pt", "rng_state.pth"}
    assert json.loads((folder / "trainer_state.json").read_text())["global_step"] == 2
    with torch.no_grad():
        assert torch.equal(AutoModelForCausalLM.from_pretrained(folder)(IDS).logits,
                           trainer.policy.model(IDS).logits)
    with pytest.raises(CheckpointError, match="save_only_model") as info:
        SupervisedTrainer(HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu"), TEXTS, config, HELD_OUT).train(
            resume_from_checkpoint=True)
    assert "\n" not in str(info.value) and folder.is_dir()  # refused, never set aside as corrupt


def test_a_fresh_start_moves_checkpoint_folders_aside(tmp_path):
    supervised(tmp_path / "run", 1).train()
    supervised(tmp_path / "run", 1).train()
    assert (tmp_path / "run" / "checkpoint-1.1.bak" / "MANIFEST.json").is_file()
    assert checkpoint_state.entries(tmp_path / "run") == ["checkpoint-1"]
    shutil.rmtree(tmp_path / "run")
