"""--resume with --wandb continues the same W&B run (offline here): the id is kept in the run folder."""
import json

import pytest

from lmgym.training.run_logger import WANDB_ID, RunLogger, read_wandb_id
from tests.test_checkpoint_layout import algorithm
from tests.tiers import slow


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    for name, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": tmp_path / "wandb-dir",
                        "WANDB_CACHE_DIR": tmp_path / "wandb-cache", "WANDB_CONFIG_DIR": tmp_path / "wandb-config"
                        }.items():
        monkeypatch.setenv(name, str(value))


def offline_ids(run):
    """The run id of each offline session, from its transaction log (run-<id>.wandb): the folder's name ends with the
    id only if no other session started within the same second (else wandb appends "-1", "-2", ...)."""
    return sorted(log.name.removeprefix("run-").removesuffix(".wandb")
                  for session in (run / "wandb").glob("offline-run-*") for log in session.glob("run-*.wandb"))


@slow
def test_a_resumed_run_logs_to_the_same_wandb_run(tmp_path, offline_wandb):
    run = tmp_path / "run"
    algorithm(tmp_path, train_iterations=1, wandb="offline").train()
    stored = json.loads((run / WANDB_ID).read_text())["id"]
    algorithm(tmp_path, train_iterations=2, wandb="offline").train(resume=True)
    assert offline_ids(run) == [stored, stored]  # two sessions of one W&B run (`wandb sync` joins them)
    assert json.loads((run / WANDB_ID).read_text())["id"] == stored
    algorithm(tmp_path, train_iterations=1, wandb="offline").train()  # a new run, not resumed: a new W&B run
    new = json.loads((run / WANDB_ID).read_text())["id"]
    assert new != stored and offline_ids(run) == sorted([stored, stored, new])


@slow
def test_an_unusable_stored_id_starts_a_new_wandb_run_with_a_warning(tmp_path, offline_wandb, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / WANDB_ID).write_text('{"id": "../../x"}')
    logger = RunLogger(run, {}, "offline", resume=True)
    run_id = logger._wandb.id
    logger.close()
    assert run_id != "../../x" and json.loads((run / WANDB_ID).read_text())["id"] == run_id
    assert f"warning: {run / WANDB_ID}: no usable W&B run id; --resume starts a new W&B run" in capsys.readouterr().err


@pytest.mark.parametrize("stored", ['{"id": "../../x"}', '{"id": 7}', '["abc"]', "not json", '{"id": ""}'])
def test_an_unusable_stored_id_is_read_as_none_with_one_warning_line(tmp_path, capsys, stored):
    (tmp_path / WANDB_ID).write_text(stored)
    assert read_wandb_id(tmp_path) is None
    assert capsys.readouterr().err == (f"warning: {tmp_path / WANDB_ID}: no usable W&B run id; "
                                       "--resume starts a new W&B run\n")


def test_a_stored_plain_id_is_read_back_and_no_file_is_silently_none(tmp_path, capsys):
    assert read_wandb_id(tmp_path) is None
    (tmp_path / WANDB_ID).write_text('{"id": "a1B2-c_3", "project": "p"}')
    assert read_wandb_id(tmp_path) == "a1B2-c_3"
    assert capsys.readouterr().err == ""
