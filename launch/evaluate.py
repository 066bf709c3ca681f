"""Evaluate a trained policy: `python launch/evaluate.py run_dir=<dir> [checkpoint=<epoch>] episodes=16 video=true`.

Runs the deterministic policy (mean action) for full episodes on the run's
environment and prints one JSON line: {"mean_return", "std_return", "episodes", "mean_length", "terminated",
"exploded"} (and "video", the mp4's path, with video=true). The policy is the run's
checkpoint `checkpoint` if given, else its final `policy.msgpack`, else its
newest checkpoint (a run still training or interrupted). With physical=true
the episodes run under the physical contact model (smoothing none), for a run
trained with softened contacts. With real=<file> (a YAML file of
`element:name:attribute: value`, shac/run/real.py) the episodes run on the run's
model with those values written in, without the run's randomisation: a stand-in
for the real robot. With nominal=true they run on the run's nominal model, without its
randomisation. With episode_length=<steps> the episodes last that many
steps instead of those of the run's own evaluations (`eval.episode_length`, else
`env.episode_length`). The work is `shac.run.commands.evaluate_run`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from omegaconf import MISSING

from launch import cli

USAGE = (
    "usage: python launch/evaluate.py run_dir=<dir> [checkpoint=<epoch>] [episodes=16] [seed=0] [video=false]"
    " [physical=false] [real=<file.yaml> | nominal=true] [episode_length=<steps>]"
)


@dataclass
class EvaluateArgs:
    run_dir: str = MISSING
    """Run directory written by launch/train.py."""
    checkpoint: int | None = None
    """Epoch of the checkpoint to evaluate; None: policy.msgpack, else the newest checkpoint."""
    episodes: int = 16
    """Episodes to run (in parallel)."""
    seed: int = 0
    """Seed of the initial-state noise."""
    video: bool = False
    """Also render the first episode's initial state, under the same policy, to an mp4."""
    video_path: str | None = None
    """Where the mp4 goes; None: <run_dir>/videos/evaluate_<checkpoint or final>_seed<seed>.mp4."""
    physical: bool = False
    """Simulate the physical contact model (smoothing none), not the softened one the run trained with."""
    real: str | None = None
    """A real file (element:name:attribute: value per line, shac/run/real.py): evaluate on the model with these
    values, not on the run's own (nominal or randomised) model."""
    episode_length: int | None = None
    """Steps per episode; None: those of the run's own evaluations."""
    nominal: bool = False
    """Evaluate on the run's nominal model, without its randomisation (not with `real`)."""


if __name__ == "__main__":
    summary = cli.main(
        EvaluateArgs, "shac.run.commands:evaluate_run", USAGE, errors=["shac.run.checkpoint:CheckpointError"]
    )
    print(json.dumps(summary))
