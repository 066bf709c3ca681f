"""Export a trained policy: `python launch/export.py run_dir=<dir> [checkpoint=<epoch>] [out_dir=<dir>]`.

Writes `policy.onnx`, `policy.jaxexport` and `policy.json` (see shac/run/export.py)
after checking that onnxruntime and the `jax.export` artifact reproduce the JAX
policy's actions, and adds them to the run's W&B run as the artifact
`policy-<id>` (unless the run's logger.mode is disabled). Prints policy.json's path.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from launch.runtime import configure_runtime

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


def main(argv: list[str]) -> None:
    try:
        args = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(ExportArgs), OmegaConf.from_dotlist(argv)))
    except OmegaConfBaseException as e:
        sys.exit(f"{USAGE}\nerror: {e}")

    configure_runtime()
    import jax

    try:
        from shac.run.export import ExportError, export_policy
    except ImportError as e:
        sys.exit(f"error: export needs its extra dependencies ({e}); pip install -e '.[export]'")
    from shac.config import ConfigError
    from shac.run.checkpoint import CheckpointError
    from shac.run.serialization import CONFIG_FILE, DamagedFileError, load_run_policy
    from shac.run.tracking import log_artifact

    run_dir = Path(args.run_dir)
    try:
        policy = load_run_policy(run_dir, args.checkpoint)
        paths = export_policy(policy, Path(args.out_dir) if args.out_dir else run_dir, jax.random.key(args.seed))
    except (FileNotFoundError, ConfigError, DamagedFileError, CheckpointError, ExportError) as e:
        sys.exit(f"error: {e}")
    log_artifact(policy.config, run_dir, "policy", "model", [*paths.values(), run_dir / CONFIG_FILE])
    print(paths["spec"])


if __name__ == "__main__":
    main(sys.argv[1:])
