"""The actor loss, critic targets and losses (SHAC's, AHAC's masks, SAPO's entropy terms):
hand-derived numbers and plain-Python references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shac.core import losses


def test_actor_loss_by_hand():
    # gamma = 0.5, one env, h = 3, done at t = 1 (and, forced, at t = 2):
    # segment 1 (t = 0, 1): 1 + 0.5 * 2 + 0.5^2 * V'(s_2) = 1 + 1 + 0.25 * 20 = 7
    # segment 2 (t = 2):    3 + 0.5 * V'(s_3)            = 3 + 0.5 * 30      = 18
    # loss = -(7 + 18) / (N * h) = -25 / 3
    rewards = np.array([[1.0], [2.0], [3.0]])
    next_values = np.array([[10.0], [20.0], [30.0]])
    dones = np.array([[0.0], [1.0], [0.0]])
    assert losses.actor_loss(rewards, next_values, dones, 0.5) == pytest.approx(-25.0 / 3.0)


def test_actor_loss_window_end_bootstraps_every_env():
    # No dones: each env contributes r_0 + g r_1 + g^2 V'(s_2); gamma = 0.9, h = 2, N = 2.
    # env 0: 1 + 0.9 * 1 + 0.81 * 10 = 10.0; env 1: 0 + 0 + 0.81 * -10 = -8.1
    # loss = -(10.0 - 8.1) / 4 = -0.475
    rewards = np.array([[1.0, 0.0], [1.0, 0.0]])
    next_values = np.array([[99.0, 99.0], [10.0, -10.0]])
    dones = np.zeros((2, 2))
    assert losses.actor_loss(rewards, next_values, dones, 0.9) == pytest.approx(-0.475)


def test_td_lambda_by_hand():
    # gamma = lambda = 0.5, h = 2, one env, last step done (window end):
    # t = 1: target = r_1 + gamma V'_2 = 2 + 0.5 * 8 = 6
    # t = 0: G1 = r_0 + gamma V'_1 = 1 + 0.5 * 4 = 3; G2 = 1 + 0.5 * 2 + 0.25 * 8 = 4
    #        target = (1 - lambda) G1 + lambda G2 = 0.5 * 3 + 0.5 * 4 = 3.5
    rewards = np.array([[1.0], [2.0]])
    next_values = np.array([[4.0], [8.0]])
    targets = losses.td_lambda_targets(rewards, next_values, np.zeros((2, 1)), 0.5, 0.5)
    np.testing.assert_allclose(np.asarray(targets)[:, 0], [3.5, 6.0], rtol=1e-6)


def test_one_step_targets_by_hand():
    # r + gamma V': 1 + 0.5 * 4 = 3 and 2 + 0.5 * 8 = 6
    targets = losses.one_step_targets(np.array([[1.0], [2.0]]), np.array([[4.0], [8.0]]), 0.5)
    np.testing.assert_allclose(np.asarray(targets)[:, 0], [3.0, 6.0])


def test_critic_loss_by_hand():
    # ((1 - 0)^2 + (2 - 4)^2) / 2 = 2.5
    assert losses.critic_loss(np.array([1.0, 2.0]), np.array([0.0, 4.0])) == pytest.approx(2.5)


def n_step_return(rewards, next_values, gamma, t, k, env):
    """sum_{i<k} gamma^i r_{t+i} + gamma^k V'(s_{t+k}) for one env."""
    return sum(gamma**i * rewards[t + i, env] for i in range(k)) + gamma**k * next_values[t + k - 1, env]


def reference_lambda_returns(rewards, next_values, dones, gamma, lam):
    """Lambda-returns from their definition: a weighted sum of n-step returns within each segment."""
    h, n = rewards.shape
    dones = dones.copy()
    dones[-1] = 1.0
    targets = np.zeros((h, n))
    for env in range(n):
        for t in range(h):
            end = next(e for e in range(t, h) if dones[e, env])
            steps = end - t + 1
            returns = [n_step_return(rewards, next_values, gamma, t, k, env) for k in range(1, steps + 1)]
            partial = sum((1 - lam) * lam ** (k - 1) * returns[k - 1] for k in range(1, steps))
            targets[t, env] = partial + lam ** (steps - 1) * returns[-1]
    return targets


