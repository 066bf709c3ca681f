"""Planar half-cheetah running along +x, as defined in the SHAC paper (Xu et al., 2022)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from mujoco import mjx

from envs.base import MjxEnv


class HalfCheetah(MjxEnv):
    """Planar two-legged cheetah (6 hinge motors) that should run along +x.

    Observation (17): torso height [1] (m), torso pitch [1] (rad), back thigh,
    shin, foot and front thigh, shin, foot angles [6], then the velocities of
    torso x, torso z, torso pitch and the six joints [9]: qpos without the torso
    x, and qvel. Action order: back thigh, shin, foot, front thigh, shin, foot.
    Reward: forward (torso x velocity) + control (-0.1 * sum a^2).
    No early termination (a flipped cheetah lands on its back or head).
    Reset: torso at 0.7 m (it drops about 0.1 m onto its feet), joints at 0, with
    uniform noise of +-0.1 on every position and +-0.25 on every velocity.
    1000 control steps of 1/60 s.
    """

    def __init__(self, episode_length: int = 1000, ctrl_dt: float = 1 / 60, **options):
        super().__init__("half_cheetah.xml", ctrl_dt=ctrl_dt, episode_length=episode_length, **options)

    def initial_data(self, rng: jax.Array) -> mjx.Data:
        pos_key, vel_key = jax.random.split(rng)
        model = self.mj_model
        qpos = model.qpos0 + jax.random.uniform(pos_key, (model.nq,), minval=-0.1, maxval=0.1)
        qvel = jax.random.uniform(vel_key, (model.nv,), minval=-0.25, maxval=0.25)
        return self.data_from_qpos_qvel(qpos, qvel)

    def observation(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        del action
        return jnp.concatenate([data.qpos[1:], data.qvel])

    def reward(self, data: mjx.Data, action: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        terms = {
            "forward": data.qvel[0],
            "control": -0.1 * jnp.sum(action**2),
        }
        return sum(terms.values()), terms
