"""A run's training state as its checkpoints hold it: what the resume tests compare bit for bit."""

from pathlib import Path

import jax
import numpy as np

from shac.config import make_env
from shac.core.algorithm import Shac
from shac.core.algorithms import make_algorithm
from shac.run.checkpoint import Checkpointer, state_arrays
from shac.run.serialization import load_config


def checkpoint_arrays(run_dir: Path, epoch: int, algorithm: Shac | None = None) -> dict[str, np.ndarray]:
    """Every array of the run's checkpoint of `epoch`, restored onto this process's device.

    `algorithm` gives the state's shapes; by default it is built from the run's
    config (an env construction and a trace of its reset: pass one to compare runs
    of one config).
    """
    config = load_config(run_dir)
    algorithm = algorithm or make_algorithm(config.algo, make_env(config.env))
    with Checkpointer(run_dir) as checkpoints:
        return jax.device_get(state_arrays(checkpoints.restore(epoch, algorithm.state_shapes, config)))
