"""Trains the toy env on one and on two devices of this process; writes both final states and the layout.

Run with `XLA_FLAGS=--xla_force_host_platform_device_count=2` (set before jax
starts): `python -m tests.two_devices <out.npz>`. The npz holds `one/<name>` and
`two/<name>` for every state array, and `layout` (JSON) how the two-device state
was placed.
"""

import dataclasses
import json
import sys

import jax
import numpy as np

from shac.core.algorithm import Shac
from shac.run import parallel
from shac.run.checkpoint import state_arrays
from tests import tiny_configs
from tests.toy_env import LineEnv

CONFIG = dataclasses.replace(tiny_configs.SHAC, num_envs=8, max_epochs=3)


def train(devices: list[jax.Device]):
    shac = Shac(CONFIG, LineEnv(episode_length=3))
    mesh = parallel.make_mesh(CONFIG.num_envs, devices)
    state = parallel.sharded_init(shac, mesh)(jax.random.key(0))
    epoch = parallel.sharded_epoch(shac, mesh)
    for _ in range(CONFIG.max_epochs):
        state, _ = epoch(state)
    return state


if __name__ == "__main__":
    assert jax.device_count() == 2, jax.devices()
    one, two = train(jax.devices()[:1]), train(jax.devices())
    obs, kernel = two.env_state.obs, jax.tree.leaves(two.actor_params)[0]
    layout = {
        "obs_devices": len(obs.sharding.device_set),
        "obs_shard_shapes": [list(shard.data.shape) for shard in obs.addressable_shards],
        "param_devices": len(kernel.sharding.device_set),
        "param_replicated": kernel.sharding.is_fully_replicated,
    }
    arrays = {f"one/{k}": v for k, v in jax.device_get(state_arrays(one)).items()}
    arrays.update({f"two/{k}": v for k, v in jax.device_get(state_arrays(two)).items()})
    np.savez(sys.argv[1], layout=json.dumps(layout), **arrays)
