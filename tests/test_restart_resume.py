"""A run that torchrun restarted (TORCHELASTIC_RESTART_COUNT > 0) resumes by itself from the newest complete
checkpoint of its run folder (trainer_state.after_restart), in one process here; the kill-and-restart runs
under torchrun are tests/test_elastic.py's. A restart that finds no checkpoint starts from iteration 0 with one
warning line; a restart continues the run's newest checkpoint even when the launch named an older one
(resume_from_checkpoint); a restart count that is not a number is one line."""
from __future__ import annotations

import pytest
import torch

from lmgym.training import distributed
from tests.distributed_worker import build_algorithm
from tests.tiers import slow

SETTINGS = {"max_new_tokens": 4, "eval_at_start": False, "save_every": 1, "seed": 3}


def algorithm(run_dir, iterations: int):
    return build_algorithm(str(run_dir), "allreduce", "full", train_iterations=iterations, **SETTINGS)


def params(algo) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in algo.policy.model.named_parameters()}


def test_restart_count_reads_torchruns_variable_and_refuses_a_bad_one_in_one_line(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    assert distributed.restart_count() == 0
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    assert distributed.restart_count() == 2
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    assert distributed.restart_store() is None  # no torchrun agent store here: the usual rendezvous
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "-1")
    with pytest.raises(ValueError, match=r"^TORCHELASTIC_RESTART_COUNT must be a whole number >= 0 \(torchrun sets "
                                         r"it\), got '-1'$"):
        distributed.restart_count()


@slow
def test_a_restarted_run_resumes_from_its_newest_checkpoint_without_resume(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    straight = algorithm(tmp_path / "straight", 2)
    straight.train()
    first = algorithm(tmp_path / "run", 1)
    first.train()  # checkpoint-1, then "lost"
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    capsys.readouterr()
    restarted = algorithm(tmp_path / "run", 2)
    rows = restarted.train()  # no resume=True: the restart resumes by itself
    out = capsys.readouterr().out
    assert f"resuming from {tmp_path / 'run' / 'checkpoint-1'} (iteration 1)" in out
    assert [r["iteration"] for r in rows] == [1, 2] and restarted.iteration == 2
    for name, value in params(straight).items():
        assert torch.equal(params(restarted)[name], value), name


@slow
def test_a_restart_without_a_checkpoint_starts_over_with_one_warning_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "3")
    rows = algorithm(tmp_path / "run", 1).train()
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: torchrun restart 3: no complete checkpoint in {tmp_path / 'run'} to resume from; "
                        f"starting again from iteration 0"]
    assert [r["iteration"] for r in rows] == [1]


@slow
def test_a_restart_continues_the_newest_checkpoint_not_the_one_named_at_the_start(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    algorithm(tmp_path / "run", 3).train()  # checkpoint-2 and checkpoint-3 kept
    older = tmp_path / "run" / "checkpoint-2"
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    capsys.readouterr()
    restarted = algorithm(tmp_path / "run", 4)
    restarted.train(resume_from_checkpoint=str(older))  # the launch named checkpoint-2; the run has moved on since
    assert f"resuming from {tmp_path / 'run' / 'checkpoint-3'} (iteration 3)" in capsys.readouterr().out
    assert restarted.iteration == 4
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")  # the first start: the named checkpoint, as asked
    named = algorithm(tmp_path / "run", 4)
    named.train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-4"))
    assert f"resuming from {tmp_path / 'run' / 'checkpoint-4'} (iteration 4)" in capsys.readouterr().out
