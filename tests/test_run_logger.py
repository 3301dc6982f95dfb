"""metrics.jsonl survives kills: torn last lines, atomic truncation, rows set aside rather than lost."""
import json

import pytest

from lmgym.training.run_logger import DISCARDED, MetricsHistoryError, RunLogger, check_history
from tests.faults import Killed, crash_at_fixture  # noqa: F401  (the crash_at fixture)
from tests.tiers import slow


def rows(n):
    """metrics.jsonl's lines for rows {"iteration": i, "reward_mean": i / 10}: written in TRL's name, "reward"."""
    return "".join(json.dumps({"iteration": i, "reward": i / 10}) + "\n" for i in range(1, n + 1))


def test_a_line_torn_by_a_kill_is_ignored_then_set_aside_on_resume(tmp_path, crash_at, capsys):
    logger = RunLogger(tmp_path, {})
    logger.log({"iteration": 1, "reward_mean": 0.1})
    crash_at("metrics.write:1")
    with pytest.raises(Killed):
        logger.log({"iteration": 2, "reward_mean": 0.2})
    text = (tmp_path / "metrics.jsonl").read_text()
    assert not text.endswith("\n") and text.count("\n") == 1  # half a line on disk
    resumed = RunLogger(tmp_path, {}, resume=True)
    assert resumed.read() == [{"iteration": 1, "reward_mean": 0.1}]
    assert "metrics.jsonl:2: unreadable line" in capsys.readouterr().err
    resumed.truncate_after(1)
    assert (tmp_path / "metrics.jsonl").read_text() == rows(1)
    assert (tmp_path / DISCARDED).read_text() == text.splitlines()[1] + "\n"
    resumed.log({"iteration": 2, "reward_mean": 0.2})
    assert (tmp_path / "metrics.jsonl").read_text() == rows(2)


@pytest.mark.parametrize("point", ["truncate.side_file:1", "truncate.before_replace:1", "truncate.after_replace:1"])
def test_a_kill_inside_truncate_after_never_loses_rows(tmp_path, crash_at, point):
    (tmp_path / "metrics.jsonl").write_text(rows(5))
    logger = RunLogger(tmp_path, {}, resume=True)
    crash_at(point)
    with pytest.raises(Killed):
        logger.truncate_after(3)
    after_kill = (tmp_path / "metrics.jsonl").read_text()
    assert after_kill in (rows(5), rows(3))  # the old file or the new one, never a partial one
    crash_at(None)
    RunLogger(tmp_path, {}, resume=True).truncate_after(3)  # the resume after the kill
    assert (tmp_path / "metrics.jsonl").read_text() == rows(3)
    kept = {json.loads(line)["iteration"] for line in (tmp_path / DISCARDED).read_text().splitlines()}
    assert kept == {4, 5}  # rows after the checkpoint are set aside, not destroyed


def test_truncate_after_leaves_a_clean_file_alone(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(rows(3))
    before = (tmp_path / "metrics.jsonl").stat().st_mtime_ns
    RunLogger(tmp_path, {}, resume=True).truncate_after(3)
    assert (tmp_path / "metrics.jsonl").stat().st_mtime_ns == before and not (tmp_path / DISCARDED).exists()


def test_a_new_run_moves_the_old_metrics_aside(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(rows(2))
    RunLogger(tmp_path, {}).log({"iteration": 1})
    assert (tmp_path / "metrics.1.jsonl.bak").read_text() == rows(2)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"iteration": 1}\n'


def test_a_kill_while_moving_the_old_history_aside_loses_nothing(tmp_path, crash_at):
    (tmp_path / "metrics.jsonl").write_text(rows(2))
    (tmp_path / DISCARDED).write_text(rows(3))
    crash_at("archive.moved:1")
    with pytest.raises(Killed):
        RunLogger(tmp_path, {})  # a new run: killed after moving metrics.jsonl, before the side file
    assert (tmp_path / "metrics.1.jsonl.bak").read_text() == rows(2) and (tmp_path / DISCARDED).read_text() == rows(3)
    crash_at(None)
    RunLogger(tmp_path, {}).log({"iteration": 1})  # started again: the rest goes aside under the next free number
    assert (tmp_path / "metrics.1.jsonl.bak").read_text() == rows(2)
    assert (tmp_path / "metrics.2.discarded.jsonl.bak").read_text() == rows(3)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"iteration": 1}\n' and not (tmp_path / DISCARDED).exists()


