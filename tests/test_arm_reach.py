"""The arm reaching task: its model (position actuators, joint limits, table contact), its action
mapping, its reward at a hand-built state and its steps (its 32-step gradient: test_gradients.py).

One MJX compile in all (a reset and 3 steps of 4 envs); the other tests run MuJoCo's C forward
pass and the task's reward on `mjx.put_data`.
"""

import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

import envs
from envs.arm_reach import ArmReach

ENV = envs.make("arm_reach")
ARM_GEOMS = ("shoulder", "upper_arm", "forearm", "wrist_1", "wrist_2", "hand")
TABLE_CONTACTS = {"forearm", "wrist_1", "wrist_2", "hand"}


def mj_state(qpos, target) -> tuple[mujoco.MjData, mjx.Data]:
    """MuJoCo's forward pass of the arm at `qpos` with the target at `target`, and the same state in MJX."""
    data = mujoco.MjData(ENV.mj_model)
    data.qpos[:] = qpos
    data.mocap_pos[0] = target
    mujoco.mj_forward(ENV.mj_model, data)
    return data, mjx.put_data(ENV.mj_model, data, impl="jax")


def test_model_has_six_limited_position_controlled_joints():
    model = ENV.mj_model
    assert isinstance(ENV, ArmReach)
    assert (model.nq, model.nv, model.nu, model.nmocap) == (6, 6, 6, 1)
    assert (ENV.action_size, ENV.observation_size) == (6, 21)
    assert model.opt.timestep == pytest.approx(0.005) and ENV.ctrl_dt == pytest.approx(0.02) and ENV.n_substeps == 4
    assert ENV.episode_length == 200
    assert (model.jnt_type == mujoco.mjtJoint.mjJNT_HINGE).all() and model.jnt_limited.all()
    for field in (model.dof_armature, model.dof_damping, model.dof_frictionloss):
        assert (field > 0).all()
    # position servos: force = kp ctrl - kp q - kv q_dot, each on its own joint, ctrl in the joint's range
    kp = model.actuator_gainprm[:, 0]
    assert (kp > 0).all()
    np.testing.assert_array_equal(model.actuator_biasprm[:, 1], -kp)
    assert (model.actuator_biasprm[:, 2] < 0).all()
    np.testing.assert_array_equal(model.actuator_trnid[:, 0], np.arange(6))
    assert model.actuator_ctrllimited.all()
    np.testing.assert_array_equal(model.actuator_ctrlrange, model.jnt_range)


def test_links_touch_the_table_and_never_each_other():
    model = ENV.mj_model

    def collide(a, b):
        ga, gb = model.geom(a), model.geom(b)
        return bool((ga.contype & gb.conaffinity) | (gb.contype & ga.conaffinity))

    assert {name for name in ARM_GEOMS if collide(name, "table")} == TABLE_CONTACTS
    assert not any(collide(a, b) for a in ARM_GEOMS for b in ARM_GEOMS)
    assert not any(collide(name, "floor") or collide(name, "target") for name in ARM_GEOMS)
    # the hand pushed down into the table top makes a hand-table contact
    data, _ = mj_state([0.0, 1.0, 1.4, 1.4, 0.0, 0.0], [0.35, 0.0, 0.6])
    pairs = {(model.geom(c.geom1).name, model.geom(c.geom2).name) for c in data.contact[: data.ncon]}
    assert pairs and all("table" in pair for pair in pairs)


def test_actions_span_the_ctrlrange():
    low, high = ENV.mj_model.actuator_ctrlrange.T
    np.testing.assert_allclose(ENV.ctrl_from_action(-jnp.ones(6)), low, rtol=1e-6)
    np.testing.assert_allclose(ENV.ctrl_from_action(jnp.ones(6)), high, rtol=1e-6)
    np.testing.assert_allclose(ENV.ctrl_from_action(jnp.zeros(6)), (low + high) / 2, atol=1e-6)


