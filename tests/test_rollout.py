"""Bootstrap placement, resets and gradient flow of the differentiable rollout (on a toy env)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shac.core import losses
from shac.core.normalizer import STD_EPS, RunningStatistics
from shac.core.rollout import rollout, state_gradient_growth, window_rewards, zero_probes
from tests.toy_env import LineEnv

HALF = float(np.arctanh(0.5))  # policy mean whose squashed action is 0.5


def constant_policy(mean):
    """Deterministic in practice: log-std -50 makes the action tanh(mean)."""
    return lambda obs: (jnp.full((obs.shape[0], 1), mean), jnp.full((obs.shape[0], 1), -50.0))


def value(obs):
    """V(obs) = 100 + 10 x + steps: tells which observation it saw."""
    return 100.0 + 10.0 * obs[:, 0] + obs[:, 1]


IDENTITY = RunningStatistics(count=jnp.array(1.0), mean=jnp.zeros(2), var=jnp.full(2, 1.0 - STD_EPS))


def run(env, horizon=4, normalizer=IDENTITY, policy_mean=HALF, value_fn=value, state_grad_decay=1.0):
    state = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 1))
    resets = jax.vmap(env.reset)(jax.random.split(jax.random.key(1), 1))
    return rollout(
        env,
        constant_policy(policy_mean),
        value_fn,
        normalizer,
        state,
        resets,
        jax.random.key(2),
        horizon,
        state_grad_decay=state_grad_decay,
    )


def test_truncation_bootstraps_and_window_end_uses_last_state():
    # x rises by 0.5 a step; the episode is truncated after step 3 (t = 2), then restarts at 0.
    final_state, window = run(LineEnv(episode_length=3))
    np.testing.assert_allclose(window.rewards[:, 0], [0.5, 1.0, 1.5, 0.5], rtol=1e-5)
    np.testing.assert_array_equal(window.dones[:, 0], [0, 0, 1, 0])
    np.testing.assert_array_equal(window.truncated[:, 0], [0, 0, 1, 0])
    # t = 2: truncated, so V'(obs before the reset) = 100 + 10 * 1.5 + 3 = 118.
    # t = 3: window end, V'(s_h) = V'(x = 0.5, steps = 1) = 106, not V'(s_0) = 100.
    np.testing.assert_allclose(window.next_values[:, 0], [106.0, 112.0, 118.0, 106.0], rtol=1e-5)
    np.testing.assert_allclose(final_state.obs[0], [0.5, 1.0], rtol=1e-5)


def test_termination_does_not_bootstrap():
    # x = 1.5 > 1.2 at t = 2 ends the episode early: no value after it.
    _, window = run(LineEnv(episode_length=10, terminate_above=1.2))
    np.testing.assert_array_equal(window.terminated[:, 0], [0, 0, 1, 0])
    np.testing.assert_allclose(window.next_values[:, 0], [106.0, 112.0, 0.0, 106.0], rtol=1e-5)


def test_nonfinite_state_is_reset_with_zero_reward_and_value():
    # The second step of each episode is non-finite (t = 1); the env restarts at t = 2.
    _, window = run(LineEnv(episode_length=10, nan_at_step=2), horizon=3)
    np.testing.assert_array_equal(window.nonfinite[:, 0], [0, 1, 0])
    np.testing.assert_array_equal(window.dones[:, 0], [0, 1, 0])
    np.testing.assert_allclose(window.rewards[:, 0], [0.5, 0.0, 0.5], rtol=1e-5)
    np.testing.assert_allclose(window.next_values[:, 0], [106.0, 0.0, 106.0], rtol=1e-5)


def test_nan_reward_with_a_finite_observation_is_reset_like_a_nonfinite_state():
    # Step 2 of each episode (t = 1) has a finite observation [1.0, 2] but a NaN reward.
    _, window = run(LineEnv(episode_length=10, nan_reward_at_step=2), horizon=3)
    np.testing.assert_array_equal(window.nonfinite[:, 0], [0, 1, 0])
    np.testing.assert_array_equal(window.dones[:, 0], [0, 1, 0])
    np.testing.assert_array_equal(window.too_fast[:, 0], [0, 0, 0])
    # the NaN becomes 0, no value is bootstrapped from it, and the env restarts at x = 0 (t = 2: x = 0.5)
    np.testing.assert_allclose(window.rewards[:, 0], [0.5, 0.0, 0.5], rtol=1e-5)
    np.testing.assert_allclose(window.next_values[:, 0], [106.0, 0.0, 106.0], rtol=1e-5)


def test_a_state_past_the_velocity_bound_is_reset_and_counted_as_nonfinite():
    # x = 0.5, 1.0, 1.5, ...: the bound 1.2 is passed at t = 2, a finite state handled as a non-finite one.
    _, window = run(LineEnv(episode_length=10, max_velocity=1.2), horizon=4)
    np.testing.assert_array_equal(window.too_fast[:, 0], [0, 0, 1, 0])
    np.testing.assert_array_equal(window.nonfinite[:, 0], [0, 0, 1, 0])
    np.testing.assert_array_equal(window.terminated[:, 0], [0, 0, 0, 0])
    np.testing.assert_allclose(window.rewards[:, 0], [0.5, 1.0, 0.0, 0.5], rtol=1e-5)
    np.testing.assert_allclose(window.next_values[:, 0], [106.0, 112.0, 0.0, 106.0], rtol=1e-5)
    assert np.isfinite(np.asarray(window.raw_obs)).all()


def test_normalizer_is_frozen_within_the_window():
    stats = RunningStatistics(count=jnp.array(5.0), mean=jnp.array([1.0, 2.0]), var=jnp.array([4.0, 9.0]))
    _, window = run(LineEnv(episode_length=3), normalizer=stats)
    np.testing.assert_allclose(window.obs, stats.normalize(window.raw_obs), rtol=1e-6)


@pytest.mark.parametrize("value_scale", [0.0, 3.0])
@pytest.mark.parametrize("decay", [1.0, 0.5])
def test_actor_gradient_flows_through_dynamics_and_bootstrap(value_scale, decay):
    # h = 2, gamma = 1, x_1 = a_0, x_2 = a_0 + a_1 with a = tanh(c), V'(obs) = k x:
    # loss = -(x_1 + x_2 + k x_2) / 2. a_1 moves r_1 and V'(x_2) directly (1 + k); a_0 moves r_0
    # directly (1) and r_1 and V'(x_2) through the state x_1, whose gradient the decay d scales:
    # d (1 + k). So dloss/dc = -(1 + d (1 + k) + 1 + k) / 2 * (1 - tanh(c)^2); d = 1: -(3 + 2k) / 2 * ...
    env = LineEnv(episode_length=10)

    def value_fn(obs):
        return value_scale * obs[:, 0]

    def loss(c):
        _, window = run(env, horizon=2, policy_mean=c, value_fn=value_fn, state_grad_decay=decay)
        return losses.actor_loss(window.rewards, window.next_values, window.dones, 1.0), window

    c = 0.3
    expected = -(1.0 + decay * (1.0 + value_scale) + 1.0 + value_scale) / 2.0 * (1.0 - np.tanh(c) ** 2)
    (_, window), gradient = jax.value_and_grad(loss, has_aux=True)(c)
    assert float(gradient) == pytest.approx(expected, rel=1e-5)
    _, exact = run(env, horizon=2, policy_mean=c, value_fn=value_fn)
    jax.tree.map(np.testing.assert_array_equal, window, exact)  # the decay leaves every value as it was


@pytest.mark.parametrize("remat_every", [0, 2])
def test_state_probes_give_the_gradient_flowing_back_through_each_step(remat_every):
    # LineEnv without resets, constant policy, V'(obs) = 10 x, gamma = 1, h = 4:
    # loss = sum_t r_t + V'(x_4) with r_t = x_{t+1} = x_t + a, so dloss/dx_t = (4 - t) + 10
    # (every later reward and the bootstrap move one for one with x_t): 14, 13, 12, 11; steps: 0.
    env = LineEnv(episode_length=10)
    state = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 1))
    probes = zero_probes(state.pipeline_state, 4)

    def loss(probes):
        _, window = rollout(
            env,
            constant_policy(HALF),
            lambda obs: 10.0 * obs[:, 0],
            IDENTITY,
            state,
            state,
            jax.random.key(2),
            4,
            remat_every,
            state_probes=probes,
        )
        return window.rewards.sum() + window.next_values[-1].sum(), window

    (_, window), grads = jax.value_and_grad(loss, has_aux=True)(probes)
    _, plain = run(env, value_fn=lambda obs: 10.0 * obs[:, 0])
    jax.tree.map(np.testing.assert_array_equal, window, plain)  # zero probes change nothing forward
    np.testing.assert_allclose(grads[0][:, 0], [14.0, 13.0, 12.0, 11.0], rtol=1e-5)
    np.testing.assert_allclose(grads[1][:, 0], [0.0, 0.0, 0.0, 0.0], atol=1e-6)
    # per step, the gradient grows (14 / 11) ** (1 / 3) back through the window
    growth = state_gradient_growth(grads, window.active)
    assert float(growth) == pytest.approx((14.0 / 11.0) ** (1.0 / 3.0), rel=1e-5)
    # only the first two steps simulated: (14 / 13) ** 1; one step: undefined, 1.0
    two_steps = jnp.zeros((4, 1)).at[:2].set(1.0)
    assert float(state_gradient_growth(grads, two_steps)) == pytest.approx(14.0 / 13.0, rel=1e-5)
    assert float(state_gradient_growth(grads, two_steps.at[1].set(0.0))) == 1.0


def test_checkpointed_window_has_the_same_values_and_gradient_and_stores_less():
    env = LineEnv(episode_length=3)  # resets inside the window and inside segments

    def loss(c, remat_every, num_envs=1, horizon=6):
        state = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), num_envs))
        _, window = rollout(
            env, constant_policy(c), value, IDENTITY, state, state, jax.random.key(2), horizon, remat_every
        )
        return losses.actor_loss(window.rewards, window.next_values, window.dones, 0.99), window

    plain = jax.value_and_grad(loss, has_aux=True)(0.3, 0)
    checkpointed = jax.value_and_grad(loss, has_aux=True)(0.3, 2)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), plain, checkpointed)

    def backward_temp_bytes(remat_every):
        grad = jax.jit(jax.grad(lambda c: loss(c, remat_every, num_envs=4096, horizon=64)[0]))
        return grad.lower(0.3).compile().memory_analysis().temp_size_in_bytes

    # the window's records (obs, rewards, values: ~10 floats per env step) are kept either way;
    # what goes is the steps' intermediates (measured 7.7 MB against 12.8 MB)
    assert backward_temp_bytes(8) < 0.7 * backward_temp_bytes(0)


@pytest.mark.parametrize("active", [1, 3, 4, 6])
def test_an_adaptive_window_in_segments_is_the_short_window_with_zeros_after_it(active):
    # 6 compiled steps in segments of 2, `active` of them simulated (3: a segment ends inside;
    # 4: on a segment's end): the values and the gradient are the short window's, with or without
    # segments, and every row after the end is zero; resets (episodes of 3) inside the window
    env = LineEnv(episode_length=3)

    def loss(c, horizon, remat_every, active_horizon):
        state = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 2))
        _, window = rollout(
            env,
            constant_policy(c),
            value,
            IDENTITY,
            state,
            state,
            jax.random.key(2),
            horizon,
            remat_every,
            active_horizon,
        )
        return losses.actor_loss(window.rewards, window.next_values, window.dones, 0.99, window.active), window

    short = jax.value_and_grad(loss, has_aux=True)(0.3, active, 0, None)
    for remat_every in (0, 2):
        (value_, window), grad = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=(1, 2))(
            0.3, 6, remat_every, jnp.int32(active)
        )
        (short_value, short_window), short_grad = short
        np.testing.assert_allclose([value_, grad], [short_value, short_grad], rtol=1e-6)
        for name, rows in vars(window).items():
            for got, want in zip(jax.tree.leaves(rows), jax.tree.leaves(getattr(short_window, name)), strict=True):
                np.testing.assert_allclose(got[:active], want, rtol=1e-6, err_msg=name)
                np.testing.assert_array_equal(got[active:], 0.0, err_msg=name)


def test_window_rewards_match_a_plain_loop():
    # LineEnv: x' = x + a, reward x'; from x = 1 under actions 1, 2, -0.5 the rewards are 2, 4, 3.5
    env = LineEnv(episode_length=10, start=1.0)
    start = env.reset(jax.random.key(0))
    actions = jnp.array([[1.0], [2.0], [-0.5]])
    np.testing.assert_allclose(window_rewards(env.step, start, actions), [2.0, 4.0, 3.5])
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), start)
    rewards = window_rewards(jax.vmap(env.step), batch, jnp.stack([actions, 2 * actions], axis=1))
    np.testing.assert_allclose(rewards, [[2.0, 3.0], [4.0, 7.0], [3.5, 6.0]])  # second env: 1+2, 3+4, 7-1
