"""Pieces shared by the locomotion tasks: torso orientation, height shaping, reset noise.

The world is z-up and every task runs along +x. Quaternions are MuJoCo's
(w, x, y, z).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx


def rotate(vec: jax.Array, quat: jax.Array) -> jax.Array:
    """float32 [3]: `vec` (float32 [3], body frame) in the world frame of unit `quat` [4] (MJX's argument order)."""
    w, u = quat[0], quat[1:]
    return vec + 2.0 * jnp.cross(u, jnp.cross(u, vec) + w * vec)


def quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    """float32 [4]: the Hamilton product a * b of two (w, x, y, z) quaternions."""
    w = a[0] * b[0] - jnp.dot(a[1:], b[1:])
    xyz = a[0] * b[1:] + b[0] * a[1:] + jnp.cross(a[1:], b[1:])
    return jnp.concatenate([w[None], xyz])


def up_and_heading(quat: jax.Array) -> tuple[jax.Array, jax.Array]:
    """How upright a body is and how well it faces +x.

    Args:
        quat: float32 [4] the body's orientation.

    Returns:
        up: float32 [] world z component of the body's z axis (1 upright, -1 upside down).
        heading: float32 [] world x component of the body's x axis (1 facing the
            running direction +x; the target is infinitely far along +x).
    """
    up = rotate(jnp.array([0.0, 0.0, 1.0]), quat)[2]
    heading = rotate(jnp.array([1.0, 0.0, 0.0]), quat)[0]
    return up, heading


def height_reward(height: jax.Array, target: jax.Array | float, upper: float, above_scale: float) -> jax.Array:
    """The SHAC paper's height shaping: a steep quadratic below `target`, a capped ramp above.

    With d = clip(height - target, -1, upper): -200 d^2 when d < 0, else
    above_scale * d.

    Args:
        height: float32 [] torso height in metres.
        target: height where the penalty ends.
        upper: cap on d above the target.
        above_scale: slope of the reward above the target.

    Returns:
        float32 [] the height term.
    """
    d = jnp.clip(height - target, -1.0, upper)
    return jnp.where(d < 0.0, -200.0 * d**2, above_scale * d)


def clip_to_joint_ranges(mj_model: mujoco.MjModel, qpos: jax.Array) -> jax.Array:
    """float32 [nq]: `qpos` with every limited hinge and slide joint clipped into its range.

    Reset noise can push a joint with a narrow range past its limit; starting
    inside it avoids a first step spent in the limit constraint.
    """
    kind = mj_model.jnt_type
    hinge_or_slide = (kind == mujoco.mjtJoint.mjJNT_HINGE) | (kind == mujoco.mjtJoint.mjJNT_SLIDE)
    joints = np.flatnonzero(mj_model.jnt_limited.astype(bool) & hinge_or_slide)
    adr = mj_model.jnt_qposadr[joints]
    low, high = mj_model.jnt_range[joints].T
    return qpos.at[adr].set(jnp.clip(qpos[adr], low, high))


def free_body_reset_noise(
    rng: jax.Array,
    qpos: jax.Array,
    nv: int,
    *,
    position: float = 0.1,
    max_tilt: float = jnp.pi / 24,
    joints: float = 0.2,
    velocity: float = 0.25,
) -> tuple[jax.Array, jax.Array]:
    """Randomises a start pose of a robot whose root is a free joint (the SHAC paper's scheme).

    Args:
        rng: PRNG key.
        qpos: float32 [nq] the start pose: root position [3], root quaternion [4], joints.
        nv: number of velocity coordinates.
        position: uniform +- noise on the root position (m).
        max_tilt: the root is turned by a uniform angle in +- this (rad) about a random axis.
        joints: uniform +- noise on the joint angles (rad).
        velocity: uniform +- noise on every velocity coordinate.

    Returns:
        qpos: float32 [nq], qvel: float32 [nv].
    """
    pos_key, angle_key, axis_key, joint_key, vel_key = jax.random.split(rng, 5)
    position_noise = jax.random.uniform(pos_key, (3,), minval=-position, maxval=position)
    angle = jax.random.uniform(angle_key, (), minval=-max_tilt, maxval=max_tilt)
    axis = jax.random.uniform(axis_key, (3,), minval=-0.5, maxval=0.5)
    axis = axis / jnp.linalg.norm(axis)
    tilt = jnp.concatenate([jnp.cos(angle / 2)[None], jnp.sin(angle / 2) * axis])
    joint_noise = jax.random.uniform(joint_key, qpos[7:].shape, minval=-joints, maxval=joints)
    qpos = jnp.concatenate([qpos[:3] + position_noise, quat_mul(qpos[3:7], tilt), qpos[7:] + joint_noise])
    qvel = jax.random.uniform(vel_key, (nv,), minval=-velocity, maxval=velocity)
    return qpos, qvel


def free_body_observation(data: mjx.Data, action: jax.Array, joint_velocity_scale: float = 0.1) -> jax.Array:
    """The SHAC paper's observation of a robot whose root (the torso) is a free joint.

    Args:
        data: simulator state with qpos = [torso position 3, torso quaternion 4,
            joint angles J] and qvel = [torso linear velocity 3 (world frame),
            torso angular velocity 3 (torso frame), joint velocities J].
        action: float32 [A] the last action.
        joint_velocity_scale: factor on the joint velocities.

    Returns:
        float32 [13 + 2 J + A]: torso height [1], torso quaternion [4], torso
        linear velocity [3] and angular velocity [3] (both world frame), joint
        angles [J], joint_velocity_scale * joint velocities [J], up [1],
        heading [1] (see `up_and_heading`), last action [A].
    """
    quat = data.qpos[3:7]
    up, heading = up_and_heading(quat)
    return jnp.concatenate(
        [
            data.qpos[2:3],
            quat,
            data.qvel[0:3],
            rotate(data.qvel[3:6], quat),
            data.qpos[7:],
            joint_velocity_scale * data.qvel[6:],
            up[None],
            heading[None],
            action,
        ]
    )