def test_distance_term_vanishes_at_the_target_and_grows_away_from_it():
    qpos = np.array(ArmReach.home)
    data, _ = mj_state(qpos, [0.0, 0.0, 0.0])
    ee = data.site_xpos[ENV.ee_site].copy()
    _, at_target = mj_state(qpos, ee)
    _, away = mj_state(qpos, ee + np.array([0.3, 0.0, 0.0]))
    action = jnp.zeros(6)
    reward, terms = ENV.reward(at_target, action)
    assert float(terms["distance"]) == pytest.approx(0.0, abs=1e-6)
    assert float(terms["velocity"]) == 0.0 and float(reward) == pytest.approx(0.0, abs=1e-6)
    far_reward, far_terms = ENV.reward(away, action)
    c = ArmReach.distance_scale
    assert float(far_terms["distance"]) == pytest.approx(-(np.hypot(0.3, c) - c), rel=1e-5)
    assert float(far_reward) < float(reward)
    # the observation ends with target, then target - end effector
    obs = np.asarray(ENV.observation(away, action))
    np.testing.assert_allclose(obs[:6], qpos, rtol=1e-6)
    np.testing.assert_allclose(obs[12:15], ee, rtol=1e-5)
    np.testing.assert_allclose(obs[-3:], [0.3, 0.0, 0.0], atol=1e-5)


@functools.cache
def reset_and_step():
    """Jitted (keys [N], actions [T, N, 6]) -> (reset states, the states after each step)."""

    def run(keys, actions):
        start = jax.vmap(ENV.reset)(keys)

        def step(state, action):
            state = jax.vmap(ENV.step)(state, action)
            return state, state

        return start, jax.lax.scan(step, start, actions)[1]

    return jax.jit(run)


def test_reset_and_steps_follow_the_position_targets():
    # env 0 targets the upper ends of the ranges, env 1 the lower, env 2 the middles, env 3 random
    actions = jnp.stack(
        [jnp.ones(6), -jnp.ones(6), jnp.zeros(6), jax.random.uniform(jax.random.key(1), (6,), minval=-1, maxval=1)]
    )
    start, trace = reset_and_step()(jax.random.split(jax.random.key(0), 4), jnp.broadcast_to(actions, (3, 4, 6)))
    data = start.pipeline_state
    # reset: near the home pose, the targets inside the box, at rest
    np.testing.assert_array_less(np.abs(data.qpos - np.array(ArmReach.home)), 0.1 + 1e-6)
    target = np.asarray(data.mocap_pos[:, 0])
    assert (target >= np.array(ArmReach.target_low)).all() and (target <= np.array(ArmReach.target_high)).all()
    assert len({tuple(t) for t in target.round(4)}) == 4
    np.testing.assert_allclose(start.obs[:, 15:18], target, rtol=1e-6)
    # steps: finite, the reward the sum of its terms, ctrl the mapped action, time one control step each
    assert np.isfinite(np.asarray(trace.obs)).all() and np.isfinite(np.asarray(trace.reward)).all()
    np.testing.assert_allclose(sum(trace.metrics.values()), trace.reward, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(trace.pipeline_state.time[:, 0], [0.02, 0.04, 0.06], rtol=1e-5)
    np.testing.assert_allclose(trace.pipeline_state.ctrl[0], jax.vmap(ENV.ctrl_from_action)(actions), rtol=1e-6)
    assert not np.asarray(trace.done).any()
    # the target moves with the state, never with the arm
    np.testing.assert_array_equal(trace.pipeline_state.mocap_pos[-1, :, 0], target)
    # every joint far from its target moves towards it
    gap = np.asarray(trace.pipeline_state.ctrl[0] - data.qpos)
    moved = np.asarray(trace.pipeline_state.qpos[-1] - data.qpos)
    far = np.abs(gap) > 0.5
    assert far.sum() > 10 and (np.sign(moved[far]) == np.sign(gap[far])).all()
