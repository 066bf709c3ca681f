"""Aggregate training runs: `python launch/summarize.py <dir> [group_by=smoothing.mode] [metric=eval/mean_return]`.

Finds every run (a metrics.jsonl beside a config.json) below <dir>, groups the
runs by a config value (default: env.name), and writes <dir>/summary.md (a
Markdown table: runs, env steps, wall-clock, final and best return, mean and
spread across runs) and <dir>/summary.png (the metric against env steps and
against wall-clock: mean across runs, shaded between min and max). The table is
printed too.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure


def load_runs(root: Path, group_by: str, metric: str) -> dict[str, list[dict]]:
    """Runs below `root` grouped by the dotted config key `group_by`.

    Each run is {"dir", "env_steps" [K], "wall_time_s" [K], "values" [K]} over
    the K logged records that have `metric`.
    """
    groups: dict[str, list[dict]] = defaultdict(list)
    for metrics_file in sorted(root.rglob("metrics.jsonl")):
        config_file = metrics_file.with_name("config.json")
        if not config_file.is_file():
            continue
        value = json.loads(config_file.read_text())
        for part in group_by.split("."):
            if not isinstance(value, dict) or part not in value:
                raise KeyError(f"config key '{group_by}' not found in {config_file}")
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
    """Markdown table of the final and best metric per group (mean ± std across runs)."""
    lines = [
        f"| {group_by} | runs | env steps | wall-clock (s) | final {metric} | best {metric} |",
        "|---|---|---|---|---|---|",
    ]
    for name, runs in groups.items():
        final = np.array([r["values"][-1] for r in runs])
        best = np.array([r["values"].max() for r in runs])
        steps = np.mean([r["env_steps"][-1] for r in runs])
        wall = np.mean([r["wall_time_s"][-1] for r in runs])
        lines.append(
            f"| {name} | {len(runs)} | {steps:,.0f} | {wall:,.0f} | {final.mean():.1f} ± {final.std():.1f} "
            f"| {best.mean():.1f} ± {best.std():.1f} |"
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


def main(argv: list[str]) -> None:
    positional = [a for a in argv if "=" not in a]
    options = dict(a.split("=", 1) for a in argv if "=" in a)
    unknown = set(options) - {"group_by", "metric"}
    if len(positional) != 1 or unknown:
        sys.exit("usage: python launch/summarize.py <dir> [group_by=env.name] [metric=eval/mean_return]")
    root = Path(positional[0])
    group_by, metric = options.get("group_by", "env.name"), options.get("metric", "eval/mean_return")
    try:
        groups = load_runs(root, group_by, metric)
    except KeyError as e:
        sys.exit(str(e))
    if not groups:
        sys.exit(f"no runs with '{metric}' below '{root}' (looked for metrics.jsonl beside config.json)")
    markdown = table(groups, group_by, metric)
    (root / "summary.md").write_text(markdown + "\n")
    plot(groups, metric, root / "summary.png")
    print(markdown)
    print(f"wrote {root / 'summary.md'} and {root / 'summary.png'}")


if __name__ == "__main__":
    main(sys.argv[1:])
