"""Every registered environment: batched reset and rollouts, shapes, finite values and gradients."""

import re

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from brax.envs.wrappers import training as brax_training

import envs
from envs.base import ASSETS
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


CONTACT_TASKS = [
    name
    for name in envs.names()
    if not env_runs.make(name).mj_model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT
]
# A 32-step gradient through contacts compiles for 1-3 minutes per task and mode on a 2-core
# CPU. So that the default suite stays within CI's budget, the heaviest compiles run under
# `pytest -m slow`: the humanoid, and smoothing on every contact task but the hopper.
SLOW_GRADIENTS = {("humanoid", "none")} | {
    (name, mode) for name in ("half_cheetah", "ant", "humanoid") for mode in ("soft", "straight_through")
}
GRADIENT_CASES = [(name, "none") for name in envs.names()] + [
    (name, mode) for mode in ("soft", "straight_through") for name in CONTACT_TASKS
]


@pytest.mark.parametrize(
    ("name", "smoothing"),
    [pytest.param(*case, marks=[pytest.mark.slow] if case in SLOW_GRADIENTS else []) for case in GRADIENT_CASES],
)
def test_gradient_of_32_step_return_is_finite_and_nonzero(name, smoothing):
    env = env_runs.make(name, smoothing)
    shape = (env_runs.GRADIENT_STEPS, env_runs.N_ENVS, env.action_size)
    actions = 0.3 * jax.random.normal(jax.random.key(2), shape)
    grads = env_runs.return_gradient(name, smoothing)(actions, env_runs.initial_states(name, seed=1))
    assert grads.shape == shape
    assert np.isfinite(np.asarray(grads)).all()
    assert float(jnp.abs(grads).max()) > 0.0


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
    available = "ant, cartpole_swingup, half_cheetah, hopper, humanoid, pendulum_swingup"
    with pytest.raises(ValueError, match=f"unknown env 'antt'; available: {available}"):
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
        # jitted: MJX run op by op compiles each of its hundreds of operations on its own
        data = jax.jit(env.data_from_qpos_qvel)(jnp.array([2.5]), jnp.array([0.3]))
        start = jax.jit(env.reset)(jax.random.key(0)).replace(pipeline_state=data)

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
