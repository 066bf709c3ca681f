"""Run tracking: metrics.jsonl in the run directory, Weights & Biases, and progress (a live bar on a
terminal, plain lines otherwise)."""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import json
import math
import statistics
import sys
import time
import uuid
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from shac.config import TrainConfig

METRICS_FILE = "metrics.jsonl"
WANDB_ID_FILE = "wandb_run_id"
"""Holds the W&B run id, so a resumed run (and its export) logs into the same W&B run."""


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _wandb_run(config: TrainConfig, run_dir: Path):
    """Starts (or resumes) the W&B run of `run_dir`; None when `logger.mode` is disabled."""
    if config.logger.mode == "disabled":
        return None
    import wandb

    id_file = run_dir / WANDB_ID_FILE
    if not id_file.is_file():
        id_file.write_text(uuid.uuid4().hex[:16] + "\n")
    return wandb.init(
        mode=config.logger.mode,
        project=config.logger.project,
        entity=config.logger.entity,
        group=config.logger.group,
        name=run_dir.name,
        dir=str(run_dir),
        config=dataclasses.asdict(config),
        id=id_file.read_text().strip(),
        resume="allow",
    )


def _log_artifact(wandb_run, name: str, kind: str, paths: Sequence[Path]) -> None:
    import wandb

    artifact = wandb.Artifact(name=f"{name}-{wandb_run.id}", type=kind)
    for path in paths:
        if path.is_dir():
            artifact.add_dir(str(path), name=path.name)
        else:
            artifact.add_file(str(path))
    wandb_run.log_artifact(artifact)


def log_artifact(config: TrainConfig, run_dir: Path, name: str, kind: str, paths: Sequence[Path]) -> None:
    """Adds files and directories to the W&B run of `run_dir` as the artifact `<name>-<run id>` (no-op if disabled)."""
    wandb_run = _wandb_run(config, run_dir)
    if wandb_run is not None:
        _log_artifact(wandb_run, name, kind, paths)
        wandb_run.finish()


RATE_WINDOW = 20
"""Epochs whose wall times give the progress's steps/s and ETA."""


def _duration(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds)))


class Pace:
    """Steps/s and seconds per epoch: medians over the last `window` epochs of this launch.

    An epoch's wall time runs from the end of the epoch before it to its own end
    (`add`), evaluations, videos and checkpoints in between included; the median
    keeps a one-off stall (an evaluation compiling) from swinging the estimates.
    The first epoch `add`ed has no epoch before it, so its wall time, which
    includes XLA compilation, never counts.
    """

    def __init__(self, window: int = RATE_WINDOW):
        self._ends: deque[tuple[int, int, float]] = deque(maxlen=window + 1)

    def add(self, epoch: int, env_steps: int, time_s: float) -> None:
        """Notes the end of `epoch`: the total env steps and the clock (seconds) then."""
        self._ends.append((epoch, env_steps, time_s))

    def _spans(self) -> list[tuple[int, int, float]]:
        """(epochs, env steps, seconds) between consecutive ends."""
        return [(e1 - e0, s1 - s0, t1 - t0) for (e0, s0, t0), (e1, s1, t1) in itertools.pairwise(self._ends)]

    def steps_per_s(self) -> float | None:
        """The median env steps per second; None before two epochs have ended."""
        spans = self._spans()
        return statistics.median(steps / max(seconds, 1e-9) for _, steps, seconds in spans) if spans else None

    def seconds_per_epoch(self) -> float | None:
        """The median wall time of an epoch; None before two epochs have ended."""
        spans = self._spans()
        return statistics.median(seconds / epochs for epochs, _, seconds in spans) if spans else None


class RecentReturns:
    """The mean return of the latest finished training episodes: those that ended in the most recent
    epochs, going back until there are at least `min_episodes` (or as far as this launch goes)."""

    def __init__(self, min_episodes: int):
        self._min_episodes = min_episodes
        self._epochs: deque[tuple[int, float]] = deque()  # (episodes, their mean return) of each epoch kept
        self._episodes = 0

    def add(self, episodes: float, mean_return: float) -> None:
        """Adds an epoch's `train/episodes` and `train/episode_return` (nothing when no episode ended)."""
        count = round(episodes)
        if count == 0:
            return
        self._epochs.append((count, mean_return))
        self._episodes += count
        while self._episodes - self._epochs[0][0] >= self._min_episodes:
            self._episodes -= self._epochs.popleft()[0]

    def mean(self) -> tuple[float, int] | None:
        """(the mean return, how many episodes), or None before any episode has ended."""
        if not self._episodes:
            return None
        return sum(count * mean for count, mean in self._epochs) / self._episodes, self._episodes


