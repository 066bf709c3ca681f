"""Train SHAC: `python launch/train.py env=cartpole_swingup algo.horizon=16 seed=3`.

Hydra composes configs/config.yaml; the run directory is Hydra's output dir.
Add `-m` for a sweep, e.g. `-m seed=0,1,2 algo.horizon=16,32`: each run goes to
`runs/multirun/<time>/<job number>_<overrides>/`, and the runs of a sweep share
the W&B group `<time>` unless `logger.group` is set. `hydra/launcher=slurm`
submits the sweep's runs as a SLURM job array (configs/hydra/launcher/slurm.yaml).

At the end, process 0 prints `run directory: <dir>` and, as its last line, one
JSON object: the last logged `epoch`, `env_steps`, `wall_time_s` and `eval/*`
(null for a non-finite value).

The environments are split over all local devices. `distributed.enabled=true`
joins a multi-process run (see `shac.config.DistributedConfig`); every process
runs the same command.

`python launch/train.py resume=<run_dir>` continues a run from its newest good
checkpoint, in its directory and with its `config.json`; `key=value` overrides
change that config (e.g. `algo.max_epochs=1000`) as long as the shapes of the
training state stay the same. SIGINT (Ctrl-C) or SIGTERM stops a run after the
current epoch with a checkpoint, exiting with 128 + the signal number; a second
one stops it at once. Errors are one line and a non-zero exit: bad keys and
run directories before Hydra creates anything (`launch/preflight.py`), a run
whose epochs keep going bad (`train.max_bad_epochs`) once it has checkpointed
its last good state.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import hydra
import jax
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from launch.runtime import (
    configure_compile_cache,
    configure_precision,
    headless_rendering,
    initialize_distributed,
    shared_run_dir,
)

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def when_resuming(resume: str | None, resuming: str, fresh: str) -> str:
    """Hydra resolver: `resuming` when `resume` is set, else `fresh` (run and .hydra directories)."""
    return fresh if resume is None else resuming


@hydra.main(version_base=None, config_path="../configs", config_name="config")
def main(cfg: DictConfig) -> None:
    from shac.config import ConfigError, LaunchOptions, to_train_config
    from shac.run.checkpoint import CheckpointError
    from shac.run.hydra_config import apply_overrides, split_launch_config
    from shac.run.serialization import load_config

    hydra_config = HydraConfig.get()
    try:
        values, options = split_launch_config(cfg)
    except ConfigError as e:
        sys.exit(f"config error: {e}")
    try:
        initialize_distributed(options.distributed)  # before anything runs on a device
    except RuntimeError as e:
        sys.exit(f"error: {e}")
    resume = options.resume is not None
    run_dir = shared_run_dir(Path(options.resume) if resume else Path(hydra_config.runtime.output_dir))
    if hydra_config.mode == RunMode.MULTIRUN and values["logger"]["group"] is None:
        values["logger"]["group"] = Path(hydra_config.sweep.dir).name
    try:
        if resume:
            options_keys = {f.name for f in dataclasses.fields(LaunchOptions)}
            overrides = [o for o in hydra_config.overrides.task if o.split("=")[0].split(".")[0] not in options_keys]
            config = apply_overrides(load_config(run_dir), overrides)
        else:
            config = to_train_config(values)
    except ConfigError as e:
        sys.exit(f"config error: {e}")
    except FileNotFoundError as e:
        sys.exit(f"error: cannot resume: {e}")
    configure_compile_cache(options.compile_cache)
    configure_precision(config.precision)
    from shac.run.run_dir import RunDirectoryInUseError
    from shac.run.train import TrainingDiverged, TrainingInterrupted, train

    try:
        _, record = train(config, run_dir, resume=resume)
    except ConfigError as e:
        sys.exit(f"config error: {e}")
    except (CheckpointError, FileExistsError, RunDirectoryInUseError, TrainingDiverged) as e:
        sys.exit(f"error: {e}")
    except TrainingInterrupted as e:
        print(e, file=sys.stderr)
        sys.exit(128 + e.signal_number)
    if jax.process_index() != 0:
        return
    print(f"run directory: {run_dir}")
    summary = {k: v for k, v in record.items() if k.startswith("eval/") or k in ("epoch", "env_steps", "wall_time_s")}
    print(json.dumps(summary))


if __name__ == "__main__":
    headless_rendering()  # before anything imports mujoco
    from launch.preflight import PreflightError, preflight
    from shac.config import ConfigError
    from shac.run.hydra_config import register_configs, with_implied_env_config, with_sweep_dir_names
    from shac.run.run_dir import RunDirectoryInUseError

    sys.argv[1:] = with_sweep_dir_names(with_implied_env_config(sys.argv[1:], CONFIG_DIR))
    try:
        preflight(sys.argv[1:], CONFIG_DIR)
    except ConfigError as e:
        sys.exit(f"config error: {e}")
    except (PreflightError, RunDirectoryInUseError, FileExistsError) as e:
        sys.exit(f"error: {e}")
    register_configs()
    OmegaConf.register_new_resolver("when_resuming", when_resuming)
    main()
