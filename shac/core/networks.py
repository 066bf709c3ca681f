"""Actor and critic networks: MLPs of Dense -> ELU -> LayerNorm blocks (as in SHAC)."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import linen as nn

from shac.core.normalizer import RunningStatistics


class MLP(nn.Module):
    """Hidden blocks Dense -> ELU -> LayerNorm, then a linear output layer.

    Attributes:
        hidden: widths of the hidden layers.
        out: width of the output layer.
        kernel_init: initialiser of every Dense kernel.
    """

    hidden: Sequence[int]
    out: int
    kernel_init: nn.initializers.Initializer = nn.initializers.lecun_normal()

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden:
            x = nn.Dense(width, kernel_init=self.kernel_init)(x)
            x = nn.LayerNorm()(nn.elu(x))
        return nn.Dense(self.out, kernel_init=self.kernel_init)(x)


class Actor(nn.Module):
    """Gaussian policy with a state-independent log standard deviation.

    `__call__` maps observations float32 [..., obs_dim] to the action mean and
    log-std, each float32 [..., action_dim], before squashing.
    """

    hidden: Sequence[int]
    action_size: int
    init_log_std: float = -1.0

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        mean = MLP(self.hidden, self.action_size)(obs)
        log_std = self.param("log_std", nn.initializers.constant(self.init_log_std), (self.action_size,))
        return mean, jnp.broadcast_to(log_std, mean.shape)


class Critic(nn.Module):
    """State-value function: float32 [..., obs_dim] -> float32 [...].

    Orthogonal initialisation with gain sqrt(2) and zero biases, as in SHAC.
    """

    hidden: Sequence[int]

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        return MLP(self.hidden, 1, kernel_init=init)(obs)[..., 0]


def sample_action(mean: jax.Array, log_std: jax.Array, key: jax.Array) -> jax.Array:
    """Reparameterised Gaussian sample squashed by tanh into [-1, 1]."""
    noise = jax.random.normal(key, mean.shape, mean.dtype)
    return jnp.tanh(mean + jnp.exp(log_std) * noise)


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
