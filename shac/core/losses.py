"""SHAC's actor objective and critic targets over one window (docs/algorithm.md).

All functions take time-major arrays: index [t, n] is step t of env n, t < h.
`next_values[t, n]` is the bootstrap value of the state reached by step t: the
target critic V'(s_{t+1}), already replaced by 0 where that step terminated the
episode or produced a non-finite state.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def window_dones(dones: jax.Array) -> jax.Array:
    """float32 [h, N]: `dones` with the last step of the window marked done for every env."""
    return jnp.asarray(dones).at[-1].set(1.0)


def actor_loss(rewards: jax.Array, next_values: jax.Array, dones: jax.Array, gamma: float) -> jax.Array:
    """The short-horizon actor loss (to minimise).

    Each env's window splits into segments at its done steps; a segment of T
    steps contributes sum_{t<T} gamma^t r_t + gamma^T V'(s_T). The loss is minus
    the sum over all segments of all envs, divided by N * h.

    Args:
        rewards: float32 [h, N].
        next_values: float32 [h, N] bootstrap values (see module docstring).
        dones: float32 [h, N] 1.0 where an episode ended at step t.
        gamma: discount.

    Returns:
        float32 [] loss, differentiable in `rewards` and `next_values`.
    """
    h, n = rewards.shape
    dones = window_dones(dones)

    def step(carry, inputs):
        total, discounted_sum, discount = carry
        reward, next_value, done = inputs
        discounted_sum = discounted_sum + discount * reward
        discount = discount * gamma
        total = total + done * (discounted_sum + discount * next_value)
        discounted_sum = (1.0 - done) * discounted_sum
        discount = jnp.where(done > 0, 1.0, discount)
        return (total, discounted_sum, discount), None

    init = (jnp.zeros(n), jnp.zeros(n), jnp.ones(n))
    (total, _, _), _ = jax.lax.scan(step, init, (rewards, next_values, dones))
    return -total.sum() / (n * h)


def td_lambda_targets(
    rewards: jax.Array, next_values: jax.Array, dones: jax.Array, gamma: float, lam: float
) -> jax.Array:
    """TD(lambda) value targets of SHAC, computed backwards over the window.

    With d = done[t] (the last step counts as done):
        lam_t    = lam_{t+1} * lam * (1 - d) + d
        A_t      = (1 - d) * (lam * gamma * A_{t+1} + gamma * V'_{t+1} + (1 - lam_t) / (1 - lam) * r_t)
        B_t      = gamma * (V'_{t+1} * d + B_{t+1} * (1 - d)) + r_t
        target_t = (1 - lam) * A_t + lam_t * B_t

    Args:
        rewards, next_values, dones: float32 [h, N] (see module docstring).
        gamma: discount. lam: lambda in (0, 1).

    Returns:
        float32 [h, N] targets (no gradient).
    """
    rewards, next_values = jax.lax.stop_gradient((rewards, next_values))
    dones = window_dones(dones)
    n = rewards.shape[1]

    def step(carry, inputs):
        lam_acc, a, b = carry
        reward, next_value, done = inputs
        lam_acc = lam_acc * lam * (1.0 - done) + done
        a = (1.0 - done) * (lam * gamma * a + gamma * next_value + (1.0 - lam_acc) / (1.0 - lam) * reward)
        b = gamma * (next_value * done + b * (1.0 - done)) + reward
        return (lam_acc, a, b), (1.0 - lam) * a + lam_acc * b

    init = (jnp.ones(n), jnp.zeros(n), jnp.zeros(n))
    _, targets = jax.lax.scan(step, init, (rewards, next_values, dones), reverse=True)
    return targets


def one_step_targets(rewards: jax.Array, next_values: jax.Array, gamma: float) -> jax.Array:
    """float32 [h, N] one-step targets r_t + gamma * V'_{t+1} (no gradient)."""
    return jax.lax.stop_gradient(rewards + gamma * next_values)


def critic_loss(values: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean squared error between predicted values and targets (any equal shapes)."""
    return jnp.mean((values - targets) ** 2)
