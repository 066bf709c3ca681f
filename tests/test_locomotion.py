"""The locomotion tasks: shared helpers, observation layouts, reward terms and early termination."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mujoco import mjx

from envs import locomotion
from tests import env_runs

S = np.sqrt(0.5)  # cos 45 deg = sin 45 deg


def data_at(name, qpos, qvel=None):
    """An `mjx.Data` of env `name` with the given coordinates (no kinematics: the terms read qpos/qvel)."""
    env = env_runs.make(name)
    data = mjx.make_data(env.mjx_model)
    qvel = jnp.zeros(env.mj_model.nv) if qvel is None else jnp.asarray(qvel, jnp.float32)
    return data.replace(qpos=jnp.asarray(qpos, jnp.float32), qvel=qvel)


# ------------------------------------------------------------------ helpers


@pytest.mark.parametrize(
    ("quat", "up", "heading"),
    [
        ((1, 0, 0, 0), 1.0, 1.0),  # identity
        ((S, 0, 0, S), 1.0, 0.0),  # yaw 90 deg: body x points along world y
        ((S, 0, S, 0), 0.0, 0.0),  # pitch 90 deg: body z -> world x, body x -> world -z
        ((0, 1, 0, 0), -1.0, 1.0),  # roll 180 deg: upside down, still facing +x
        ((np.cos(np.pi / 6), 0, np.sin(np.pi / 6), 0), 0.5, 0.5),  # pitch 60 deg: cos 60 = 0.5 for both
    ],
)
def test_up_and_heading_of_hand_rotated_bodies(quat, up, heading):
    got_up, got_heading = locomotion.up_and_heading(jnp.array(quat, jnp.float32))
    assert float(got_up) == pytest.approx(up, abs=1e-6)
    assert float(got_heading) == pytest.approx(heading, abs=1e-6)


def test_quat_mul_composes_rotations():
    yaw_90 = jnp.array([S, 0, 0, S])
    np.testing.assert_allclose(locomotion.quat_mul(yaw_90, yaw_90), [0, 0, 0, 1], atol=1e-6)  # yaw 180 deg
    np.testing.assert_allclose(locomotion.quat_mul(jnp.array([1.0, 0, 0, 0]), yaw_90), yaw_90, atol=1e-7)


def test_rotate_takes_the_vector_first_like_mjx():
    yaw_90 = jnp.array([S, 0, 0, S])  # +90 deg about z: x -> y, y -> -x
    np.testing.assert_allclose(locomotion.rotate(jnp.array([1.0, 0, 0]), yaw_90), [0, 1, 0], atol=1e-6)
    np.testing.assert_allclose(locomotion.rotate(jnp.array([0, 2.0, 0]), yaw_90), [-2, 0, 0], atol=1e-6)


@pytest.mark.parametrize(
    ("height", "expected"),
    [
        (1.00, 1.0),  # d = 0.16, capped at 0.1, times 10
        (0.89, 0.5),  # d = 0.05 -> 10 * 0.05
        (0.84, 0.0),  # at the target
        (0.74, -2.0),  # d = -0.1 -> -200 * 0.01
        (-2.0, -200.0),  # d = -2.84, clipped at -1 -> -200 * 1
    ],
)
def test_height_reward_is_steep_below_the_target_and_capped_above(height, expected):
    value = locomotion.height_reward(jnp.float32(height), 0.84, upper=0.1, above_scale=10.0)
    assert float(value) == pytest.approx(expected, abs=1e-5)


def test_free_body_reset_noise_stays_within_its_bounds():
    home = jnp.asarray(env_runs.make("ant").mj_model.key("home").qpos)
    keys = jax.random.split(jax.random.key(0), 256)
    qpos, qvel = jax.vmap(lambda key: locomotion.free_body_reset_noise(key, home, 14))(keys)
    assert np.abs(np.asarray(qpos[:, :3] - home[:3])).max() <= 0.1
    np.testing.assert_allclose(np.linalg.norm(qpos[:, 3:7], axis=1), 1.0, atol=1e-6)
    tilt = 2 * np.arccos(np.clip(np.abs(np.asarray(qpos[:, 3])), 0, 1))  # angle from upright, home quat is identity
    assert tilt.max() <= np.pi / 24 + 1e-4 and tilt.max() > np.pi / 48
    assert np.abs(np.asarray(qpos[:, 7:] - home[7:])).max() <= 0.2
    assert qvel.shape == (256, 14) and np.abs(np.asarray(qvel)).max() <= 0.25


def test_clip_to_joint_ranges_clips_hinges_and_leaves_the_free_root():
    model = env_runs.make("humanoid").mj_model
    qpos = jnp.full(model.nq, 5.0)
    clipped = np.asarray(locomotion.clip_to_joint_ranges(model, qpos))
    np.testing.assert_array_equal(clipped[:7], 5.0)
    np.testing.assert_allclose(clipped[7:], model.jnt_range[1:, 1], rtol=1e-6)  # every hinge at its upper limit


# ------------------------------------------------------- observations, rewards


@pytest.mark.parametrize(("name", "size"), [("ant", 37), ("humanoid", 76), ("hopper", 11), ("half_cheetah", 17)])
def test_observation_sizes_are_the_papers(name, size):
    assert env_runs.make(name).observation_size == size


def test_ant_observation_layout():
    env = env_runs.make("ant")
    joints = jnp.arange(8.0) / 10
    qpos = jnp.concatenate([jnp.array([1.0, 2.0, 0.5, S, 0, 0, S]), joints])  # yawed 90 deg
    qvel = jnp.concatenate([jnp.array([0.3, 0.2, 0.1, 1.0, 0, 0]), 10 * joints])  # spinning about its own x
    action = jnp.linspace(-1, 1, 8)
    obs = env.observation(data_at("ant", qpos, qvel), action)
    np.testing.assert_allclose(obs[0], 0.5)  # height
    np.testing.assert_allclose(obs[1:5], [S, 0, 0, S], atol=1e-7)  # quaternion
    np.testing.assert_allclose(obs[5:8], [0.3, 0.2, 0.1])  # linear velocity
    np.testing.assert_allclose(obs[8:11], [0, 1, 0], atol=1e-6)  # body x is world y after the yaw
    np.testing.assert_allclose(obs[11:19], joints)
    np.testing.assert_allclose(obs[19:27], joints, rtol=1e-6)  # 0.1 * joint velocities
    np.testing.assert_allclose(obs[27:29], [1, 0], atol=1e-6)  # upright, facing +y: heading 0
    np.testing.assert_allclose(obs[29:37], action)


def test_ant_reward_terms():
    # upright, facing +x, torso at 0.5 m moving at 2 m/s: 2 + 0.1 + 1 + (0.5 - 0.27) = 3.33
    qpos = np.r_[0, 0, 0.5, 1, 0, 0, 0, np.zeros(8)]
    qvel = np.r_[2.0, np.zeros(13)]
    reward, terms = env_runs.make("ant").reward(data_at("ant", qpos, qvel), jnp.ones(8))
    assert {k: float(v) for k, v in terms.items()} == pytest.approx(
        {"forward": 2.0, "up": 0.1, "heading": 1.0, "height": 0.23}, abs=1e-6
    )
    assert float(reward) == pytest.approx(3.33, abs=1e-5)


def test_humanoid_reward_terms():
    # upright facing +x at 1.2 m (height term capped: 10 * 0.1), 1.5 m/s, all 21 actions at 0.5:
    # 1.5 + 0.1 + 1 + 1 - 0.002 * 21 * 0.25 = 3.5895
    qpos = np.r_[0, 0, 1.2, 1, 0, 0, 0, np.zeros(21)]
    qvel = np.r_[1.5, np.zeros(26)]
    reward, terms = env_runs.make("humanoid").reward(data_at("humanoid", qpos, qvel), jnp.full(21, 0.5))
    assert {k: float(v) for k, v in terms.items()} == pytest.approx(
        {"forward": 1.5, "up": 0.1, "heading": 1.0, "height": 1.0, "control": -0.0105}, abs=1e-6
    )
    assert float(reward) == pytest.approx(3.5895, abs=1e-5)


def test_hopper_reward_terms():
    # torso at 0.9 m pitched pi/12, 1 m/s, actions (1, -1, 0):
    # height -200 * (0.9 - 0.95)^2 = -0.5; angle 1 - (1/2)^2 = 0.75; control -0.1 * 2 = -0.2
    qpos = np.array([3.0, 0.9, np.pi / 12, 0, 0, 0])
    qvel = np.array([1.0, 0, 0, 0, 0, 0])
    reward, terms = env_runs.make("hopper").reward(data_at("hopper", qpos, qvel), jnp.array([1.0, -1.0, 0.0]))
    assert {k: float(v) for k, v in terms.items()} == pytest.approx(
        {"forward": 1.0, "height": -0.5, "angle": 0.75, "control": -0.2}, abs=1e-5
    )
    assert float(reward) == pytest.approx(1.05, abs=1e-5)
    obs = env_runs.make("hopper").observation(data_at("hopper", qpos, qvel), jnp.zeros(3))
    np.testing.assert_allclose(obs, np.r_[qpos[1:], qvel], rtol=1e-6)  # qpos without the torso x, then qvel


def test_half_cheetah_reward_terms():
    # 3 m/s, six actions at 0.5: 3 - 0.1 * 6 * 0.25 = 2.85
    qvel = np.r_[3.0, np.zeros(8)]
    reward, terms = env_runs.make("half_cheetah").reward(data_at("half_cheetah", np.zeros(9), qvel), jnp.full(6, 0.5))
    assert {k: float(v) for k, v in terms.items()} == pytest.approx({"forward": 3.0, "control": -0.15}, abs=1e-6)
    assert float(reward) == pytest.approx(2.85, abs=1e-6)


# ------------------------------------------------------------- termination


@pytest.mark.parametrize(("name", "height"), [("ant", 0.27), ("hopper", 0.8), ("humanoid", 0.74)])
def test_random_rollout_terminates_exactly_when_the_torso_is_below_its_height(name, height):
    trace = env_runs.random_rollout(name)  # obs[..., 0] is the torso height for all three
    np.testing.assert_array_equal(trace.terminated, np.asarray(trace.obs[..., 0] < height))


@pytest.mark.parametrize("name", ["hopper", "humanoid"])
def test_random_actions_make_the_unstable_robots_fall(name):
    assert float(env_runs.random_rollout(name).terminated.sum()) >= env_runs.N_ENVS


def test_half_cheetah_never_terminates():
    trace = env_runs.random_rollout("half_cheetah")
    assert not np.asarray(trace.terminated).any()
    upside_down_below_the_floor = data_at("half_cheetah", np.r_[0, -1.0, np.pi, np.zeros(6)])
    assert not bool(env_runs.make("half_cheetah").terminated(upside_down_below_the_floor))


def test_ant_flipped_below_027_terminates_at_once():
    # env 0 upside down (feet in the air, nothing holds the torso) with the torso at 0.2 m;
    # env 1 as reset, about 0.75 m up and upright
    states = env_runs.initial_states("ant")
    data = states.pipeline_state
    flipped = data.replace(qpos=data.qpos.at[0, 2:7].set(jnp.array([0.2, 0.0, 1.0, 0.0, 0.0])))
    trace = env_runs.rollout("ant")(states.replace(pipeline_state=flipped), env_runs.zero_actions("ant"))
    np.testing.assert_array_equal(trace.terminated[0], [1, 0])
    np.testing.assert_array_equal(trace.done[0], [1, 0])
    assert float(trace.obs[0, 0, 0]) < 0.27 and float(trace.obs[0, 0, 27]) < -0.99  # low, and up = -1


def test_tipped_hopper_falls_and_terminates():
    # env 0 starts pitched 0.8 rad (46 deg) forward; with zero torques it falls within a second
    states = env_runs.initial_states("hopper")
    data = states.pipeline_state
    tipped = data.replace(qpos=data.qpos.at[0, 2].set(0.8))
    trace = env_runs.rollout("hopper")(states.replace(pipeline_state=tipped), env_runs.zero_actions("hopper"))
    terminated = np.asarray(trace.terminated[:, 0])
    first = int(np.argmax(terminated))
    assert terminated[first] == 1 and first < 60
    assert float(trace.obs[first, 0, 0]) < 0.8 <= float(trace.obs[:first, 0, 0].min())


def test_humanoid_without_torques_collapses_and_terminates():
    trace = env_runs.rollout("humanoid")(env_runs.initial_states("humanoid"), env_runs.zero_actions("humanoid"))
    for env_index in range(env_runs.N_ENVS):
        terminated = np.asarray(trace.terminated[:, env_index])
        first = int(np.argmax(terminated))
        assert terminated[first] == 1 and first < 180
        assert float(trace.obs[first, env_index, 0]) < 0.74 <= float(trace.obs[:first, env_index, 0].min())
