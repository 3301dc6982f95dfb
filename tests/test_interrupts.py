"""Ctrl-C during training: the iteration in progress finishes and is checkpointed, one line, exit status 130;
a second Ctrl-C stops at once; --resume continues exactly."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmgym.training.callbacks import TrainerCallback
from lmgym.training.cli import run_with_clear_errors
from lmgym.training.guards import TrainingInterrupted
from tests import checkpoint_state
from tests.test_checkpoint_layout import algorithm, rows
from tests.test_examples import load_script
from tests.test_run_folder import save_tiny
from tests.tiers import slow

pytestmark = slow  # the slow tier (tests/tiers.py): interrupts training processes

ROOT = Path(__file__).resolve().parents[1]


class Interrupt(TrainerCallback):
    """Sends this process SIGINT `times` times when `iteration` ends (inside the training loop)."""

    def __init__(self, iteration, times):
        self.iteration, self.times = iteration, times

    def on_iteration_end(self, trainer, metrics):
        if trainer.iteration == self.iteration:
            for _ in range(self.times):
                os.kill(os.getpid(), signal.SIGINT)


def interrupt_at(algo, iteration, times=1):
    """Send this process SIGINT `times` times when `iteration` ends (inside the training loop)."""
    algo.callbacks.add(Interrupt(iteration, times))


def checkpoints(run):
    return checkpoint_state.entries(run)


def test_ctrl_c_checkpoints_the_iteration_and_resuming_equals_an_uninterrupted_run(tmp_path):
    # the handler the process had (Python's default_int_handler, or SIG_IGN when launched as a background job)
    before = signal.getsignal(signal.SIGINT)
    straight = algorithm(tmp_path / "a", train_iterations=4, save_every=0)
    straight.train()
    run = tmp_path / "b" / "run"
    interrupted = algorithm(tmp_path / "b", train_iterations=4, save_every=0)  # no checkpoint but on Ctrl-C
    interrupt_at(interrupted, 2)
    with pytest.raises(TrainingInterrupted) as info:
        interrupted.train()
    assert str(info.value) == f"interrupted at iteration 2; resume with --resume (run folder {run})"
    assert checkpoints(run) == ["checkpoint-2"]
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back
    resumed = algorithm(tmp_path / "b", train_iterations=4, save_every=0)
    resumed.train(resume=True)
    for (name, a), b in zip(straight.policy.state_dict().items(), resumed.policy.state_dict().values()):
        assert torch.equal(a, b), name
    assert rows(tmp_path / "a" / "run") == rows(run)


def test_a_second_ctrl_c_stops_at_once_and_resume_takes_the_last_complete_checkpoint(tmp_path):
    run = tmp_path / "run"
    algo = algorithm(tmp_path, train_iterations=4)
    interrupt_at(algo, 2, times=2)  # both inside iteration 2, before its checkpoint
    with pytest.raises(TrainingInterrupted) as info:
        algo.train()
    assert str(info.value) == (f"interrupted during iteration 2; resume with --resume (from the newest complete "
                               f"checkpoint in {run})")
    assert checkpoints(run) == ["checkpoint-1"]
    fresh = algorithm(tmp_path, train_iterations=4)
    assert fresh.resume_from(run) == run / "checkpoint-1"


def test_ctrl_c_outside_training_is_one_line_and_status_130(monkeypatch, capsys):
    monkeypatch.delenv("RLGYM_TRACEBACK", raising=False)

    def loading():
        raise KeyboardInterrupt
    with pytest.raises(SystemExit) as info:
        run_with_clear_errors(loading)
    assert info.value.code == 130 and capsys.readouterr().err == "interrupted\n"


def test_sigint_in_a_cli_run_prints_one_line_exits_130_and_resume_continues(tmp_path, capsys):
    model = save_tiny(tmp_path / "tiny")
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2",
           "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}  # model loading: quiet
    env.pop("RLGYM_TRACEBACK", None)
    flags = ["--preset", "cpu", "--model", str(model), "--prompts_per_iteration", "2", "--samples_per_prompt", "2",
             "--max_new_tokens", "4", "--eval_episodes", "2", "--micro_batch_size", "4", "--no-eval_at_start",
             "--save_every", "0", "--no-progress", "--output_dir", str(run), "--train_iterations", "4"]
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "sigint_child.py"), "2", *flags], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 130, result.stderr[-3000:]
    assert result.stderr == f"interrupted at iteration 2; resume with --resume (run folder {run})\n"
    assert checkpoints(run) == ["checkpoint-2"] and not (run / "model").exists()
    load_script(ROOT / "examples" / "quickstart.py").main([*flags, "--resume"])  # resumed in this process
    assert f"resuming from {run / 'checkpoint-2'} (iteration 2)" in capsys.readouterr().out
    assert [row["iteration"] for row in rows(run)] == [1, 2, 3, 4] and (run / "model").is_dir()
