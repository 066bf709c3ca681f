"""Export a trained policy: `python launch/export.py run_dir=<dir> [checkpoint=<epoch>] [out_dir=<dir>]`.

Writes `policy.onnx`, `policy.jaxexport` and `policy.json` (see shac/run/export.py)
after checking that onnxruntime and the `jax.export` artifact reproduce the JAX
policy's actions, and adds them to the run's W&B run as the artifact
`policy-<id>` (unless the run's logger.mode is disabled). Prints policy.json's path.
The work is `shac.run.commands.export_run`.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from launch import cli

USAGE = "usage: python launch/export.py run_dir=<dir> [checkpoint=<epoch>] [out_dir=<run_dir>] [seed=0]"


@dataclass
class ExportArgs:
    run_dir: str = MISSING
    """Run directory written by launch/train.py."""
    checkpoint: int | None = None
    """Epoch of the checkpoint to export; None: policy.msgpack, else the newest checkpoint."""
    out_dir: str | None = None
    """Where the files go; None: the run directory."""
    seed: int = 0
    """Seed of the observations the export is checked on."""


if __name__ == "__main__":
    errors = ["builtins:ImportError", "shac.run.checkpoint:CheckpointError", "shac.run.export:ExportError"]
    print(cli.main(ExportArgs, "shac.run.commands:export_run", USAGE, errors=errors))
