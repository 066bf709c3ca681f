"""Planar one-legged hopper moving along +x, as defined in the SHAC paper (Xu et al., 2022)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from mujoco import mjx

from envs import locomotion
from envs.base import MjxEnv


class Hopper(MjxEnv):
    """Planar hopper (thigh, leg and foot motors) that should hop along +x without falling.

    Observation (11): torso height [1] (m), torso pitch [1] (rad, 0 upright),
    thigh, leg and foot angles [3], then the velocities of torso x, torso z,
    torso pitch, thigh, leg and foot [6]: qpos without the torso x, and qvel.
    Reward: forward (torso x velocity) + height + angle + control
    (-0.1 * sum a^2). height is -200 d^2 below 0.95 m and d above, with
    d = torso height - 0.95 clipped to [-1, 0.3]; angle is
    1 - (pitch / (pi/6))^2.
    Early termination (fallen): torso height below 0.8 m, 0.45 m under its 1.25 m
    start height (the 0.95 m reward target is 0.15 m above it).
    Reset: standing upright (torso at 1.25 m, joints at 0) with uniform noise of
    +-0.05 on every position (joints clipped into their ranges) and velocity.
    1000 control steps of 1/60 s.
    """

    termination_height = 0.8
    target_height = 0.95
    max_angle = jnp.pi / 6

    def __init__(self, episode_length: int = 1000, ctrl_dt: float = 1 / 60, **options):
        super().__init__("hopper.xml", ctrl_dt=ctrl_dt, episode_length=episode_length, **options)

    def initial_data(self, rng: jax.Array) -> mjx.Data:
        pos_key, vel_key = jax.random.split(rng)
        model = self.mj_model
        qpos = model.qpos0 + jax.random.uniform(pos_key, (model.nq,), minval=-0.05, maxval=0.05)
        qvel = jax.random.uniform(vel_key, (model.nv,), minval=-0.05, maxval=0.05)
        return self.data_from_qpos_qvel(locomotion.clip_to_joint_ranges(model, qpos), qvel)

    def observation(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        del action
        return jnp.concatenate([data.qpos[1:], data.qvel])

    def reward(self, data: mjx.Data, action: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        terms = {
            "forward": data.qvel[0],
            "height": locomotion.height_reward(data.qpos[1], self.target_height, upper=0.3, above_scale=1.0),
            "angle": 1.0 - (data.qpos[2] / self.max_angle) ** 2,
            "control": -0.1 * jnp.sum(action**2),
        }
        return sum(terms.values()), terms

    def terminated(self, data: mjx.Data) -> jax.Array:
        return data.qpos[1] < self.termination_height
