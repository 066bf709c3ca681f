"""Six-joint arm with position actuators reaching a target above a table; also meant as the
system-identification testbed of a real-robot-like arm (joint limits, armature, damping, dry
friction, table contact)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from mujoco import mjx

from envs import locomotion
from envs.base import MjxEnv
from envs.physics.mjx_math import with_contractions


class ArmReach(MjxEnv):
    """Move the end effector of a 6-joint arm to a target point sampled per episode.

    The arm (`envs/assets/arm.xml`) stands on a table: base yaw, shoulder, elbow
    and wrist pitch, wrist roll, wrist yaw, each a limited hinge driven by a
    position actuator. Actions in [-1, 1] are joint position targets across each
    actuator's control range (its joint range): ctrl = low + (a + 1) / 2 (high - low),
    so a = 0 targets the middle of every range (the arm pointing straight up).
    The target is the position of the mocap body `target` (`data.mocap_pos[0]`,
    seen in the simulator state, no collision), so it travels with the state
    and an auto-reset samples a new one.

    Observation (21): joint angles [6] (rad), joint velocities [6] (rad/s),
    end-effector position [3], target position [3] and target - end effector [3]
    (m, world frame).
    Reward: distance + velocity. distance = -(sqrt(|d|^2 + c^2) - c), d = target -
    end effector, c = 0.01 m: -|d| away from the target, smooth and 0 at it;
    velocity = -0.005 * sum q_dot^2.
    Reset: the home pose (shoulder 0.3, elbow 1.5, wrist pitch 1.3 rad, the
    others 0; end effector at about (0.36, 0, 0.59) m) with uniform +-0.1 rad on
    every joint (clipped into the ranges) and +-0.05 rad/s on every velocity; the
    target uniform in the box x in [0.2, 0.5], y in [-0.3, 0.3], z in [0.45, 0.8] m
    (0.05 to 0.4 m above the table top, in front of the base).
    No early termination; 200 control steps of 0.02 s.
    """

    home = (0.0, 0.3, 1.5, 1.3, 0.0, 0.0)
    target_low = (0.2, -0.3, 0.45)
    target_high = (0.5, 0.3, 0.8)
    distance_scale = 0.01
    velocity_weight = 0.005

    def __init__(self, episode_length: int = 200, ctrl_dt: float = 0.02, **options):
        super().__init__("arm.xml", ctrl_dt=ctrl_dt, episode_length=episode_length, **options)
        self.ee_site = self.mj_model.site("ee").id
        self.ctrl_low, self.ctrl_high = self.mj_model.actuator_ctrlrange.astype(np.float32).T

    def ctrl_from_action(self, action: jax.Array) -> jax.Array:
        """float32 [6] joint position targets (rad) for `action` in [-1, 1]: -1 and 1 are the ends of the ctrlrange."""
        return self.ctrl_low + 0.5 * (action + 1.0) * (self.ctrl_high - self.ctrl_low)

    def physics_step(self, data: mjx.Data, action: jax.Array, model: mjx.Model) -> mjx.Data:
        """`n_substeps` MJX steps with the position targets of `action` (`ctrl_from_action`) held."""
        return super().physics_step(data, self.ctrl_from_action(action), model)

    def initial_data(self, rng: jax.Array) -> mjx.Data:
        pos_key, vel_key, target_key = jax.random.split(rng, 3)
        nq = self.mj_model.nq
        qpos = jnp.asarray(self.home) + jax.random.uniform(pos_key, (nq,), minval=-0.1, maxval=0.1)
        qvel = jax.random.uniform(vel_key, (nq,), minval=-0.05, maxval=0.05)
        target = jax.random.uniform(
            target_key, (3,), minval=jnp.asarray(self.target_low), maxval=jnp.asarray(self.target_high)
        )
        return self.data_with_target(locomotion.clip_to_joint_ranges(self.mj_model, qpos), qvel, target)

    @with_contractions
    def data_with_target(self, qpos: jax.Array, qvel: jax.Array, target: jax.Array) -> mjx.Data:
        """A simulator state at time 0 with the given joint coordinates and target (m), kinematics computed."""
        data = mjx.make_data(self.mjx_model)
        data = data.replace(qpos=qpos, qvel=qvel, mocap_pos=data.mocap_pos.at[0].set(target))
        return mjx.forward(self.mjx_model, data)

    def end_effector(self, data: mjx.Data) -> jax.Array:
        """float32 [3] world position of the end-effector site (m)."""
        return data.site_xpos[self.ee_site]

    def target(self, data: mjx.Data) -> jax.Array:
        """float32 [3] world position of this episode's target (m)."""
        return data.mocap_pos[0]

    def observation(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        del action
        ee, target = self.end_effector(data), self.target(data)
        return jnp.concatenate([data.qpos, data.qvel, ee, target, target - ee])

    def reward(self, data: mjx.Data, action: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        del action
        offset = self.target(data) - self.end_effector(data)
        c = self.distance_scale
        terms = {
            "distance": -(jnp.sqrt(jnp.sum(offset**2) + c**2) - c),
            "velocity": -self.velocity_weight * jnp.sum(data.qvel**2),
        }
        return sum(terms.values()), terms
