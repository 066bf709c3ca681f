"""Aggregate training runs: the runs below a directory grouped by a config value, a table and a figure.

`launch/summarize.py <dir> [group_by=...] [metric=...]` calls `summarize`: it finds
every run (a metrics.jsonl beside a config.json) below the directory, groups the runs
by a config value, and writes `summary.md` (a Markdown table: runs, env steps,
wall-clock, final and best return, mean and spread across runs) and `summary.png`
(the metric against env steps and against wall-clock: mean across runs, shaded
between min and max).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure


def load_runs(root: Path, group_by: str, metric: str) -> dict[str, list[dict]]:
    """Runs below `root` grouped by the dotted config key `group_by` (`run`: by the run's folder
    directly below `root`, so each folder is a row, however its configs differ).

    Each run is {"dir", "env_steps" [K], "wall_time_s" [K], "values" [K]} over
    the K logged records that have `metric`.

    Raises:
        ValueError: a run's config has no key `group_by`.
    """
    groups: dict[str, list[dict]] = defaultdict(list)
    for metrics_file in sorted(root.rglob("metrics.jsonl")):
        config_file = metrics_file.with_name("config.json")
        if not config_file.is_file():
            continue
        value = json.loads(config_file.read_text())
        if group_by == "run":
            value = (metrics_file.parent.relative_to(root).parts or (".",))[0]
        for part in group_by.split(".") if group_by != "run" else ():
            if not isinstance(value, dict) or part not in value:
                raise ValueError(f"config key '{group_by}' not found in {config_file}")
            value = value[part]
        records = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
        records = [r for r in records if r.get(metric) is not None]
        if records:
            groups[str(value)].append(
                {
                    "dir": str(metrics_file.parent),
                    "env_steps": np.array([r["env_steps"] for r in records], float),
                    "wall_time_s": np.array([r["wall_time_s"] for r in records], float),
                    "values": np.array([r[metric] for r in records], float),
                }
            )
    return dict(groups)


def table(groups: dict[str, list[dict]], group_by: str, metric: str) -> str:
    """Markdown table of the final, best (largest) and median logged metric per group (mean ± std across runs)."""
    lines = [
        f"| {group_by} | runs | env steps | wall-clock (s) | final {metric} | best {metric} | median {metric} |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, runs in groups.items():
        final = np.array([r["values"][-1] for r in runs])
        best = np.array([r["values"].max() for r in runs])
        median = np.array([np.median(r["values"]) for r in runs])
        steps = np.mean([r["env_steps"][-1] for r in runs])
        wall = np.mean([r["wall_time_s"][-1] for r in runs])
        lines.append(
            f"| {name} | {len(runs)} | {steps:,.0f} | {wall:,.0f} | {final.mean():.1f} ± {final.std():.1f} "
            f"| {best.mean():.1f} ± {best.std():.1f} | {median.mean():.2f} ± {median.std():.2f} |"
        )
    return "\n".join(lines)


def plot(groups: dict[str, list[dict]], metric: str, path: Path) -> None:
    """The metric against env steps and wall-clock, mean across runs with a min-max band."""
    figure = Figure(figsize=(11, 4), layout="constrained")
    axes = figure.subplots(1, 2)
    for name, runs in groups.items():
        length = min(len(r["values"]) for r in runs)
        values = np.stack([r["values"][:length] for r in runs])
        for ax, x_key in zip(axes, ("env_steps", "wall_time_s"), strict=True):
            x = np.mean([r[x_key][:length] for r in runs], axis=0)
            ax.plot(x, values.mean(0), label=f"{name} ({len(runs)} runs)")
            ax.fill_between(x, values.min(0), values.max(0), alpha=0.2)
    for ax, label in zip(axes, ("env steps", "wall-clock (s)"), strict=True):
        ax.set_xlabel(label)
        ax.set_ylabel(metric)
        ax.legend()
    figure.savefig(path, dpi=100)


def summarize(dir: str, group_by: str = "env.name", metric: str = "eval/mean_return") -> str:
    """Writes `<dir>/summary.md` and `<dir>/summary.png` for the runs below `dir`; returns the table.

    For another metric than `eval/mean_return` the files are `summary_<metric>.md` and `.png`
    (`/` in the metric's name written `_`), so summaries of several metrics sit side by side.

    Raises:
        ValueError: no run below `dir` logged `metric`, or a run's config has no key `group_by`.
    """
    root = Path(dir)
    groups = load_runs(root, group_by, metric)
    if not groups:
        raise ValueError(f"no runs with '{metric}' below '{root}' (looked for metrics.jsonl beside config.json)")
    markdown = table(groups, group_by, metric)
    stem = "summary" if metric == "eval/mean_return" else f"summary_{metric.replace('/', '_')}"
    (root / f"{stem}.md").write_text(markdown + "\n")
    plot(groups, metric, root / f"{stem}.png")
    return f"{markdown}\nwrote {root / f'{stem}.md'} and {root / f'{stem}.png'}"
