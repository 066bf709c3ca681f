"""Every private hook of envs/private_apis.py still has its effect with the pinned library versions."""

import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

import envs
from envs import private_apis
from envs.physics import mjx_math

BALL = "tests/assets/ball.xml"


@pytest.fixture
def counted(monkeypatch):
    """Calls of each contraction of `mjx_math.REPLACEMENTS`, counted while traced."""
    calls = dict.fromkeys(mjx_math.REPLACEMENTS, 0)

    def counting(name, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    for name, fn in list(mjx_math.REPLACEMENTS.items()):
        monkeypatch.setitem(mjx_math.REPLACEMENTS, name, counting(name, fn))
    return calls


def ball():
    model = mujoco.MjModel.from_xml_path(BALL)
    return mjx.put_model(model, impl="jax"), mjx.make_data(model, impl="jax")


def test_mjx_step_calls_the_contractions_only_inside_the_block(counted):
    model, data = ball()
    # a new function each time: make_jaxpr caches the trace of a function it has seen
    jax.make_jaxpr(lambda m, d: mjx.step(m, d))(model, data)
    assert sum(counted.values()) == 0  # MJX's own math outside
    with mjx_math.contractions():
        jax.make_jaxpr(lambda m, d: mjx.step(m, d))(model, data)
    # a free body: its orientation is integrated with quaternion products and rotated
    assert counted["quat_mul"] > 0 and counted["quat_to_mat"] + counted["rotate"] > 0, counted


def test_an_env_step_is_traced_with_the_contractions(counted):
    env = envs.make("pendulum_swingup")
    state = jax.jit(env.reset)(jax.random.key(0))
    jax.make_jaxpr(env.step)(state, jnp.zeros(env.action_size))
    assert sum(counted.values()) > 0, counted


def test_contact_distances_are_the_signed_gap_of_the_ball_and_the_floor():
    model, data = ball()
    forward = jax.jit(mjx.forward)  # jitted: op by op, MJX compiles each operation on its own
    for height, gap in [(0.2, 0.1), (0.05, -0.05)]:  # ball radius 0.1 over the plane z = 0
        qpos = data.qpos.at[2].set(height)
        dist = private_apis.contact_distances(forward(model, data.replace(qpos=qpos)))
        np.testing.assert_allclose(dist, [gap], atol=1e-6)


def test_in_contact_reads_the_penetration_of_an_mjx_state():
    from shac.core.rollout import in_contact

    model, data = ball()
    forward = jax.jit(mjx.forward)
    touching = [bool(in_contact(forward(model, data.replace(qpos=data.qpos.at[2].set(z))))) for z in (0.2, 0.05)]
    assert touching == [False, True]
    assert not in_contact((jnp.zeros(()), jnp.zeros(())))  # not an mjx.Data: no contacts


def test_brax_apg_hands_its_parameters_to_the_callback_where_it_would_evaluate():
    from brax.training.agents.apg import train as apg_train

    from tests.toy_env import LineEnv

    seen = []
    with private_apis.brax_apg_evaluations(lambda params, make_policy, metrics: seen.append(make_policy)):
        apg_train.train(
            environment=LineEnv(episode_length=4),
            episode_length=4,
            policy_updates=1,
            horizon_length=2,
            num_envs=2,
            num_evals=2,
            seed=0,
        )
    assert len(seen) == 2 and all(callable(make_policy) for make_policy in seen)


def test_holding_the_line_search_step_turns_mjx_nan_jacobians_finite_and_keeps_the_step():
    model = mjx.put_model(mujoco.MjModel.from_xml_path("tests/assets/cart_pole_limited.xml"), impl="jax")

    def step(qpos, qvel):
        data = mjx.make_data(model).replace(qpos=qpos, qvel=qvel)
        return mjx.step(model, data).qvel

    keys = jax.random.split(jax.random.key(0), 3)
    n = 1024  # random states well inside the slider's range: its limit row is never active
    qpos = jnp.stack([jax.random.uniform(keys[0], (n,), minval=-0.5, maxval=0.5), jax.random.uniform(keys[1], (n,))], 1)
    qpos = qpos.at[:, 1].multiply(2 * jnp.pi)
    qvel = 0.1 * jax.random.normal(keys[2], (n, 2))

    def nan_jacobians():
        jacobians = jax.jit(jax.vmap(jax.jacrev(step, argnums=(0, 1))))(qpos, qvel)
        finite = jnp.stack([jnp.isfinite(j).all(axis=(1, 2)) for j in jacobians]).all(axis=0)
        return int((~finite).sum()), jax.jit(jax.vmap(step))(qpos, qvel)

    nan_without, stepped = nan_jacobians()
    with private_apis.mjx_linesearch_step_held():
        nan_with, stepped_held = nan_jacobians()
    assert nan_without > 0  # MJX's own derivative (about 1% of states with mujoco-mjx 3.17.0)
    assert nan_with == 0
    np.testing.assert_allclose(stepped_held, stepped, rtol=1e-5, atol=1e-7)