def _return_text(recent: tuple[float, int] | None) -> str:
    return "-" if recent is None else f"{recent[0]:.1f} ({recent[1]:,} ep)"


def _rate_text(steps_per_s: float | None) -> str:
    return "-" if steps_per_s is None else f"{steps_per_s:,.0f}"


def _steps_text(env_steps: int, max_env_steps: int | None) -> str:
    return f"{env_steps:,}" if max_env_steps is None else f"{env_steps:,}/{max_env_steps:,}"


def _eta_text(eta_s: float | None) -> str:
    return "-" if eta_s is None else _duration(eta_s)


def progress_line(
    epoch: int,
    total: int,
    env_steps: int,
    recent_return: tuple[float, int] | None,
    steps_per_s: float | None,
    elapsed_s: float,
    eta_s: float | None,
    max_env_steps: int | None = None,
) -> str:
    """One complete plain progress line, e.g. `epoch 50/500 | 1,024,000 steps | return -450.2 (64 ep) |
    11,647 steps/s | elapsed 0:01:28 | ETA 0:13:12`.

    Args:
        recent_return: `RecentReturns.mean()`; None (before an episode has ended) shows `-`.
        steps_per_s: `Pace.steps_per_s()`; None shows `-`.
        elapsed_s: the run's wall time, compilation included.
        eta_s: the time left; None shows `-`.
        max_env_steps: `algo.max_env_steps`, shown after the steps (`1,024,000/4,096,000 steps`); None
            shows the steps alone.
    """
    return (
        f"epoch {epoch}/{total} | {_steps_text(env_steps, max_env_steps)} steps | "
        f"return {_return_text(recent_return)} | {_rate_text(steps_per_s)} steps/s | "
        f"elapsed {_duration(elapsed_s)} | ETA {_eta_text(eta_s)}"
    )


