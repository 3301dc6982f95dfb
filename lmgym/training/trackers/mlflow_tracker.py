"""report_to mlflow: an MLflow run through `MlflowClient` (no process-wide active run).

The tracking URI is `MLFLOW_TRACKING_URI` when set (a server the user chose), else a local file store in
`<output_dir>/mlruns` (offline; `mlflow ui --backend-store-uri <output_dir>/mlruns`). mlflow-skinny has no
SQL store, and mlflow 3 keeps the file store behind MLFLOW_ALLOW_FILE_STORE: it is allowed while the store is
opened for that local default only, never for a URI the user set. The experiment is `MLFLOW_EXPERIMENT_NAME`,
else the config's `wandb_project`; the run is named after the run folder, holds the config as params, the scalars
under TRL's names per iteration, and log_completions' table as the artifact `completions.json` (`log_table`,
appended each iteration). The run's id is kept in `<output_dir>/mlflow_run.json`, so that a resumed run continues
the same MLflow run (the iterations it plays again are logged again at their steps). A character MLflow refuses
in a name (a reward function may be named anything) becomes `_`.
"""
from __future__ import annotations

import json
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lmgym.core.atomic_io import atomic_write_text
from lmgym.training.run_logger import MLFLOW_ID
from lmgym.training.trackers.base import Tracker, plain_config

MAX_PARAMS = 100  # params per log_batch call (MLflow's limit)
MAX_PARAM_LENGTH = 6000  # characters of a param's value (MLflow's limit)
_NOT_IN_A_NAME = re.compile(r"[^\w\-. /]")  # MLflow's names: alphanumerics, _ - . space / (colons not on Windows)


def mlflow_name(key: str) -> str:
    """`key` as a name MLflow takes (a reward function's name may hold any character): others become `_`."""
    return _NOT_IN_A_NAME.sub("_", key)


@contextmanager
def local_file_store(uri: str):
    """MLFLOW_ALLOW_FILE_STORE set while a `file:` store is opened (restored after), unless the user set it."""
    allow = uri.startswith("file:") and "MLFLOW_ALLOW_FILE_STORE" not in os.environ
    if allow:
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        if allow:
            os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


def flat_params(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as MLflow params: dotted names, values as text cut to MLflow's limit."""
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            out.update(flat_params(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = json.dumps(value) if not isinstance(value, str) else value
    return {key: value[:MAX_PARAM_LENGTH] for key, value in out.items()}


class MLflowTracker(Tracker):
    """An MLflow run (local file store in `<output_dir>/mlruns` unless MLFLOW_TRACKING_URI is set)."""

    name = "mlflow"
    module = "mlflow"

    def start(self, trainer, resumed: bool) -> None:
        self.library()
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        run_dir = Path(trainer.config.output_dir)
        self.uri = os.environ.get("MLFLOW_TRACKING_URI") or (run_dir / "mlruns").resolve().as_uri()
        with local_file_store(self.uri):
            self.client = MlflowClient(tracking_uri=self.uri)  # opens (and caches) the store
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or trainer.config.wandb_project
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found is not None else self.client.create_experiment(experiment)
        self.run_id = self.stored_run(run_dir) if resumed else None
        if self.run_id is not None:
            self.client.update_run(self.run_id, status="RUNNING")
            return
        self.run_id = self.client.create_run(experiment_id, run_name=run_dir.resolve().name).info.run_id
        params = [Param(mlflow_name(key), value) for key, value in flat_params(plain_config(trainer)).items()]
        for start in range(0, len(params), MAX_PARAMS):
            self.client.log_batch(self.run_id, params=params[start:start + MAX_PARAMS])
        atomic_write_text(run_dir / MLFLOW_ID, json.dumps({"run_id": self.run_id, "tracking_uri": self.uri,
                                                           "experiment": experiment}))

    def stored_run(self, run_dir: Path) -> str | None:
        """The run id an earlier start of this run stored for this tracking URI, or None (a new MLflow run)."""
        try:
            stored = json.loads((run_dir / MLFLOW_ID).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(stored, dict) or stored.get("tracking_uri") != self.uri:
            return None
        run_id = stored.get("run_id")
        return run_id if isinstance(run_id, str) and run_id.isalnum() else None

    def log_scalars(self, values: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(mlflow_name(key), value, now, step) for key, value in values.items()]
        for start in range(0, len(metrics), 1000):  # MLflow's limit of metrics per log_batch call
            self.client.log_batch(self.run_id, metrics=metrics[start:start + 1000])

    def log_table(self, columns: list[str], data: list[list[Any]], step: int) -> None:
        table = {column: [row[k] for row in data] for k, column in enumerate(columns)}
        self.client.log_table(self.run_id, data=table, artifact_file="completions.json")

    def finish(self) -> None:
        self.client.set_terminated(self.run_id)
