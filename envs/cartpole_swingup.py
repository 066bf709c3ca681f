"""Cart-pole swing-up, as defined in the SHAC paper (Xu et al., 2022)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from mujoco import mjx

from envs.base import MjxEnv


class CartPoleSwingUp(MjxEnv):
    """Swing the pole up from hanging down and balance it, keeping the cart near 0.

    Observation (5): [x, x_dot, sin th, cos th, th_dot], th = 0 upright.
    Reward: -(th^2 + 0.1 th_dot^2 + 0.05 x^2 + 0.1 x_dot^2), th wrapped to (-pi, pi].
    Reset: th = pi, uniform +-pi/2 noise on x and th, +-0.25 on both velocities.
    No early termination; 240 control steps of 1/60 s.
    """

    def __init__(self, episode_length: int = 240, ctrl_dt: float = 1 / 60, **options):
        super().__init__("cartpole.xml", ctrl_dt=ctrl_dt, episode_length=episode_length, **options)

    def initial_data(self, rng: jax.Array) -> mjx.Data:
        pos_key, vel_key = jax.random.split(rng)
        qpos = jnp.array([0.0, jnp.pi]) + jax.random.uniform(pos_key, (2,), minval=-jnp.pi / 2, maxval=jnp.pi / 2)
        qvel = jax.random.uniform(vel_key, (2,), minval=-0.25, maxval=0.25)
        return self.data_from_qpos_qvel(qpos, qvel)

    def observation(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        del action
        x, th = data.qpos
        x_dot, th_dot = data.qvel
        return jnp.stack([x, x_dot, jnp.sin(th), jnp.cos(th), th_dot])

    def reward(self, data: mjx.Data, action: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        del action
        x, th = data.qpos
        x_dot, th_dot = data.qvel
        th = jnp.arctan2(jnp.sin(th), jnp.cos(th))
        terms = {
            "angle": -(th**2),
            "angular_velocity": -0.1 * th_dot**2,
            "position": -0.05 * x**2,
            "velocity": -0.1 * x_dot**2,
        }
        return sum(terms.values()), terms
