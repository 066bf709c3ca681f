"""Contact smoothing modes and state-gradient clipping on a ball bouncing off the floor."""

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

from envs.physics.smoothing import Smoothing, clip_gradient, scale_gradient

MODEL = mjx.put_model(mujoco.MjModel.from_xml_path(str(Path(__file__).parent / "assets" / "ball.xml")), impl="jax")
SOFT = dict(timeconst=0.1, dampratio=1.0)


def softened(model: mjx.Model) -> mjx.Model:
    """`model` softened with `SOFT`, placed like `mjx.put_model`'s arrays (committed to their device), so
    that a function jitted on `model` runs on it without compiling again."""
    return jax.device_put(Smoothing(mode="soft", **SOFT).soften(model), model.geom_solref.sharding)


def height_after_impact(smoothing: Smoothing, model: mjx.Model, down_speed: jax.Array) -> jax.Array:
    """Ball height after 40 steps (0.2 s), dropped from 0.15 m onto the floor at `down_speed`."""
    data = mjx.make_data(MODEL)
    data = data.replace(qpos=data.qpos.at[2].set(0.15), qvel=data.qvel.at[2].set(-down_speed))
    data = jax.lax.fori_loop(0, 40, lambda _, d: smoothing.step(model, d), data)
    return data.qpos[2]


@pytest.fixture(scope="module")
def values_and_grads():
    # `soft` steps the softened model physically, so one compiled function (the model is an
    # argument) serves `none` and `soft`
    physical = jax.jit(jax.value_and_grad(lambda v, model: height_after_impact(Smoothing(), model, v)))
    straight = jax.jit(
        jax.value_and_grad(lambda v: height_after_impact(Smoothing(mode="straight_through", **SOFT), MODEL, v))
    )
    results = {
        "none": physical(1.0, MODEL),
        "soft": physical(1.0, softened(MODEL)),
        "straight_through": straight(1.0),
    }
    return {mode: tuple(float(x) for x in pair) for mode, pair in results.items()}


def test_soften_sets_contact_parameters():
    soft = Smoothing(mode="soft", timeconst=0.1, dampratio=0.5, margin=0.01).soften(MODEL)
    np.testing.assert_allclose(soft.geom_solref, [[0.1, 0.5], [0.1, 0.5]])
    np.testing.assert_allclose(soft.geom_margin, np.asarray(MODEL.geom_margin) + 0.01)


def test_soft_contacts_change_the_motion(values_and_grads):
    assert values_and_grads["soft"][0] != pytest.approx(values_and_grads["none"][0], abs=1e-4)


def test_straight_through_has_the_physical_value_and_a_usable_gradient(values_and_grads):
    value, grad = values_and_grads["straight_through"]
    assert value == pytest.approx(values_and_grads["none"][0], abs=1e-6)
    assert all(np.isfinite(v) for pair in values_and_grads.values() for v in pair)
    # the hard contact all but erases the dependence on the impact speed; the softened
    # gradient (taken along the physical trajectory) keeps it
    assert abs(values_and_grads["none"][1]) < 0.01 < abs(grad)


def test_one_straight_through_step_has_exactly_the_soft_derivative():
    data = mjx.make_data(MODEL)
    data = data.replace(qpos=data.qpos.at[2].set(0.099), qvel=data.qvel.at[2].set(-1.0))  # touching the floor

    def vertical_speed(smoothing, model, v):
        return smoothing.step(model, data.replace(qvel=data.qvel.at[2].set(v))).qvel[2]

    physical = jax.jit(jax.value_and_grad(lambda v, model: vertical_speed(Smoothing(), model, v)))
    straight = jax.jit(jax.value_and_grad(lambda v: vertical_speed(Smoothing("straight_through", **SOFT), MODEL, v)))
    value, grad = straight(-1.0)
    assert float(grad) == pytest.approx(float(physical(-1.0, softened(MODEL))[1]), rel=1e-5)
    assert float(value) == pytest.approx(float(physical(-1.0, MODEL)[0]), abs=1e-6)


def test_state_gradient_clip_bounds_the_norm():
    data = mjx.make_data(MODEL).replace(qvel=jnp.ones(6))

    def energy(qvel, max_norm):
        return jnp.sum(clip_gradient(data.replace(qvel=qvel), max_norm).qvel ** 2)

    qvel = 3.0 * jnp.ones(6)
    np.testing.assert_allclose(jax.grad(energy)(qvel, 1e6), 2 * qvel)  # unclipped: 2 qvel, norm 14.7
    assert float(jnp.linalg.norm(jax.grad(energy)(qvel, 0.5))) == pytest.approx(0.5, rel=1e-5)


def test_state_gradient_decay_scales_the_cotangent():
    data = mjx.make_data(MODEL)

    def energy(qvel, factor):
        return jnp.sum(scale_gradient(data.replace(qvel=qvel), factor).qvel ** 2)

    qvel = jnp.arange(6.0)
    # d/dqvel sum(qvel^2) = 2 qvel, scaled by the factor; the value is untouched
    np.testing.assert_allclose(jax.grad(energy)(qvel, 0.25), 0.5 * qvel)
    assert float(energy(qvel, 0.25)) == pytest.approx(55.0)  # 0+1+4+9+16+25


def test_bad_smoothing_values_are_named():
    with pytest.raises(ValueError, match=re.escape("unknown smoothing mode 'smooth'; available: none, soft")):
        Smoothing(mode="smooth")
    with pytest.raises(ValueError, match="timeconst and dampratio must be > 0"):
        Smoothing(mode="soft", timeconst=0.0)
    with pytest.raises(ValueError, match=re.escape("state_grad_decay must be in [0, 1], got 1.5")):
        Smoothing(state_grad_decay=1.5)


def test_holding_the_line_search_gives_a_finite_derivative_in_every_mode():
    # a cart-pole whose slider limit is never active: MJX's own derivative of the line search is NaN in
    # some of these states, which tests/test_private_apis.py asserts for the same states
    model = mjx.put_model(
        mujoco.MjModel.from_xml_path(str(Path(__file__).parent / "assets" / "cart_pole_limited.xml")), impl="jax"
    )
    keys = jax.random.split(jax.random.key(0), 3)
    n = 1024
    qpos = jnp.stack([jax.random.uniform(keys[0], (n,), minval=-0.5, maxval=0.5), jax.random.uniform(keys[1], (n,))], 1)
    qpos = qpos.at[:, 1].multiply(2 * jnp.pi)
    qvel = 0.1 * jax.random.normal(keys[2], (n, 2))

    def step_and_jacobian(smoothing):
        def step(model, qpos, qvel):
            return smoothing.step(model, mjx.make_data(model).replace(qpos=qpos, qvel=qvel)).qvel

        jacobian = jax.jacrev(step, argnums=2)
        return jax.jit(jax.vmap(lambda m, q, v: (step(m, q, v), jacobian(m, q, v)), in_axes=(None, 0, 0)))

    held = step_and_jacobian(Smoothing(hold_linesearch=True))
    physical, physical_jacobian = held(model, qpos, qvel)
    soft_jacobian = held(softened(model), qpos, qvel)[1]
    straight, straight_jacobian = step_and_jacobian(Smoothing("straight_through", hold_linesearch=True, **SOFT))(
        model, qpos, qvel
    )
    assert np.isfinite(physical_jacobian).all() and np.isfinite(soft_jacobian).all()
    # straight-through: the physical step, the softened model's derivative, held in its backward pass too
    np.testing.assert_allclose(straight, physical, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(straight_jacobian, soft_jacobian, rtol=1e-5, atol=1e-6)
