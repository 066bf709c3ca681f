"""Benchmarks against the peers: `python launch/benchmark.py suite=learning env=ant budget_minutes=6 seeds=1`.

suite=learning trains SHAC, brax APG and brax PPO on `env` with the same
training wall-clock budget each (compile and evaluation time excluded) and
the same deterministic evaluation; suite=throughput times SHAC's epoch
against its forward rollout and brax APG's update over an (N, h) grid
(`preset=gpu` for an accelerator). Writes results.json and PNG plots into the
run directory and, unless docs= is empty, copies them to
docs/benchmarks/<section>/ and replaces the generated section of
docs/benchmarks.md. The work is `shac.tools.benchmarks.suites.run`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from launch.runtime import configure_runtime, headless_rendering

ROOT = Path(__file__).resolve().parents[1]


@hydra.main(version_base=None, config_path="../configs", config_name="benchmark")
def main(cfg: DictConfig) -> None:
    load_average = os.getloadavg()
    from shac.config import ConfigError
    from shac.run.hydra_config import to_config
    from shac.tools.benchmarks.config import BenchmarkConfig, validate_benchmark

    try:
        config = to_config(cfg, BenchmarkConfig)
        validate_benchmark(config)
    except ConfigError as e:
        sys.exit(f"config error: {e}")
    configure_runtime(precision=config.precision)
    from shac.tools.benchmarks import suites

    command = "python launch/benchmark.py " + " ".join(sys.argv[1:])
    print(suites.run(config, Path(HydraConfig.get().runtime.output_dir), ROOT, command, load_average))


if __name__ == "__main__":
    headless_rendering()  # before anything imports mujoco
    from shac.run.hydra_config import register_configs
    from shac.tools.benchmarks.config import register_benchmark_config

    register_configs()
    register_benchmark_config()
    main()
