"""Actor and critic networks: MLPs of Dense -> activation -> LayerNorm blocks (ELU in SHAC, SiLU in SAPO)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import linen as nn

from shac.core.normalizer import RunningStatistics

ACTIVATIONS = {"elu": nn.elu, "silu": nn.silu}
"""Hidden-layer activations by config name."""
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
"""Range of a state-dependent log standard deviation."""
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)  # plain Python: no JAX computation at import time


class MLP(nn.Module):
    """Hidden blocks Dense -> activation -> LayerNorm, then a linear output layer.

    Attributes:
        hidden: widths of the hidden layers.
        out: width of the output layer.
        kernel_init: initialiser of every Dense kernel.
        activation: a key of `ACTIVATIONS`.
    """

    hidden: Sequence[int]
    out: int
    kernel_init: nn.initializers.Initializer = nn.initializers.lecun_normal()
    activation: str = "elu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        activation = ACTIVATIONS[self.activation]
        for width in self.hidden:
            x = nn.Dense(width, kernel_init=self.kernel_init)(x)
            x = nn.LayerNorm()(activation(x))
        return nn.Dense(self.out, kernel_init=self.kernel_init)(x)


class Actor(nn.Module):
    """Gaussian policy before tanh squashing.

    `__call__` maps observations float32 [..., obs_dim] to the action mean and
    log-std, each float32 [..., action_dim], before squashing. The log-std is a
    state-independent parameter (SHAC) or, with `state_dependent_std`, a second
    head of the MLP squashed into [LOG_STD_MIN, LOG_STD_MAX] (SAPO).
    """

    hidden: Sequence[int]
    action_size: int
    init_log_std: float = -1.0
    state_dependent_std: bool = False
    activation: str = "elu"

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        if self.state_dependent_std:
            out = MLP(self.hidden, 2 * self.action_size, activation=self.activation)(obs)
            mean, raw = jnp.split(out, 2, axis=-1)
            log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (jnp.tanh(raw) + 1.0)
            return mean, log_std
        mean = MLP(self.hidden, self.action_size, activation=self.activation)(obs)
        log_std = self.param("log_std", nn.initializers.constant(self.init_log_std), (self.action_size,))
        return mean, jnp.broadcast_to(log_std, mean.shape)


class Critic(nn.Module):
    """State-value function: float32 [..., obs_dim] -> float32 [...].

    Orthogonal initialisation with gain sqrt(2) and zero biases, as in SHAC.
    """

    hidden: Sequence[int]
    activation: str = "elu"

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        return MLP(self.hidden, 1, kernel_init=init, activation=self.activation)(obs)[..., 0]


def critic_ensemble(size: int) -> type[nn.Module]:
    """`size` independently initialised critics: float32 [..., obs_dim] -> float32 [size, ...] (parameters stacked
    on axis 0)."""
    return nn.vmap(
        Critic,
        variable_axes={"params": 0},
        split_rngs={"params": True},
        in_axes=None,
        out_axes=0,
        axis_size=size,
    )


def sample_action(mean: jax.Array, log_std: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Reparameterised Gaussian sample squashed by tanh into [-1, 1], and its log-density.

    Returns:
        The action float32 [..., action_dim] and `squashed_log_prob` of it, float32 [...].
    """
    noise = jax.random.normal(key, mean.shape, mean.dtype)
    pre_tanh = mean + jnp.exp(log_std) * noise
    return jnp.tanh(pre_tanh), squashed_log_prob(pre_tanh, noise, log_std)


def squashed_log_prob(pre_tanh: jax.Array, noise: jax.Array, log_std: jax.Array) -> jax.Array:
    """Log-density of a = tanh(u), u = mean + exp(log_std) * noise, summed over the last axis.

    log pi(a) = sum_i [log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2)], with
    log N = -noise^2 / 2 - log_std - log(2 pi) / 2 and the Jacobian term written
    as log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2 u)), finite for any u
    (the direct form is log(0) = -inf once tanh(u) rounds to +-1).

    Args:
        pre_tanh, noise, log_std: float32 [..., action_dim].

    Returns:
        float32 [...].
    """
    gaussian = -0.5 * noise**2 - log_std - _HALF_LOG_2PI
    log_jacobian = 2.0 * (jnp.log(2.0) - pre_tanh - jax.nn.softplus(-2.0 * pre_tanh))
    return jnp.sum(gaussian - log_jacobian, axis=-1)


def act(actor: Actor, actor_params: dict, normalizer: RunningStatistics, obs: jax.Array) -> jax.Array:
    """The deterministic policy (evaluation, videos, export): tanh of the actor's mean for the normalised `obs`.

    Args:
        actor: the actor network.
        actor_params: its parameters.
        normalizer: the observation statistics it was trained with.
        obs: float32 [..., obs_dim] raw observations.

    Returns:
        float32 [..., action_dim] actions in [-1, 1].
    """
    mean, _ = actor.apply(actor_params, normalizer.normalize(obs))
    return jnp.tanh(mean)