def read_records(run_dir: Path) -> list[dict]:
    """The records of `metrics.jsonl` (a line cut short by a killed run is skipped)."""
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class Tracker:
    """Writes each logged epoch to `metrics.jsonl` (always) and to W&B (unless disabled).

    Non-finite values are written as JSON null. With `logger.progress`, shows a
    live bar when stdout is a terminal and otherwise prints one complete line
    (`progress_line`) at the first logged epoch of every `logger.progress_every`
    and at the last; `compiled` adds a line of its own. Call `epoch_done` after
    every epoch: the progress's steps/s and ETA come from `Pace`, its return
    from `RecentReturns`. Use as a context manager.

    Args:
        config: the run's config (sent to W&B, shapes the progress bar).
        run_dir: where metrics.jsonl (and W&B's offline files) go.
        start_epoch: epochs already done. `metrics.jsonl` keeps its records up to
            this epoch (those a resumed run will not repeat) and drops the rest;
            wall time continues from the last one kept.
        write: False for the processes other than 0 of a multi-process run: they
            keep `last_record` but write, send and show nothing.
    """

    def __init__(self, config: TrainConfig, run_dir: Path, start_epoch: int = 0, write: bool = True):
        self.config = config
        self.run_dir = run_dir
        kept = [r for r in read_records(run_dir) if r.get("epoch", math.inf) <= start_epoch]
        self.last_record: dict = kept[-1] if kept else {}
        self.start = time.perf_counter() - self.last_record.get("wall_time_s", 0.0)
        self._file = self._wandb_run = self._progress = None
        self._printed_epoch = start_epoch
        self._pace, self._returns = Pace(), RecentReturns(config.algo.num_envs)
        self._budget_left_s: float | None = None
        self._env_steps = 0
        self._lines = write and config.logger.progress and not sys.stdout.isatty()
        if not write:
            return
        path = run_dir / METRICS_FILE
        partial = path.with_suffix(".jsonl.tmp")
        partial.write_text("".join(json.dumps(record) + "\n" for record in kept))
        partial.replace(path)  # atomic: a run killed here still has every record it kept
        self._file = open(path, "a")  # noqa: SIM115 (closed in close())
        self._wandb_run = _wandb_run(config, run_dir)
        if config.logger.progress and not self._lines:
            self._progress = Progress(
                TextColumn("epoch"),
                MofNCompleteColumn(),
                BarColumn(bar_width=20),
                TextColumn("{task.fields[env_steps]} steps | return {task.fields[episode_return]}"),
                TextColumn("| {task.fields[steps_per_s]} steps/s |"),
                TimeElapsedColumn(),
                TextColumn("| ETA {task.fields[eta]}"),
                TextColumn("[bold red]{task.fields[warning]}"),
                expand=False,
            )
            self._task = self._progress.add_task(
                "train",
                total=config.algo.max_epochs,
                completed=start_epoch,
                env_steps=_steps_text(self.last_record.get("env_steps", 0), config.algo.max_env_steps),
                episode_return="-",
                steps_per_s="-",
                eta="-",
                warning="",
            )
            self._progress.start()

    @property
    def wall_time(self) -> float:
        """Seconds since the tracker started (compilation included)."""
        return time.perf_counter() - self.start

    def compiled(self, seconds: float) -> None:
        """Shows `compiled in 41 s` as a line of its own (with `logger.progress`).

        Args:
            seconds: the wall time of this launch's first epoch: its XLA
                compilation (or loading from the compile cache) and its run.
        """
        line = f"compiled in {seconds:,.0f} s"
        if self._progress is not None:
            self._progress.console.print(line)
        elif self._lines:
            print(line, flush=True)

    def epoch_done(
        self, epoch: int, env_steps: int, metrics: dict[str, float], budget_left_s: float | None = None
    ) -> None:
        """Notes that `epoch` has ended, at `env_steps` in all, with its metrics as numbers (before `log`),
        and the training seconds left of `algo.budget_minutes` (None without a budget), which cap the ETA
        (as the steps left of `algo.max_env_steps` do)."""
        self._pace.add(epoch, env_steps, time.perf_counter())
        self._env_steps = env_steps
        self._returns.add(float(metrics["train/episodes"]), float(metrics["train/episode_return"]))
        self._budget_left_s = budget_left_s

    def _eta(self, epoch: int) -> float | None:
        per_epoch = self._pace.seconds_per_epoch()
        if per_epoch is None:
            return None
        eta = per_epoch * max(self.config.algo.max_epochs - epoch, 0)
        max_env_steps, steps_per_s = self.config.algo.max_env_steps, self._pace.steps_per_s()
        if max_env_steps is not None and steps_per_s:
            eta = min(eta, max(max_env_steps - self._env_steps, 0) / steps_per_s)
        return eta if self._budget_left_s is None else min(eta, self._budget_left_s)

    def log(self, epoch: int, env_steps: int, metrics: dict[str, float]) -> dict:
        """Records one epoch's metrics; returns the record written."""
        wall_time = self.wall_time
        record = {"epoch": epoch, "env_steps": env_steps, "wall_time_s": round(wall_time, 3)}
        record.update({name: _finite_or_none(float(value)) for name, value in metrics.items()})
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
        if self._wandb_run is not None:
            self._wandb_run.log({k: v for k, v in record.items() if v is not None}, step=epoch)
        if self._progress is not None:
            self._progress.update(
                self._task,
                completed=epoch,
                env_steps=_steps_text(env_steps, self.config.algo.max_env_steps),
                episode_return=_return_text(self._returns.mean()),
                steps_per_s=_rate_text(self._pace.steps_per_s()),
                eta=_eta_text(self._eta(epoch)),
            )
        total = self.config.algo.max_epochs
        if self._lines and (epoch - self._printed_epoch >= self.config.logger.progress_every or epoch >= total):
            recent, rate = self._returns.mean(), self._pace.steps_per_s()
            eta, max_env_steps = self._eta(epoch), self.config.algo.max_env_steps
            print(progress_line(epoch, total, env_steps, recent, rate, wall_time, eta, max_env_steps), flush=True)
            self._printed_epoch = epoch
        self.last_record = record
        return record

    def warn(self, text: str) -> None:
        """Shows `text` in red at the end of the progress bar ("" clears it); off a terminal, prints
        it as a line of its own."""
        if self._progress is not None:
            self._progress.update(self._task, warning=text and f"| {text}")
        elif self._lines and text:
            print(f"warning: {text}", flush=True)

    def log_video(self, epoch: int, path: Path) -> None:
        """Sends an mp4 to W&B as `eval/video` at `epoch` (the file itself stays in the run directory)."""
        if self._wandb_run is not None:
            import wandb

            self._wandb_run.log({"eval/video": wandb.Video(str(path), format="mp4")}, step=epoch)

    def log_artifact(self, name: str, kind: str, paths: Sequence[Path]) -> None:
        """Adds files and directories to W&B as the artifact `<name>-<run id>` of type `kind`."""
        if self._wandb_run is not None:
            _log_artifact(self._wandb_run, name, kind, paths)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        if self._file is not None:
            self._file.close()
        if self._wandb_run is not None:
            self._wandb_run.finish()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
