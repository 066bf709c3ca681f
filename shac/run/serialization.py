"""The trained policy on disk: parameters as msgpack (not pickle) and the config as JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import numpy as np
from flax import serialization

from envs import MjxEnv
from envs.physics.smoothing import Smoothing
from shac.config import ConfigError, TrainConfig, make_env, to_train_config
from shac.core.algorithms import make_algorithm
from shac.core.networks import Actor
from shac.core.normalizer import RunningStatistics
from shac.run.checkpoint import Checkpointer

CONFIG_FILE = "config.json"
POLICY_FILE = "policy.msgpack"


def save_config(run_dir: Path, config: TrainConfig) -> None:
    """Writes the resolved config as `config.json`."""
    (run_dir / CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")


class DamagedFileError(ValueError):
    """A run's file exists but cannot be read as what it should hold; the message names it."""


def load_config(run_dir: Path) -> TrainConfig:
    """Reads and validates `config.json` of a run directory.

    Raises:
        FileNotFoundError: there is none.
        ConfigError: it is not a JSON object, or holds a bad value.
    """
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {CONFIG_FILE} in run directory '{run_dir}'")
    try:
        values = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"'{path}' is damaged: not valid JSON ({e})") from None
    if not isinstance(values, dict):
        raise ConfigError(f"'{path}' is damaged: a JSON {type(values).__name__}, not an object")
    return to_train_config(values)


def save_policy(run_dir: Path, actor_params: dict, normalizer: RunningStatistics) -> Path:
    """Writes actor parameters and observation statistics as `policy.msgpack`."""
    path = run_dir / POLICY_FILE
    path.write_bytes(serialization.to_bytes({"actor_params": actor_params, "normalizer": normalizer}))
    return path


def load_policy(run_dir: Path, template_params: dict, template_normalizer: RunningStatistics):
    """Reads `policy.msgpack` into the structure of the templates.

    Returns:
        (actor_params, normalizer).

    Raises:
        FileNotFoundError: there is none.
        DamagedFileError: it cannot be decoded into the templates' structure (truncated, or another network's).
    """
    path = run_dir / POLICY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {POLICY_FILE} in run directory '{run_dir}' (did training finish?)")
    target = {"actor_params": template_params, "normalizer": template_normalizer}
    try:
        restored = serialization.from_bytes(target, path.read_bytes())
    except Exception as e:  # msgpack and flax raise many kinds for damaged bytes
        reason = (str(e).strip() or type(e).__name__).splitlines()[0]
        raise DamagedFileError(
            f"'{path}' is damaged ({reason}); evaluate a checkpoint instead with checkpoint=<epoch>"
        ) from None
    return restored["actor_params"], restored["normalizer"]


@dataclasses.dataclass(frozen=True)
class RunPolicy:
    """The trained policy of a run directory, with what it acts in.

    Attributes:
        config: the run's config.
        env: its environment.
        actor: the actor network (apply with `actor_params`).
        actor_params: the actor's parameters.
        normalizer: the observation statistics the actor expects.
        source: where the parameters came from (`policy.msgpack` or a checkpoint directory).
    """

    config: TrainConfig
    env: MjxEnv
    actor: Actor
    actor_params: dict
    normalizer: RunningStatistics
    source: Path


def load_run_policy(
    run_dir: Path, checkpoint: int | None = None, physical: bool = False, episode_length: int | None = None
) -> RunPolicy:
    """The policy of a run: its checkpoint `checkpoint`, else `policy.msgpack`, else its newest checkpoint.

    With `physical`, `RunPolicy.env` simulates the physical contact model
    (`smoothing.mode=none`) whatever contact model the run trained with; with
    `episode_length`, its episodes last that many steps instead of those of the
    run's evaluations (`TrainConfig.evaluation_env`; shorter than the run's window
    too: `RunPolicy.config` stays the run's).

    Raises:
        FileNotFoundError: no `config.json` in `run_dir`.
        ConfigError: a damaged `config.json`.
        DamagedFileError: a damaged `policy.msgpack`.
        CheckpointError: the checkpoint asked for is missing or unreadable, or
            the run has neither `policy.msgpack` nor a readable checkpoint.
    """
    config = load_config(run_dir)
    if physical:
        config = dataclasses.replace(config, smoothing=Smoothing())
    env = make_env(config.evaluation_env(episode_length), config.randomization, config.smoothing)
    shac = make_algorithm(config.algo, env)
    abstract = shac.state_shapes
    policy_file = run_dir / POLICY_FILE
    if checkpoint is None and policy_file.is_file():
        template = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), (abstract.actor_params, abstract.normalizer))
        actor_params, normalizer = load_policy(run_dir, *template)
        return RunPolicy(
            config=config,
            env=env,
            actor=shac.actor,
            actor_params=actor_params,
            normalizer=normalizer,
            source=policy_file,
        )
    with Checkpointer(run_dir) as checkpoints:
        if checkpoint is None:
            state = checkpoints.restore_latest(abstract, config)
        else:
            state = checkpoints.restore(checkpoint, abstract, config)
    return RunPolicy(
        config=config,
        env=env,
        actor=shac.actor,
        actor_params=state.actor_params,
        normalizer=state.normalizer,
        source=checkpoints.path(int(state.epoch)),
    )
