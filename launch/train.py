"""Train SHAC: `python launch/train.py env=cartpole_swingup algo.horizon=16 seed=3`.

Hydra composes configs/config.yaml; the run directory is Hydra's output dir.
Add `-m` for a sweep, e.g. `-m seed=0,1,2`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from launch.runtime import configure_runtime
from shac.config import ConfigError, register_configs, to_train_config

register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        config = to_train_config(cfg)
    except ConfigError as e:
        sys.exit(f"config error: {e}")
    configure_runtime(config.precision)
    from shac.train import train

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    _, record = train(config, run_dir)
    print(f"run directory: {run_dir}")
    summary = {k: v for k, v in record.items() if k.startswith("eval/") or k in ("epoch", "env_steps", "wall_time_s")}
    print(summary)


if __name__ == "__main__":
    main()
