"""The actor objective and critic targets over one window, and the losses around them
(docs/algorithm.md, docs/algorithms.md).

All functions take time-major arrays: index [t, n] is step t of env n, t < h.
`next_values[t, n]` is the bootstrap value of the state reached by step t: the
target critic V'(s_{t+1}), already replaced by 0 where that step terminated the
episode or produced a non-finite state. `active[t, n]` (default all ones) marks
the steps simulated: an adaptive window (AHAC) simulates only its first steps,
and its last simulated step counts as the window's end.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def window_dones(dones: jax.Array, active: jax.Array | None = None) -> jax.Array:
    """float32 [h, N]: `dones` with each env's last active step marked done, 0 on inactive steps.

    Without `active`, the last step of the window is marked done for every env.
    """
    if active is None:
        return jnp.asarray(dones).at[-1].set(1.0)
    next_active = jnp.concatenate([active[1:], jnp.zeros_like(active[:1])])
    return jnp.maximum(dones, active * (1.0 - next_active)) * active


def actor_loss(
    rewards: jax.Array, next_values: jax.Array, dones: jax.Array, gamma: float, active: jax.Array | None = None
) -> jax.Array:
    """The short-horizon actor loss (to minimise).

    Each env's window splits into segments at its done steps; a segment of T
    steps contributes sum_{t<T} gamma^t r_t + gamma^T V'(s_T). The loss is minus
    the sum over all segments of all envs, divided by the number of active
    steps (N * h for a full window).

    Args:
        rewards: float32 [h, N].
        next_values: float32 [h, N] bootstrap values (see module docstring).
        dones: float32 [h, N] 1.0 where an episode ended at step t.
        gamma: discount.
        active: optional float32 [h, N] (see module docstring).

    Returns:
        float32 [] loss, differentiable in `rewards` and `next_values`.
    """
    h, n = rewards.shape
    dones = window_dones(dones, active)
    count = n * h if active is None else jnp.maximum(jnp.sum(active), 1.0)

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
    return -total.sum() / count


def td_lambda_targets(
    rewards: jax.Array,
    next_values: jax.Array,
    dones: jax.Array,
    gamma: float,
    lam: float,
    active: jax.Array | None = None,
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
        active: optional float32 [h, N]; targets of inactive steps are
            meaningless (give them weight 0 in `critic_loss`).

    Returns:
        float32 [h, N] targets (no gradient).
    """
    rewards, next_values = jax.lax.stop_gradient((rewards, next_values))
    dones = window_dones(dones, active)
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


def critic_loss(values: jax.Array, targets: jax.Array, weights: jax.Array | None = None) -> jax.Array:
    """Mean squared error between predicted values and targets.

    Args:
        values: float32 [..., M] (a leading axis for several critics, each
            regressed onto the same targets).
        targets: float32 [M].
        weights: optional float32 [M] of 0.0 or 1.0: the mean over weight-1 samples only.

    Returns:
        float32 [] the mean over critics and (weighted) samples.
    """
    squared = (values - targets) ** 2
    if weights is None:
        return jnp.mean(squared)
    return jnp.mean(jnp.sum(weights * squared, axis=-1) / jnp.maximum(jnp.sum(weights), 1.0))


def soft_rewards(rewards: jax.Array, log_probs: jax.Array, temperature: jax.Array) -> jax.Array:
    """Maximum-entropy rewards r_t - alpha * log pi(a_t | s_t) (SAPO), float32 [h, N].

    -log pi(a_t | s_t) is the one-sample estimate of the policy's entropy at
    s_t; gradients flow through `rewards` and `log_probs`, not the temperature.
    """
    return rewards - jax.lax.stop_gradient(temperature) * log_probs


def temperature_loss(log_temperature: jax.Array, entropy: jax.Array, target_entropy: float) -> jax.Array:
    """Loss of the automatic temperature: log(alpha) * (entropy - target), entropy without gradient.

    Its gradient in log(alpha) is (entropy - target): descent lowers the
    temperature while the policy's entropy is above the target and raises it
    below; at entropy == target the gradient is 0 (the fixed point).
    """
    return log_temperature * (jax.lax.stop_gradient(entropy) - target_entropy)
