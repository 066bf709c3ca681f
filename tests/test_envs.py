"""Every registered environment: batched reset and rollouts, shapes and finite values (gradients: test_gradients)."""

import re

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from brax.envs.wrappers import training as brax_training

import envs
from envs.base import ASSETS
from shac.config import EnvConfig, make_env
from tests import env_runs


@pytest.mark.parametrize("name", envs.names())
def test_reset_gives_finite_observations_of_the_declared_size(name):
    env = env_runs.make(name)
    states = env_runs.initial_states(name)
    assert states.obs.shape == (env_runs.N_ENVS, env.observation_size)
    assert np.isfinite(np.asarray(states.obs)).all()
    for value in (states.reward, states.done, states.terminated, states.truncated):
        np.testing.assert_array_equal(value, np.zeros(env_runs.N_ENVS))
    assert float(jnp.abs(states.pipeline_state.time).max()) == 0.0


def test_the_observation_size_is_traced_once(monkeypatch):
    env = envs.make("pendulum_swingup")  # a fresh env: env_runs' envs may have traced theirs already
    traced, initial_data = [], type(env).initial_data  # on the class: a new bound method each time, as unpatched
    monkeypatch.setattr(type(env), "initial_data", lambda self, rng: traced.append(rng) or initial_data(self, rng))
    sizes = (env.observation_size, env.observation_size)
    assert len(traced) == 1
    assert sizes == (jax.eval_shape(env.reset, jax.random.key(0)).obs.shape[-1],) * 2


@pytest.mark.parametrize("name", envs.names())
def test_1000_random_steps_stay_finite_and_consistent(name):
    env = env_runs.make(name)
    trace = env_runs.random_rollout(name)
    steps, n = env_runs.ROLLOUT_STEPS, env_runs.N_ENVS
    assert trace.obs.shape == (steps, n, env.observation_size)
    for value in (trace.reward, trace.done, trace.terminated, trace.truncated, *trace.metrics.values()):
        assert value.shape == (steps, n)
    assert np.isfinite(np.asarray(trace.obs)).all()
    assert np.isfinite(np.asarray(trace.reward)).all()
    # the reward is the sum of the terms reported as metrics
    np.testing.assert_allclose(sum(trace.metrics.values()), trace.reward, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(trace.time[0], env.ctrl_dt, rtol=1e-5)
    # an episode ends by termination or by truncation, never both
    np.testing.assert_array_equal(trace.done, np.maximum(trace.terminated, trace.truncated))
    assert not (np.asarray(trace.terminated) * np.asarray(trace.truncated)).any()


@pytest.mark.parametrize("name", envs.names())
def test_time_limit_truncates_without_terminating(name):
    # start 5 control steps before the end of the episode; zero actions
    env = env_runs.make(name)
    states = env_runs.initial_states(name)
    data = states.pipeline_state
    near_end = data.replace(time=jnp.full_like(data.time, (env.episode_length - 5) * env.ctrl_dt))
    trace = env_runs.rollout(name)(states.replace(pipeline_state=near_end), env_runs.zero_actions(name))
    for env_index in range(env_runs.N_ENVS):
        np.testing.assert_array_equal(trace.done[:5, env_index], [0, 0, 0, 0, 1])
        np.testing.assert_array_equal(trace.truncated[:5, env_index], [0, 0, 0, 0, 1])
        np.testing.assert_array_equal(trace.terminated[:5, env_index], 0)


def test_episode_length_override_moves_the_time_limit():
    env = envs.make("pendulum_swingup", episode_length=5)

    def run(key):
        def step(state, _):
            state = env.step(state, jnp.zeros(env.action_size))
            return state, state.truncated

        return jax.lax.scan(step, env.reset(key), None, length=5)[1]

    np.testing.assert_array_equal(jax.jit(run)(jax.random.key(0)), [0, 0, 0, 0, 1])


def test_brax_training_wrappers_run_the_same_env():
    # brax's episode + auto-reset + vmap wrappers (as its PPO/APG use them) drive our env.
    env = brax_training.wrap(envs.make("pendulum_swingup"), episode_length=3)
    # brax expects raw uint32 keys (it reads the batch shape as rng.shape[:-1])
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    first_obs = state.obs
    step = jax.jit(env.step)
    dones = []
    for _ in range(4):
        state = step(state, jnp.zeros((2, env.action_size)))
        dones.append(np.asarray(state.done))
    np.testing.assert_array_equal(np.stack(dones)[:, 0], [0, 0, 1, 0])
    assert env.observation_size == 3 and env.action_size == 1
    # after the auto-reset at step 3, step 4 continues from the first state, not the last
    assert np.abs(np.asarray(state.obs) - np.asarray(first_obs)).max() < 0.5


def test_unknown_env_names_the_available_ones():
    available = "ant, arm_reach, cartpole_swingup, half_cheetah, hopper, humanoid, pendulum_swingup"
    with pytest.raises(ValueError, match=f"unknown env 'antt'; available: {available}"):
        envs.make("antt")


def test_bad_option_is_named():
    with pytest.raises(ValueError, match=re.escape("bad options {'legs': 3} for env 'pendulum_swingup'")):
        envs.make("pendulum_swingup", legs=3)


def test_solver_with_several_iterations_is_rejected():
    xml = (ASSETS / "pendulum.xml").read_text().replace('iterations="1"', 'iterations="50"')
    model = mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(envs.NotDifferentiableError, match=re.escape("opt.iterations is 50, must be 1")):
        envs.check_differentiable(model, "pendulum.xml")


def test_unrolled_substeps_step_like_the_loop():
    looped = envs.make("pendulum_swingup")  # 5 physics substeps per control step
    unrolled = make_env(EnvConfig(name="pendulum_swingup", unroll_substeps=True))
    assert unrolled.unroll_substeps and not looped.unroll_substeps
    state = jax.jit(looped.reset)(jax.random.key(0))
    action = jnp.array([0.7])
    want, got = (jax.jit(env.step)(state, action).pipeline_state for env in (looped, unrolled))
    np.testing.assert_allclose(got.qpos, want.qpos, rtol=1e-6)
    np.testing.assert_allclose(got.qvel, want.qvel, rtol=1e-5)
