"""Humanoid running along +x, as defined in the SHAC paper (Xu et al., 2022)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from mujoco import mjx

from envs import locomotion
from envs.base import MjxEnv


class Humanoid(MjxEnv):
    """Humanoid with 21 hinge motors that should run along +x without falling.

    Observation (76): torso height [1], torso quaternion (w, x, y, z) [4], torso
    linear velocity [3] and angular velocity [3] (world frame), joint angles [21],
    0.1 * joint velocities [21], up [1] (world z of the torso z axis), heading
    [1] (world x of the torso x axis, the direction the humanoid faces), last
    action [21]. Joint and action order: abdomen z, y, x; right hip x, z, y,
    knee, ankle y, x; the same for the left leg; right shoulder 1, 2, elbow; the
    same for the left arm.
    Reward: forward (torso x velocity) + up (0.1 * up) + heading + height
    + control (-0.002 * sum a^2), where height is -200 d^2 below 0.84 m and 10 d
    above, d = torso height - 0.84 clipped to [-1, 0.1].
    Early termination: torso height below 0.74 m.
    Reset: upright, torso at 1.4 m (feet 0.11 m above the floor), all joints at
    0, with uniform noise of +-0.1 m on the torso position, a tilt of up to pi/24
    about a random axis, +-0.2 rad on the joints (clipped into their ranges) and
    +-0.25 on every velocity.
    1000 control steps of 1/60 s.
    """

    termination_height = 0.74
    target_height = 0.84

    def __init__(self, episode_length: int = 1000, ctrl_dt: float = 1 / 60, **options):
        super().__init__("humanoid.xml", ctrl_dt=ctrl_dt, episode_length=episode_length, **options)

    def initial_data(self, rng: jax.Array) -> mjx.Data:
        home = jnp.asarray(self.mj_model.qpos0)
        qpos, qvel = locomotion.free_body_reset_noise(rng, home, self.mj_model.nv)
        return self.data_from_qpos_qvel(locomotion.clip_to_joint_ranges(self.mj_model, qpos), qvel)

    def observation(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        return locomotion.free_body_observation(data, action)

    def reward(self, data: mjx.Data, action: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        up, heading = locomotion.up_and_heading(data.qpos[3:7])
        terms = {
            "forward": data.qvel[0],
            "up": 0.1 * up,
            "heading": heading,
            "height": locomotion.height_reward(data.qpos[2], self.target_height, upper=0.1, above_scale=10.0),
            "control": -0.002 * jnp.sum(action**2),
        }
        return sum(terms.values()), terms

    def terminated(self, data: mjx.Data) -> jax.Array:
        return data.qpos[2] < self.termination_height
