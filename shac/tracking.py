"""Run tracking: metrics.jsonl in the run directory, Weights & Biases, and a progress bar."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from shac.config import TrainConfig

METRICS_FILE = "metrics.jsonl"


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


class Tracker:
    """Writes each logged epoch to `metrics.jsonl` (always) and to W&B (unless disabled).

    Non-finite values are written as JSON null. Use as a context manager.

    Args:
        config: the run's config (sent to W&B, shapes the progress bar).
        run_dir: where metrics.jsonl (and W&B's offline files) go.
    """

    def __init__(self, config: TrainConfig, run_dir: Path):
        self.config = config
        self.run_dir = run_dir
        self.start = time.perf_counter()
        self._file = open(run_dir / METRICS_FILE, "a")  # noqa: SIM115 (closed in close())
        self._wandb_run = None
        if config.logger.mode != "disabled":
            import wandb

            self._wandb_run = wandb.init(
                mode=config.logger.mode,
                project=config.logger.project,
                entity=config.logger.entity,
                group=config.logger.group,
                name=run_dir.name,
                dir=str(run_dir),
                config=dataclasses.asdict(config),
            )
        self._progress = None
        if config.logger.progress:
            self._progress = Progress(
                TextColumn("epoch"),
                MofNCompleteColumn(),
                BarColumn(bar_width=20),
                TextColumn("{task.fields[env_steps]:,} steps | return {task.fields[episode_return]}"),
                TextColumn("| {task.fields[steps_per_s]:,.0f} steps/s |"),
                TimeElapsedColumn(),
                TextColumn("| ETA"),
                TimeRemainingColumn(),
                expand=False,
            )
            self._task = self._progress.add_task(
                "train", total=config.algo.max_epochs, env_steps=0, episode_return="-", steps_per_s=0.0
            )
            self._progress.start()

    @property
    def wall_time(self) -> float:
        """Seconds since the tracker started (compilation included)."""
        return time.perf_counter() - self.start

    def log(self, epoch: int, env_steps: int, metrics: dict[str, float]) -> dict:
        """Records one epoch's metrics; returns the record written."""
        wall_time = self.wall_time
        record = {"epoch": epoch, "env_steps": env_steps, "wall_time_s": round(wall_time, 3)}
        record.update({name: _finite_or_none(float(value)) for name, value in metrics.items()})
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._wandb_run is not None:
            self._wandb_run.log({k: v for k, v in record.items() if v is not None}, step=epoch)
        if self._progress is not None:
            episode_return = record.get("train/episode_return")
            fields = {"env_steps": env_steps, "steps_per_s": env_steps / max(wall_time, 1e-9)}
            if episode_return is not None:
                fields["episode_return"] = f"{episode_return:.1f}"
            self._progress.update(self._task, completed=epoch, **fields)
        return record

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        self._file.close()
        if self._wandb_run is not None:
            self._wandb_run.finish()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
