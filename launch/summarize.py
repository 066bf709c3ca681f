"""Aggregate training runs: `python launch/summarize.py <dir> [group_by=smoothing.mode] [metric=eval/mean_return]`.

Groups the runs below <dir> by a config value (default: env.name) and writes
<dir>/summary.md (printed too) and <dir>/summary.png; see `shac.tools.summary`.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from launch import cli

USAGE = "usage: python launch/summarize.py <dir> [group_by=env.name] [metric=eval/mean_return]"


@dataclass
class SummarizeArgs:
    dir: str = MISSING
    """Directory whose runs (metrics.jsonl beside config.json, at any depth) are summarised; also positional."""
    group_by: str = "env.name"
    """Dotted config key whose value groups the runs; `run`: each folder directly below `dir` is a group."""
    metric: str = "eval/mean_return"
    """Logged metric in the table and the figure."""


if __name__ == "__main__":
    print(cli.main(SummarizeArgs, "shac.tools.summary:summarize", USAGE, positional="dir"))
