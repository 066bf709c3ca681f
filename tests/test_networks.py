"""The policy's squashed log-density, the state-dependent standard deviation and the critic ensemble."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shac.core.networks import (
    LOG_STD_MAX,
    LOG_STD_MIN,
    Actor,
    Critic,
    critic_ensemble,
    sample_action,
    squashed_log_prob,
)


def test_squashed_log_prob_by_hand():
    # u = 0, noise = 0, log_std = 0: log N(0; 0, 1) = -log(2 pi) / 2 = -0.918939, Jacobian log(1 - 0) = 0
    zero = jnp.zeros(2)
    assert squashed_log_prob(zero, zero, zero) == pytest.approx(-2 * 0.918939, abs=1e-5)
    # u = 1 (mean 0, std 1, noise 1): -1/2 - 0.918939 = -1.418939; log(1 - tanh(1)^2) = log(0.419974) = -0.867562
    # log pi = -1.418939 + 0.867562 = -0.551377
    one = jnp.ones(1)
    assert squashed_log_prob(one, one, jnp.zeros(1)) == pytest.approx(-0.551377, abs=1e-5)


def test_squashed_log_prob_matches_the_change_of_variables_in_float64():
    rng = np.random.default_rng(0)
    mean, log_std, noise = rng.normal(size=(3, 64, 4)) * np.array([2.0, 0.5, 1.0])[:, None, None]  # |u| < 15
    u = mean + np.exp(log_std) * noise
    gaussian = -0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi)
    expected = np.sum(gaussian - np.log(1.0 - np.tanh(u) ** 2), axis=-1)
    actual = squashed_log_prob(jnp.asarray(u, jnp.float32), jnp.asarray(noise), jnp.asarray(log_std))
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4)


def test_squashed_log_prob_stays_finite_where_tanh_saturates():
    # float32 tanh(20) rounds to 1, so log(1 - tanh(u)^2) = -inf; the stable form gives
    # 2 (log 2 - 20 - softplus(-40)) = -38.6137, so log pi = -0.918939 + 38.6137 (noise 0, log_std 0)
    u = jnp.array([20.0])
    with np.errstate(divide="ignore"):
        assert not np.isfinite(np.log(1.0 - np.tanh(np.float32(20.0)) ** 2))
    value = squashed_log_prob(u, jnp.zeros(1), jnp.zeros(1))
    assert value == pytest.approx(-0.918939 + 38.613706, rel=1e-5)
    grad = jax.grad(lambda x: squashed_log_prob(x, jnp.zeros(1), jnp.zeros(1)).sum())(u)
    assert np.isfinite(grad).all()


def test_sample_action_returns_the_log_prob_of_its_own_sample():
    mean, log_std = jnp.array([[0.3, -2.0]]), jnp.array([[-1.0, 0.5]])
    key = jax.random.key(3)
    action, log_prob = sample_action(mean, log_std, key)
    noise = jax.random.normal(key, mean.shape)
    np.testing.assert_allclose(action, jnp.tanh(mean + jnp.exp(log_std) * noise))
    np.testing.assert_allclose(log_prob, squashed_log_prob(mean + jnp.exp(log_std) * noise, noise, log_std))


def test_state_dependent_std_depends_on_the_state_and_stays_in_range():
    actor = Actor(hidden=(16,), action_size=3, state_dependent_std=True, activation="silu")
    obs = 100.0 * jax.random.normal(jax.random.key(0), (32, 5))
    params = actor.init(jax.random.key(1), obs[0])
    mean, log_std = actor.apply(params, obs)
    assert mean.shape == log_std.shape == (32, 3)
    assert (log_std >= LOG_STD_MIN).all() and (log_std <= LOG_STD_MAX).all()
    assert float(jnp.std(log_std[:, 0])) > 0.0
    assert "log_std" not in params["params"]


@pytest.mark.parametrize("size", [2, 4])
def test_a_critic_ensemble_is_differently_initialised_critics(size):
    obs = jax.random.normal(jax.random.key(0), (7, 5))
    ensemble = critic_ensemble(size)(hidden=(16,))
    params = ensemble.init(jax.random.key(1), obs)
    values = ensemble.apply(params, obs)
    assert values.shape == (size, 7)
    assert all(not np.allclose(values[i], values[j]) for i in range(size) for j in range(i))
    # each slice of the stacked parameters is a plain critic
    for i in range(size):
        one = jax.tree.map(lambda x, i=i: x[i], params)
        np.testing.assert_allclose(Critic(hidden=(16,)).apply(one, obs), values[i], rtol=1e-6)
