"""Torque-limited pendulum swing-up (no contacts); also the system-identification testbed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from mujoco import mjx

from envs.base import MjxEnv


class PendulumSwingUp(MjxEnv):
    """Swing a torque-limited pendulum up from hanging down and hold it upright.

    The torque limit (2 N*m) is below the static torque needed at horizontal
    (4.9 N*m), so the policy must pump energy by swinging.

    Observation (3): [cos th, sin th, th_dot], th = 0 upright.
    Reward: -(th^2 + 0.1 th_dot^2 + 0.001 u^2), th wrapped to (-pi, pi], u in [-1, 1].
    Reset: th = pi + uniform +-0.2, th_dot uniform +-0.2.
    No early termination; 100 control steps of 0.05 s.
    """

    def __init__(self, episode_length: int = 100, ctrl_dt: float = 0.05, **options):
        super().__init__("pendulum.xml", ctrl_dt=ctrl_dt, episode_length=episode_length, **options)

    def initial_data(self, rng: jax.Array) -> mjx.Data:
        pos_key, vel_key = jax.random.split(rng)
        qpos = jnp.pi + jax.random.uniform(pos_key, (1,), minval=-0.2, maxval=0.2)
        qvel = jax.random.uniform(vel_key, (1,), minval=-0.2, maxval=0.2)
        return self.data_from_qpos_qvel(qpos, qvel)

    def observation(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        del action
        th, th_dot = data.qpos[0], data.qvel[0]
        return jnp.stack([jnp.cos(th), jnp.sin(th), th_dot])

    def reward(self, data: mjx.Data, action: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        th, th_dot = data.qpos[0], data.qvel[0]
        th = jnp.arctan2(jnp.sin(th), jnp.cos(th))
        terms = {
            "angle": -(th**2),
            "angular_velocity": -0.1 * th_dot**2,
            "control": -0.001 * jnp.sum(action**2),
        }
        return sum(terms.values()), terms
