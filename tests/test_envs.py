"""Every registered environment: jitted reset/step, shapes, finite values and gradients."""

import functools
import re

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from brax.envs.wrappers import training as brax_training

import envs
from envs.base import ASSETS


@functools.cache
def make(name):
    return envs.make(name)


@pytest.mark.parametrize("name", envs.names())
def test_reset_and_step_shapes_and_finite(name):
    env = make(name)
    state = jax.jit(env.reset)(jax.random.key(0))
    assert state.obs.shape == (env.observation_size,)
    action = jnp.linspace(-1.0, 1.0, env.action_size)
    state = jax.jit(env.step)(state, action)
    assert state.obs.shape == (env.observation_size,)
    for value in (state.reward, state.done, state.terminated, state.truncated):
        assert value.shape == ()
    assert np.isfinite(np.asarray(state.obs)).all() and np.isfinite(float(state.reward))
    assert float(state.pipeline_state.time) == pytest.approx(env.ctrl_dt, rel=1e-5)


@pytest.mark.parametrize("name", envs.names())
def test_gradient_of_16_step_return_is_finite_and_nonzero(name):
    env = make(name)
    states = jax.vmap(env.reset)(jax.random.split(jax.random.key(1), 4))

    def total_return(actions):
        def step(state, action):
            state = jax.vmap(env.step)(state, action)
            return state, state.reward

        _, rewards = jax.lax.scan(step, states, actions)
        return rewards.sum()

    actions = 0.3 * jax.random.normal(jax.random.key(2), (16, 4, env.action_size))
    grads = jax.jit(jax.grad(total_return))(actions)
    assert np.isfinite(np.asarray(grads)).all()
    assert float(jnp.abs(grads).max()) > 0.0


@pytest.mark.parametrize("name", envs.names())
def test_time_limit_truncates_without_terminating(name):
    env = envs.make(name, episode_length=5)

    def run(key):
        def step(state, _):
            state = env.step(state, jnp.zeros(env.action_size))
            return state, (state.done, state.truncated, state.terminated)

        return jax.lax.scan(step, env.reset(key), None, length=5)[1]

    done, truncated, terminated = jax.jit(run)(jax.random.key(0))
    np.testing.assert_array_equal(done, [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(truncated, [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(terminated, 0)


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
    with pytest.raises(ValueError, match="unknown env 'antt'; available: cartpole_swingup, pendulum_swingup"):
        envs.make("antt")


def test_bad_override_is_named():
    with pytest.raises(ValueError, match=re.escape("bad overrides {'legs': 3} for env 'pendulum_swingup'")):
        envs.make("pendulum_swingup", legs=3)


def test_solver_with_several_iterations_is_rejected():
    xml = (ASSETS / "pendulum.xml").read_text().replace('iterations="1"', 'iterations="50"')
    model = mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(envs.NotDifferentiableError, match=re.escape("opt.iterations is 50, must be 1")):
        envs.check_differentiable(model, "pendulum.xml")


def test_pendulum_gradient_matches_central_finite_differences():
    # float64 so the finite differences are accurate; 20 control steps from a fixed state.
    with jax.enable_x64(True):
        env = envs.make("pendulum_swingup")
        data = env.data_from_qpos_qvel(jnp.array([2.5]), jnp.array([0.3]))
        start = env.reset(jax.random.key(0)).replace(pipeline_state=data)

        def total_return(actions):
            def step(state, action):
                state = env.step(state, action)
                return state, state.reward

            return jax.lax.scan(step, start, actions)[1].sum()

        actions = 0.5 * jnp.sin(jnp.arange(20.0))[:, None]
        f = jax.jit(total_return)
        grad = np.asarray(jax.jit(jax.grad(total_return))(actions))
        eps = 1e-5
        for direction_seed in range(3):
            v = jax.random.normal(jax.random.key(direction_seed), actions.shape, jnp.float64)
            fd = (float(f(actions + eps * v)) - float(f(actions - eps * v))) / (2 * eps)
            assert np.sum(grad * np.asarray(v)) == pytest.approx(fd, rel=1e-6)