def reference_actor_loss(rewards, next_values, dones, gamma):
    """Sum over segments of discounted rewards plus discounted bootstrap, per env."""
    h, n = rewards.shape
    dones = dones.copy()
    dones[-1] = 1.0
    total = 0.0
    for env in range(n):
        start = 0
        for t in range(h):
            if dones[t, env]:
                k = t - start + 1
                total += sum(gamma**i * rewards[start + i, env] for i in range(k)) + gamma**k * next_values[t, env]
                start = t + 1
    return -total / (n * h)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scans_match_plain_python(seed):
    rng = np.random.default_rng(seed)
    h, n, gamma, lam = 7, 5, 0.9, 0.8
    rewards = rng.normal(size=(h, n))
    next_values = rng.normal(size=(h, n))
    dones = (rng.uniform(size=(h, n)) < 0.25).astype(np.float64)
    np.testing.assert_allclose(
        losses.td_lambda_targets(rewards, next_values, dones, gamma, lam),
        reference_lambda_returns(rewards, next_values, dones, gamma, lam),
        rtol=1e-5,
        atol=1e-5,
    )
    assert float(losses.actor_loss(rewards, next_values, dones, gamma)) == pytest.approx(
        reference_actor_loss(rewards, next_values, dones, gamma), rel=1e-5, abs=1e-6
    )


def test_window_dones_end_each_env_at_its_last_active_step():
    # h = 3, N = 2: env 0 simulates 3 steps (ends at t = 2), env 1 two (ends at t = 1; t = 2 is not a step)
    active = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    dones = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])  # env 0's episode also ended at t = 0
    expected = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_array_equal(losses.window_dones(dones, active), expected)


def test_actor_loss_of_a_shorter_active_window_by_hand():
    # gamma = 0.5, one env, h = 3 of which 2 steps simulated: the window ends (bootstraps) at t = 1.
    # 1 + 0.5 * 2 + 0.5^2 * V'(s_2) = 1 + 1 + 0.25 * 20 = 7; step 2 counts for nothing.
    # loss = -7 / (active steps = 2) = -3.5
    rewards = np.array([[1.0], [2.0], [3.0]])
    next_values = np.array([[10.0], [20.0], [30.0]])
    active = np.array([[1.0], [1.0], [0.0]])
    assert losses.actor_loss(rewards, next_values, np.zeros((3, 1)), 0.5, active) == pytest.approx(-3.5)


def test_td_lambda_of_a_shorter_active_window_by_hand():
    # The two active steps are test_td_lambda_by_hand's window (targets 3.5 and 6); the inactive
    # third step (reward 99, value 99) must not leak into them.
    rewards = np.array([[1.0], [2.0], [99.0]])
    next_values = np.array([[4.0], [8.0], [99.0]])
    active = np.array([[1.0], [1.0], [0.0]])
    targets = losses.td_lambda_targets(rewards, next_values, np.zeros((3, 1)), 0.5, 0.5, active)
    np.testing.assert_allclose(np.asarray(targets)[:2, 0], [3.5, 6.0], rtol=1e-6)


def test_weighted_critic_loss_of_two_critics_by_hand():
    # weights drop the third sample. critic 0: ((1 - 0)^2 + (2 - 4)^2) / 2 = 2.5;
    # critic 1: ((3 - 0)^2 + (4 - 4)^2) / 2 = 4.5; mean over critics (2.5 + 4.5) / 2 = 3.5
    values = np.array([[1.0, 2.0, 50.0], [3.0, 4.0, -50.0]])
    targets, weights = np.array([0.0, 4.0, 0.0]), np.array([1.0, 1.0, 0.0])
    assert losses.critic_loss(values, targets, weights) == pytest.approx(3.5)


def test_soft_rewards_by_hand():
    # r - alpha log pi with alpha = 2: 1 - 2 * (-0.5) = 2 and -2 - 2 * 1 = -4
    rewards, log_probs = jnp.array([1.0, -2.0]), jnp.array([-0.5, 1.0])
    np.testing.assert_allclose(losses.soft_rewards(rewards, log_probs, jnp.array(2.0)), [2.0, -4.0])
    # d/d log_pi = -alpha; no gradient into the temperature
    grad = jax.grad(lambda lp: losses.soft_rewards(rewards, lp, 2.0).sum())(log_probs)
    np.testing.assert_allclose(grad, [-2.0, -2.0])
    assert jax.grad(lambda t: losses.soft_rewards(rewards, log_probs, t).sum())(2.0) == 0.0


def test_temperature_loss_gradient_is_entropy_minus_target():
    # d/d log(alpha) of log(alpha) * (H - target) = H - target: 1.5 - (-0.5) = 2 (descent lowers alpha),
    # -1.0 - (-0.5) = -0.5 (descent raises it), and 0 at H = target
    grad = jax.grad(losses.temperature_loss)
    assert grad(jnp.array(0.3), jnp.array(1.5), -0.5) == pytest.approx(2.0)
    assert grad(jnp.array(0.3), jnp.array(-1.0), -0.5) == pytest.approx(-0.5)
    assert grad(jnp.array(0.3), jnp.array(-0.5), -0.5) == 0.0
