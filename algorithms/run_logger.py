"""Run folder: resolved config, metrics.jsonl (one line per iteration), PNG plots, optional wandb."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class RunLogger:
    """Appends metrics to `<run>/metrics.jsonl` and mirrors them to wandb when enabled."""

    def __init__(self, run_dir: str | Path, config: dict[str, Any], wandb_mode: str = "off",
                 project: str = "rlgym", resume: bool = False):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.run_dir / "metrics.jsonl"
        (self.run_dir / "config.json").write_text(json.dumps(config, indent=2, default=str))
        if not resume and self.metrics_path.exists():
            self.metrics_path.unlink()
        self._wandb = None
        if wandb_mode != "off":
            try:
                import wandb
            except ImportError:
                raise RuntimeError("wandb logging asked for but wandb is not installed: pip install wandb") from None
            self._wandb = wandb.init(project=project, mode=wandb_mode, dir=str(self.run_dir), config=config,
                                     name=self.run_dir.name, resume="allow" if resume else None)

    def truncate_after(self, iteration: int) -> None:
        """On resume, drop lines logged after the checkpoint (they will be produced again)."""
        if not self.metrics_path.exists():
            return
        rows = [r for r in self.read() if r.get("iteration", -1) <= iteration]
        self.metrics_path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def log(self, metrics: dict[str, Any]) -> None:
        with open(self.metrics_path, "a") as fh:
            fh.write(json.dumps(metrics, default=float) + "\n")
        if self._wandb is not None:
            self._wandb.log(metrics, step=int(metrics.get("iteration", 0)))

    def read(self) -> list[dict[str, Any]]:
        if not self.metrics_path.exists():
            return []
        return [json.loads(line) for line in self.metrics_path.read_text().splitlines() if line.strip()]

    def close(self) -> None:
        if self._wandb is not None:
            self._wandb.finish()