@pytest.fixture
def no_wandb_credentials(tmp_path, monkeypatch):
    """A HOME, .netrc and wandb settings folder with no credentials, no WANDB_* variables, a fresh wandb
    setup, and no network (a connection attempt fails the test)."""
    yield from without_wandb_credentials(tmp_path, monkeypatch)


def without_wandb_credentials(tmp_path, monkeypatch):
    """The fixture's body, as a plain generator, so a test can run it whole."""
    import os
    import socket

    import wandb

    # Tear down first: wandb's service clears its own WANDB_SERVICE token then. Deleting the token before the
    # teardown would let monkeypatch restore it afterwards, naming a dead service to every later wandb test.
    wandb.teardown()
    for name in [n for n in os.environ if n.startswith("WANDB_")]:
        monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NETRC", str(home / ".netrc"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(home / "wandb-config"))

    def no_network(*args, **kwargs):
        raise AssertionError("the wandb check tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    wandb.teardown()  # wandb caches its settings per process
    yield home
    wandb.teardown()


@slow
def test_wandb_online_without_an_api_key_is_refused_before_anything_loads(no_wandb_credentials, tmp_path, monkeypatch):
    from lmgym.algorithms import GRPOConfig
    from lmgym.training.config import ConfigError
    from tests.test_examples import ROOT, error_line, load_script

    quickstart = load_script(ROOT / "examples" / "quickstart.py")
    run = tmp_path / "run"
    message = error_line(quickstart, ["--model", str(tmp_path / "no-model"), "--output_dir", str(run),
                                      "--wandb", "online"])
    assert message.startswith("error: GRPOConfig.wandb is 'online', but wandb finds no API key for ")
    assert message.endswith(": run `wandb login`, set WANDB_API_KEY, or use --wandb offline (and `wandb sync` later)")
    assert not run.exists()  # refused before the model (which does not exist) or the run folder
    assert GRPOConfig(wandb="offline", output_dir=str(run)).wandb == "offline"  # offline needs no key
    monkeypatch.setenv("WANDB_API_KEY", "short")
    with pytest.raises(ConfigError, match=r"wandb cannot use its credentials \(WANDB_API_KEY invalid: .*\): run "
                                          r"`wandb login`"):
        GRPOConfig(wandb="online", output_dir=str(run))
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)  # checked for form only, never against the server
    assert GRPOConfig(wandb="online", output_dir=str(run)).wandb == "online"
    monkeypatch.delenv("WANDB_API_KEY")
    (no_wandb_credentials / ".netrc").write_text("machine api.example.com\n  login user\n  password " + "n" * 40 + "\n")
    monkeypatch.setenv("WANDB_BASE_URL", "https://api.example.com")
    import wandb

    wandb.teardown()
    assert GRPOConfig(wandb="online", output_dir=str(run)).wandb == "online"  # `wandb login` wrote such a .netrc
    assert not run.exists()


def test_check_history_counts_whole_rows_up_to_the_checkpoint(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"iteration": 0}\n' + rows(3) + '{"iteration": [4]}\n{"iteration": 5, "rew')  # odd tail
    check_history(tmp_path, 3, "ckpt")  # rows after the checkpoint, a torn line: truncate_after's concern
    path.write_text(rows(1) + rows(3).splitlines(keepends=True)[2])  # iterations 1 and 3
    with pytest.raises(MetricsHistoryError) as info:
        check_history(tmp_path, 3, "ckpt")
    assert str(info.value).startswith(f"{path}: no rows for 1 of the 3 iterations ckpt has trained (the first "
                                      f"missing: iteration 2);")


@slow
def test_the_credentials_fixture_leaves_no_dead_wandb_service_behind(tmp_path, monkeypatch):
    """A wandb service started before the fixture must not be named by WANDB_SERVICE after it: the fixture tears
    that service down, and a restored token would make every later wandb test in the process fail to connect
    (CI failed so, when test_trackers, this file and test_wandb_resume shared an xdist worker)."""
    import wandb

    from lmgym.training.run_logger import RunLogger

    monkeypatch.setenv("WANDB_SILENT", "true")
    RunLogger(tmp_path / "before", {}, wandb_mode="offline").close()  # starts this process's wandb service
    inner = pytest.MonkeyPatch()
    steps = without_wandb_credentials(tmp_path / "isolated", inner)
    (tmp_path / "isolated").mkdir()
    next(steps)
    next(steps, None)  # the fixture's teardown
    inner.undo()  # what pytest does after the fixture
    logger = RunLogger(tmp_path / "after", {}, wandb_mode="offline")  # connects: a live service or a new one
    logger.close()
    wandb.teardown()
