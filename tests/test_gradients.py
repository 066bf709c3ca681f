"""Gradients through every registered environment: 32-step gradients under each contact smoothing
mode, finite, nonzero and raising the return when followed, and the pendulum's gradient against
finite differences."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import envs
from shac.core.rollout import window_rewards
from tests import env_runs

CONTACT_TASKS = [
    name
    for name in envs.names()
    if not env_runs.make(name).mj_model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT
]
# A 32-step gradient through contacts compiles for 1-3 minutes per task and mode on a 2-core
# CPU. So that the default suite stays within CI's budget, the heaviest compiles run under
# `pytest -m slow`: the humanoid, and smoothing on every contact task but the hopper.
SLOW_GRADIENTS = {("humanoid", "none")} | {
    (name, mode) for name in ("half_cheetah", "ant", "humanoid", "arm_reach") for mode in ("soft", "straight_through")
}
GRADIENT_CASES = [(name, "none") for name in envs.names()] + [
    (name, mode) for mode in ("soft", "straight_through") for name in CONTACT_TASKS
]


@pytest.mark.parametrize(
    ("name", "smoothing"),
    [pytest.param(*case, marks=[pytest.mark.slow] if case in SLOW_GRADIENTS else []) for case in GRADIENT_CASES],
)
def test_gradient_of_32_step_return_is_finite_nonzero_and_raises_the_return(name, smoothing):
    env = env_runs.make(name, smoothing)
    shape = (env_runs.GRADIENT_STEPS, env_runs.N_ENVS, env.action_size)
    actions = 0.3 * jax.random.normal(jax.random.key(2), shape)
    start = env_runs.initial_states(name, seed=1)
    value_and_grad = env_runs.return_gradient(name, smoothing)
    value, grads = value_and_grad(actions, start)
    assert grads.shape == shape
    assert np.isfinite(np.asarray(grads)).all()
    assert float(jnp.abs(grads).max()) > 0.0
    # a small step along the gradient raises the return: it is the derivative of this rollout
    better, _ = value_and_grad(actions + 0.01 * grads / jnp.linalg.norm(grads), start)
    assert float(better) > float(value)


def test_pendulum_gradient_matches_central_finite_differences():
    # float64 so the finite differences are accurate; 20 control steps from a fixed state.
    with jax.enable_x64(True):
        env = envs.make("pendulum_swingup")
        # jitted: MJX run op by op compiles each of its hundreds of operations on its own
        data = jax.jit(env.data_from_qpos_qvel)(jnp.array([2.5]), jnp.array([0.3]))
        start = jax.jit(env.reset)(jax.random.key(0)).replace(pipeline_state=data)

        def total_return(actions):
            return window_rewards(env.step, start, actions).sum()

        actions = 0.5 * jnp.sin(jnp.arange(20.0))[:, None]
        f = jax.jit(total_return)
        grad = np.asarray(jax.jit(jax.grad(total_return))(actions))
        eps = 1e-5
        for direction_seed in range(3):
            v = jax.random.normal(jax.random.key(direction_seed), actions.shape, jnp.float64)
            fd = (float(f(actions + eps * v)) - float(f(actions - eps * v))) / (2 * eps)
            assert np.sum(grad * np.asarray(v)) == pytest.approx(fd, rel=1e-6)
