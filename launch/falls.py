"""What preceded each fall: `python launch/falls.py run_dir=<dir> [episodes=64] [before=30] [body=torso]`.

Runs the run's deterministic policy for full episodes (from the initial states `launch/evaluate.py`
draws with the same seed) and prints one JSON line: the falls, the step of each, and the root body's
height, uprightness, forward speed, contact and the actions' saturation, averaged over the `before`
steps up to each fall, at the falling step, and over the episodes that did not fall; and, under
"evaluation", these episodes' returns and terminations as `launch/evaluate.py` prints them. With
perturb=<p> (say 1e-6) the episodes run again with every initial velocity moved by at most p, and
"perturbed" counts the episodes that then ended otherwise (a fall that chaos, not the initial state,
decides). The work is `shac.tools.falls.fall_report_of_run`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from omegaconf import MISSING

from launch import cli

USAGE = (
    "usage: python launch/falls.py run_dir=<dir> [checkpoint=<epoch>] [episodes=64] [before=30] [seed=0] [body=<name>]"
    " [perturb=0]"
)


@dataclass
class FallsArgs:
    run_dir: str = MISSING
    """Run directory written by launch/train.py."""
    checkpoint: int | None = None
    """Epoch of the checkpoint; None: policy.msgpack, else the newest checkpoint."""
    episodes: int = 64
    """Episodes to run (in parallel)."""
    before: int = 30
    """Steps before each fall to average over."""
    seed: int = 0
    """Seed of the initial-state noise."""
    body: str | None = None
    """Body whose height, uprightness and speed are recorded; None: the model's first body."""
    perturb: float = 0.0
    """Largest initial velocity perturbation of a second pass over the same episodes; 0: no second pass."""


if __name__ == "__main__":
    report = cli.main(
        FallsArgs, "shac.tools.falls:fall_report_of_run", USAGE, errors=["shac.run.checkpoint:CheckpointError"]
    )
    print(json.dumps(report))
