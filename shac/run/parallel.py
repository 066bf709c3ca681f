"""Data parallelism: the environment batch sharded over a device mesh, everything else replicated.

The mesh spans every device of every process (`jax.devices()`), with one axis,
`batch`. The leading [N] axis of the carried environments and episode totals
is split over it; parameters, optimiser states, the normaliser, the key and the
counters are replicated. The epoch is jitted once over these shardings (GSPMD):
each device simulates N / devices environments, and the means of the losses and
of the normaliser's batch statistics are means over all N, so the gradients are
averaged across devices and the statistics combined exactly, as on one device
(up to the order of floating-point sums). Across processes, each one computes
the shards on its own devices, so each simulates its share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from shac.config import ConfigError
from shac.core.algorithm import Metrics, Shac, TrainState

BATCH_AXIS = "batch"


def make_mesh(num_envs: int, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh over `devices` (default: all devices of all processes) that splits `num_envs` evenly.

    Raises:
        ConfigError: `num_envs` is not a multiple of the number of devices.
    """
    devices = jax.devices() if devices is None else list(devices)
    if num_envs % len(devices):
        raise ConfigError(
            f"algo.num_envs={num_envs} must be divisible by the number of devices ({len(devices)}), "
            f"e.g. algo.num_envs={len(devices) * max(1, num_envs // len(devices))}"
        )
    return Mesh(np.asarray(devices), (BATCH_AXIS,))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Arrays split along their leading (environment) axis."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    """Arrays held whole on every device."""
    return NamedSharding(mesh, PartitionSpec())


def state_shardings(mesh: Mesh, state: TrainState) -> TrainState:
    """The sharding of each leaf of `state` (concrete or abstract): `env_state` and `episodes` split, the rest whole."""
    whole, split = replicated(mesh), batch_sharding(mesh)
    return jax.tree.map(lambda _: whole, state).replace(
        env_state=jax.tree.map(lambda _: split, state.env_state),
        episodes=jax.tree.map(lambda _: split, state.episodes),
    )


def abstract_state(shac: Shac, mesh: Mesh) -> TrainState:
    """Shapes, dtypes and shardings of `shac`'s training state (to restore a checkpoint straight into place)."""
    abstract = shac.state_shapes
    return jax.tree.map(
        lambda leaf, sharding: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding),
        abstract,
        state_shardings(mesh, abstract),
    )


def sharded_init(shac: Shac, mesh: Mesh) -> Callable[[jax.Array], TrainState]:
    """`shac.init` jitted to return the state laid out by `state_shardings` (each device resets its own envs)."""
    shardings = state_shardings(mesh, shac.state_shapes)
    return jax.jit(shac.init, in_shardings=replicated(mesh), out_shardings=shardings)


def sharded_epoch(shac: Shac, mesh: Mesh) -> Callable[[TrainState], tuple[TrainState, Metrics]]:
    """`shac.epoch` jitted over the `state_shardings` layout; the metrics come back replicated."""
    shardings = state_shardings(mesh, shac.state_shapes)
    return jax.jit(shac.epoch, in_shardings=(shardings,), out_shardings=(shardings, replicated(mesh)))
