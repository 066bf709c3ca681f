"""The real system's stand-in: a YAML file of the physical parameters the simulated robot really has.

    # configs/real/cartpole_swingup.yaml
    body:pole:mass: 0.75
    joint:hinge:frictionloss: 0.05

Keys are `element:name:attribute`, the names system identification and domain
randomisation use (`envs.physics.parameters`); values are in the compiled model's
units. `launch/evaluate.py real=<file>` evaluates a run on its environment with these
values written into the compiled model (`real_env`), `launch/record_trajectory.py
real=<file>` records from it, and `launch/transfer.py` does both; training never reads
it. A file that cannot describe the model fails in one line before anything compiles:
its form first (`load_real`, no model needed), then its keys and values against the
model (`check_real`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import mujoco
import yaml

from envs import MjxEnv
from envs.physics.parameters import ModelParameter
from shac.config import RandomizationConfig, TrainConfig, make_env


def load_real(path: str) -> dict[str, float]:
    """The values of the real file at `path`, key -> value, checked for form only.

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: not YAML, not a non-empty mapping of `element:name:attribute` keys
            to finite numbers; the message names the file and the bad entry.
    """
    if not Path(path).is_file():
        raise FileNotFoundError(f"no real file at '{path}'")
    try:
        loaded = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"real file '{path}' is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(loaded, dict) or not loaded:
        raise ValueError(
            f"real file '{path}' must map element:name:attribute to values, e.g. 'body:pole:mass: 0.75'; "
            f"got {type(loaded).__name__ if loaded else 'nothing'}"
        )
    values = {}
    for key, value in loaded.items():
        if not isinstance(key, str) or len(key.split(":")) != 3:
            raise ValueError(f"real file '{path}': key {key!r} is not element:name:attribute, e.g. body:pole:mass")
        values[key] = _number(path, key, value)
    return values


def _number(path: str, key: str, value: object) -> float:
    """`value` as a finite float (YAML reads `1e-3` without a dot as a string); else ValueError naming it."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(f"real file '{path}': '{key}' is {value!r}, not a finite number")
    return number


def check_real(values: Mapping[str, float], model: mujoco.MjModel, source: str) -> None:
    """Fails unless every key names a parameter of `model` and every value is physically valid for it.

    Raises:
        ValueError: one line naming `source`, the key and what is accepted: an unsupported
            attribute, a name the model lacks, or an impossible value such as a negative mass
            or damping (`ModelParameter.parse`, `ModelParameter.check_value`).
    """
    for key, value in values.items():
        try:
            ModelParameter.parse(key, model).check_value(value, model)
        except ValueError as e:
            raise ValueError(f"real file '{source}': {e}") from None


def real_randomization(values: Mapping[str, float]) -> RandomizationConfig:
    """The randomisation that always samples `values`: uniform ranges of zero width.

    Every episode's model then has exactly these values, written as system identification
    writes them (`ModelParameter.write`: a mass scales the body's inertia with it).
    """
    return RandomizationConfig(mode="uniform", ranges={key: [value, value] for key, value in values.items()})


def real_env(
    config: TrainConfig,
    values: Mapping[str, float],
    model: mujoco.MjModel,
    source: str,
    episode_length: int | None = None,
) -> MjxEnv:
    """`config`'s environment (its options and contact smoothing) with `values` in every episode's model.

    The run's own randomisation is left out: the real system is one model.

    Args:
        config: the run's config.
        values: the real file's values (`load_real`).
        model: the run's compiled nominal model, against which `values` are checked.
        source: the real file's path, for the messages.
        episode_length: steps per episode; None: those of the run's evaluations (`TrainConfig.evaluation_env`).

    Raises:
        ValueError: a key or value that does not fit `model` (`check_real`).
    """
    check_real(values, model, source)
    return make_env(config.evaluation_env(episode_length), real_randomization(values), config.smoothing)
