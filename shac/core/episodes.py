"""Bookkeeping of undiscounted episode returns across windows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class EpisodeStats:
    """Running totals of each env's current episode.

    Attributes:
        returns: float32 [N] undiscounted return so far.
        lengths: float32 [N] steps so far.
    """

    returns: jax.Array
    lengths: jax.Array

    @classmethod
    def create(cls, num_envs: int) -> EpisodeStats:
        return cls(returns=jnp.zeros(num_envs), lengths=jnp.zeros(num_envs))

    def update(
        self, rewards: jax.Array, dones: jax.Array, active: jax.Array | None = None
    ) -> tuple[EpisodeStats, dict[str, jax.Array]]:
        """Adds a window of rewards and dones, both float32 [h, N].

        `active` (float32 [h, N], default all ones) marks the steps that were
        simulated; the others add nothing (an adaptive window shorter than h).

        Returns:
            The new totals and, over the episodes that finished in the window,
            `episodes` (count), `episode_return` and `episode_length` (means;
            NaN when none finished).
        """

        def step(carry, inputs):
            returns, lengths, count, return_sum, length_sum = carry
            reward, done, step = inputs
            returns, lengths = returns + reward, lengths + step
            count = count + jnp.sum(done)
            return_sum = return_sum + jnp.sum(done * returns)
            length_sum = length_sum + jnp.sum(done * lengths)
            return (returns * (1.0 - done), lengths * (1.0 - done), count, return_sum, length_sum), None

        zero = jnp.zeros(())
        (returns, lengths, count, return_sum, length_sum), _ = jax.lax.scan(
            step,
            (self.returns, self.lengths, zero, zero, zero),
            (rewards, dones, jnp.ones_like(rewards) if active is None else active),
        )

        def mean(total: jax.Array) -> jax.Array:
            return jnp.where(count > 0, total / jnp.maximum(count, 1.0), jnp.nan)

        stats = {"episodes": count, "episode_return": mean(return_sum), "episode_length": mean(length_sum)}
        return EpisodeStats(returns=returns, lengths=lengths), stats
