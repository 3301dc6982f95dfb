"""report_to's trackers (TensorBoard, MLflow, trackio) on a 2-iteration GRPO run, offline: each gets the scalars
in TRL's names and log_completions' table; metrics.jsonl is in TRL's names and reads back (old run folders too)
in the toolkit's; a missing library is one line naming the [trackers] extra."""
from __future__ import annotations

import json
import sys

import pytest

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.core.extras import EXTRAS, MissingExtraError
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from lmgym.training import config as config_module
from lmgym.training import trackers
from lmgym.training.metric_names import RENAMED, internal_names, read_metrics, trl_names
from lmgym.training.run_logger import RunLogger
from lmgym.training.trackers.tensorboard_tracker import markdown_table
from tests.test_config_validation import one_line_error
from tests.tiers import slow

ROWS = [{"prompt": "Name a color.", "answer": "red"}, {"prompt": "Name a fruit.", "answer": "fig"}]
OLD_NAMES = ("reward_mean", "reward_vowels", "completion_length", "truncated_fraction", "zero_variance_groups",
             "clip_fraction")


def vowels(completions, **kwargs):
    return [float(sum(c.count(v) for v in "aeiou")) for c in completions]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One tracked run: (run folder, the rows train() returned, TRACKIO_DIR)."""
    tmp = tmp_path_factory.mktemp("tracked")
    with pytest.MonkeyPatch.context() as mp:
        for name in ("TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME",
                     "MLFLOW_ALLOW_FILE_STORE"):
            mp.delenv(name, raising=False)
        mp.setenv("TRACKIO_DIR", str(tmp / "trackio"))  # used when trackio is first imported in this process
        mp.setenv("HF_HUB_OFFLINE", "1")
        tok = build_tiny_tokenizer()
        policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
        config = GRPOConfig.from_trl(num_generations=4, per_device_train_batch_size=4, gradient_accumulation_steps=2,
                                     max_steps=2, max_completion_length=4, learning_rate=1e-2, beta=0.04,
                                     output_dir=str(tmp / "run"), disable_tqdm=True, seed=0, eval_at_start=False,
                                     log_completions=True, report_to=["tensorboard", "mlflow", "trackio"],
                                     wandb_project="lmgym-test")
        rows = GRPO(policy, ROWS, config, reward_funcs=[vowels]).train()
        assert "MLFLOW_ALLOW_FILE_STORE" not in __import__("os").environ  # allowed only while the store opened
    return tmp / "run", rows


@slow
def test_metrics_jsonl_has_trls_names_and_reads_back_in_ours(run):
    folder, rows = run
    logged = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in logged] == [1, 2]
    for row, ours in zip(logged, rows):
        for key in ("reward", "reward_std", "rewards/vowels/mean", "rewards/vowels/std", "kl", "entropy",
                    "completions/mean_length", "completions/clipped_ratio", "clip_ratio/region_mean",
                    "frac_reward_zero_std", "learning_rate", "grad_norm", "loss"):
            assert key in row, key
        assert not set(OLD_NAMES) & set(row)
        assert row["reward"] == pytest.approx(ours["reward_mean"]) and row["kl"] == pytest.approx(ours["kl"])
        assert row["rewards/vowels/mean"] == pytest.approx(ours["reward_vowels"])
        values = ours["rewards_vowels"]
        mean = sum(values) / len(values)
        assert row["rewards/vowels/std"] == pytest.approx((sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5)
    assert RunLogger(folder, {}, resume=True).read() == rows  # read back in the toolkit's names, exactly


@slow
def test_tensorboard_event_files_hold_the_scalars_and_the_table(run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder, rows = run
    assert list((folder / "tensorboard").glob("events.out.tfevents.*"))
    events = EventAccumulator(str(folder / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    for key, ours in (("rewards/vowels/mean", "reward_vowels"), ("reward", "reward_mean"),
                      ("completions/mean_length", "completion_length")):
        scalars = events.Scalars(key)
        assert [s.step for s in scalars] == [1, 2]
        assert [s.value for s in scalars] == pytest.approx([row[ours] for row in rows], rel=1e-6)
    assert "reward_mean" not in events.Tags()["scalars"]
    texts = events.Tensors("completions/text_summary")
    assert [t.step for t in texts] == [1, 2]
    table = texts[0].tensor_proto.string_val[0].decode()
    assert table.startswith("| iteration | group | prompt | completion | reward | rewards/vowels |")
    assert table.count("Name a") == 8  # 2 prompts x 4 completions


@slow
def test_mlflow_run_in_the_local_store_holds_the_metrics_and_the_table(run, monkeypatch):
    from mlflow.tracking import MlflowClient

    from lmgym.training.trackers.mlflow_tracker import local_file_store

    folder, rows = run
    stored = json.loads((folder / "mlflow_run.json").read_text())
    assert stored["tracking_uri"] == (folder / "mlruns").resolve().as_uri() and stored["experiment"] == "lmgym-test"
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with local_file_store(stored["tracking_uri"]):
        client = MlflowClient(tracking_uri=stored["tracking_uri"])
    mlflow_run = client.get_run(stored["run_id"])
    assert mlflow_run.info.status == "FINISHED" and mlflow_run.info.run_name == "run"
    assert mlflow_run.data.params["kl_coeff"] == "0.04"
    history = client.get_metric_history(stored["run_id"], "rewards/vowels/mean")
    assert [m.step for m in history] == [1, 2]
    assert [m.value for m in history] == pytest.approx([row["reward_vowels"] for row in rows])
    assert "reward_mean" not in mlflow_run.data.metrics and "reward" in mlflow_run.data.metrics
    table = json.loads(next((folder / "mlruns").rglob("artifacts/completions.json")).read_text())
    assert table["columns"][:5] == ["iteration", "group", "prompt", "completion", "reward"]
    assert [row[0] for row in table["data"]] == [1] * 8 + [2] * 8


@slow
def test_trackio_local_store_holds_the_metrics_and_the_table(run):
    from trackio.sqlite_storage import SQLiteStorage

    folder, rows = run
    stored = json.loads((folder / "trackio_run.json").read_text())
    assert (stored["project"], stored["run"]) == ("lmgym-test", "run")
    logs = SQLiteStorage.get_logs(stored["project"], stored["run"])
    scalars = [log for log in logs if "reward" in log]
    assert [log["step"] for log in scalars] == [1, 2]
    assert [log["rewards/vowels/mean"] for log in scalars] == pytest.approx([row["reward_vowels"] for row in rows])
    tables = [log for log in logs if "completions" in log]
    assert [log["step"] for log in tables] == [1, 2]
    assert tables[0]["completions"]["_type"] == "trackio.table" and len(tables[0]["completions"]["_value"]) == 8


def test_a_missing_tracker_library_is_one_line_naming_the_extra(monkeypatch):
    assert EXTRAS["trackers"] == tuple(config_module.TRACKER_MODULES.values()) == tuple(trackers.MODULES.values())
    for name, module in config_module.TRACKER_MODULES.items():
        with monkeypatch.context() as mp:
            mp.setitem(sys.modules, module, None)  # as if not installed
            message = one_line_error(GRPOConfig, report_to=(name,))
            assert message == (f"GRPOConfig.report_to {name} needs the [trackers] extra ({module} is not installed): "
                               f"pip install -e '.[trackers]' in the toolkit's folder")
            with pytest.raises(MissingExtraError, match=rf"^report_to {name} needs the \[trackers\] extra"):
                trackers.TRACKERS[name]().library()


def test_report_to_names_every_tracker_and_only_rank_0_starts_one(monkeypatch, tmp_path):
    config = GRPOConfig.from_trl(report_to=["TensorBoard", "mlflow", "trackio"], output_dir=str(tmp_path / "r"))
    assert config.report_to == ("tensorboard", "mlflow", "trackio")
    assert [type(t) for t in trackers.trackers_for(config.report_to)] == [
        trackers.TensorBoardTracker, trackers.MLflowTracker, trackers.TrackioTracker]
    assert trackers.trackers_for(("wandb",)) == []

    class Trainer:
        iteration = 0

    monkeypatch.setattr(trackers.base.dist, "is_main", lambda: False)
    for tracker in trackers.trackers_for(config.report_to):
        tracker.on_train_begin(Trainer())  # not rank 0: nothing started, nothing written
        tracker.on_log(Trainer(), {"iteration": 1, "reward_mean": 1.0})
        tracker.on_train_end(Trainer(), [])
        assert not tracker.active
    assert not (tmp_path / "r").exists()


def test_old_metrics_jsonl_reads_in_trls_names_through_the_mapping(tmp_path):
    old = {"iteration": 1, "reward_mean": 0.5, "reward_std": 0.5, "train_accuracy": 0.0, "completion_length": 4.0,
           "truncated_fraction": 1.0, "rewards": [0.0, 1.0], "reward_correct": 0.5, "rewards_correct": [0.0, 1.0],
           "zero_variance_groups": 0.5, "reward_failures": 0, "clip_fraction": 0.25, "kl": 0.1, "loss": 0.2,
           "eval_accuracy": 1.0, "eval_reward_correct": 1.0, "eval_mean_length": 3.0, "policy_lag": 0.5,
           "dropped_stale_trajectories": 2}
    (tmp_path / "metrics.jsonl").write_text(json.dumps(old) + "\n")
    [row] = read_metrics(tmp_path / "metrics.jsonl")
    assert row == {"iteration": 1, "reward": 0.5, "reward_std": 0.5, "train_accuracy": 0.0,
                   "completions/mean_length": 4.0, "completions/clipped_ratio": 1.0, "rewards": [0.0, 1.0],
                   "rewards/correct/mean": 0.5, "rewards/correct/std": 0.5, "rewards_correct": [0.0, 1.0],
                   "frac_reward_zero_std": 0.5, "reward_failures": 0, "clip_ratio/region_mean": 0.25, "kl": 0.1,
                   "loss": 0.2, "eval_accuracy": 1.0, "eval_rewards/correct/mean": 1.0,
                   "eval_completions/mean_length": 3.0, "rollouts/policy_lag": 0.5, "rollouts/dropped_stale": 2}
    assert trl_names(row) == row and internal_names(row) == old  # TRL's names stay; the inverse is exact
    assert RunLogger(tmp_path, {}, resume=True).read() == [old]  # an old folder reads as it always did
    assert set(RENAMED) <= set(old)
    assert internal_names(trl_names({"mean_length": 2.0})) == {"mean_length": 2.0}  # eval_ only: evaluation's
    # evaluation rows carry no per-episode lists: reward_<fn> is a function's mean unless it is another metric
    assert trl_names({"eval_reward_margin": 1.0, "eval_reward_f": 2.0}) == {"eval_reward_margin": 1.0,
                                                                          "eval_rewards/f/mean": 2.0}


def test_report_to_as_flags_and_names_mlflow_takes():
    from lmgym.training.trackers.mlflow_tracker import mlflow_name
    from tests.test_trl_batch_names import flags

    assert flags(GRPOConfig, ["--report_to", "tensorboard", "trackio"]).report_to == ("tensorboard", "trackio")
    assert mlflow_name("rewards/f1 (x):y!/mean") == "rewards/f1 _x__y_/mean"
    assert mlflow_name("eval_rewards/a-b.c/std") == "eval_rewards/a-b.c/std"


def test_early_stopping_takes_trls_name_for_a_metric():
    from lmgym.training.callbacks import EarlyStopping

    class Trainer:
        iteration, should_stop = 3, False

    for metric in ("reward", "reward_mean"):
        stopping, trainer = EarlyStopping(metric, patience=1), Trainer()
        for value in (0.5, 0.4):
            stopping.on_log(trainer, {"iteration": 1, "reward_mean": value})
        assert trainer.should_stop and stopping.best == 0.5, metric


def test_markdown_table_escapes_what_would_break_it():
    text = markdown_table(["prompt", "completion"], [["a|b", "line\nbreak"]])
    assert text.splitlines() == ["| prompt | completion |", "|---|---|", "| a\\|b | line<br>break |"]


@slow
def test_wandb_gets_trls_names_and_the_table(tmp_path):
    pytest.importorskip("wandb")
    from lmgym.training.completions_log import table_of
    from tests.wandb_history import written_history

    completions = [{"iteration": 1, "group": 0, "prompt": "Say hi.", "completion": "hi", "reward": 1.0,
                    "rewards": {"f": 1.0}, "correct": None, "truncated": False}]
    logger = RunLogger(tmp_path, {}, wandb_mode="offline")
    logger.log({"iteration": 1, "reward_mean": 0.5, "reward_f": 1.0, "rewards_f": [1.0, 1.0]})
    logger.log_table(*table_of(completions), step=1)
    logger.close(plots=False)
    [row] = written_history(next(tmp_path.glob("wandb/offline-run-*/*.wandb")), rows=1)
    assert row["_step"] == 1 and row["reward"] == 0.5 and row["rewards/f/mean"] == 1.0 and "reward_mean" not in row
    assert row["completions/_type"] == "table-file" and row["completions/nrows"] == 1


def test_plots_draw_rows_read_in_trls_names(tmp_path):
    from lmgym.training.plots import draw_metrics

    rows = [{"iteration": i, "reward": i / 2, "completions/mean_length": 3.0 + i} for i in (1, 2)]
    panels = {ax.get_title(): ax for ax in draw_metrics(rows).axes}
    assert [list(line.get_ydata()) for line in panels["reward (mean of batch)"].get_lines()] == [[0.5, 1.0]]
    assert [list(line.get_ydata()) for line in panels["completion length (tokens)"].get_lines()] == [[4.0, 5.0]]


@slow
def test_a_resumed_run_continues_its_tracker_runs_and_a_new_one_starts_afresh(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from lmgym.training.trackers.mlflow_tracker import local_file_store

    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_ALLOW_FILE_STORE"):
        monkeypatch.delenv(name, raising=False)
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    folder = tmp_path / "run"

    def train(max_steps: int, **how):
        config = GRPOConfig.from_trl(num_generations=2, per_device_train_batch_size=2, max_steps=max_steps,
                                     max_completion_length=2, output_dir=str(folder), disable_tqdm=True, seed=0,
                                     eval_at_start=False, report_to=["tensorboard", "mlflow"])
        GRPO(policy, ROWS, config, reward_funcs=[vowels]).train(**how)
        return json.loads((folder / "mlflow_run.json").read_text())["run_id"]

    def steps(log_dir) -> list[int]:
        events = EventAccumulator(str(log_dir))
        events.Reload()
        return [s.step for s in events.Scalars("reward")]

    first = train(1)
    resumed = train(2, resume_from_checkpoint=True)  # from checkpoint-1: iteration 2 goes to the same runs
    uri = (folder / "mlruns").resolve().as_uri()
    with local_file_store(uri):
        client = MlflowClient(tracking_uri=uri)
    assert resumed == first and [m.step for m in client.get_metric_history(first, "reward")] == [1, 2]
    assert steps(folder / "tensorboard") == [1, 2]
    again = train(1)  # a new run in the same folder: new runs; the earlier events are moved aside with the metrics
    assert again != first and [m.step for m in client.get_metric_history(again, "reward")] == [1]
    assert steps(folder / "tensorboard") == [1] and steps(folder / "tensorboard.1.bak") == [1, 2]
    assert (folder / "metrics.1.jsonl.bak").is_file()
