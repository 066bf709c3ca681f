"""The trained policy on disk: parameters as msgpack (not pickle) and the config as JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from flax import serialization

from shac.config import TrainConfig, to_train_config
from shac.normalizer import RunningStatistics

CONFIG_FILE = "config.json"
POLICY_FILE = "policy.msgpack"


def save_config(run_dir: Path, config: TrainConfig) -> None:
    """Writes the resolved config as `config.json`."""
    (run_dir / CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")


def load_config(run_dir: Path) -> TrainConfig:
    """Reads and validates `config.json` of a run directory."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {CONFIG_FILE} in run directory '{run_dir}'")
    return to_train_config(json.loads(path.read_text()))


def save_policy(run_dir: Path, actor_params: dict, normalizer: RunningStatistics) -> Path:
    """Writes actor parameters and observation statistics as `policy.msgpack`."""
    path = run_dir / POLICY_FILE
    path.write_bytes(serialization.to_bytes({"actor_params": actor_params, "normalizer": normalizer}))
    return path


def load_policy(run_dir: Path, template_params: dict, template_normalizer: RunningStatistics):
    """Reads `policy.msgpack` into the structure of the templates.

    Returns:
        (actor_params, normalizer).
    """
    path = run_dir / POLICY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {POLICY_FILE} in run directory '{run_dir}' (did training finish?)")
    target = {"actor_params": template_params, "normalizer": template_normalizer}
    restored = serialization.from_bytes(target, path.read_bytes())
    return restored["actor_params"], restored["normalizer"]
