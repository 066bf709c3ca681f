"""Ant running along +x, as defined in the SHAC paper (Xu et al., 2022)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from mujoco import mjx

from envs import locomotion
from envs.base import MjxEnv


class Ant(MjxEnv):
    """Four-legged ant (8 hinge motors) that should run along +x without falling.

    Observation (37): torso height [1], torso quaternion (w, x, y, z) [4], torso
    linear velocity [3] and angular velocity [3] (world frame), joint angles [8],
    0.1 * joint velocities [8], up [1] (world z of the torso z axis), heading [1]
    (world x of the torso x axis), last action [8]. Joint and action order:
    hip_1, ankle_1, ..., hip_4, ankle_4 (front left, front right, back left,
    back right).
    Reward: forward (torso x velocity) + up (0.1 * up) + heading + height
    (torso height - 0.27).
    Early termination: torso height below 0.27 m.
    Reset: the "home" keyframe (torso at 0.75 m, ankles at +-1 rad) with uniform
    noise of +-0.1 m on the torso position, a tilt of up to pi/24 about a random
    axis, +-0.2 rad on the joints and +-0.25 on every velocity.
    1000 control steps of 1/60 s.
    """

    termination_height = 0.27

    def __init__(self, episode_length: int = 1000, ctrl_dt: float = 1 / 60, **options):
        super().__init__("ant.xml", ctrl_dt=ctrl_dt, episode_length=episode_length, **options)
        self._home_qpos = jnp.asarray(self.mj_model.key("home").qpos)

    def initial_data(self, rng: jax.Array) -> mjx.Data:
        qpos, qvel = locomotion.free_body_reset_noise(rng, self._home_qpos, self.mj_model.nv)
        return self.data_from_qpos_qvel(locomotion.clip_to_joint_ranges(self.mj_model, qpos), qvel)

    def observation(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        return locomotion.free_body_observation(data, action)

    def reward(self, data: mjx.Data, action: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        del action
        up, heading = locomotion.up_and_heading(data.qpos[3:7])
        terms = {
            "forward": data.qvel[0],
            "up": 0.1 * up,
            "heading": heading,
            "height": data.qpos[2] - self.termination_height,
        }
        return sum(terms.values()), terms

    def terminated(self, data: mjx.Data) -> jax.Array:
        return data.qpos[2] < self.termination_height
