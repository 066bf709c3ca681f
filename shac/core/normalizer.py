"""Running observation statistics and a differentiable normaliser."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

STD_EPS = 1e-5


@struct.dataclass
class RunningStatistics:
    """Mean and variance of every observation seen so far.

    Attributes:
        count: float32 [] number of observations (starts at a tiny value so the
            first update dominates the prior).
        mean: float32 [obs_dim].
        var: float32 [obs_dim] population variance.
    """

    count: jax.Array
    mean: jax.Array
    var: jax.Array

    @classmethod
    def create(cls, obs_dim: int) -> RunningStatistics:
        # float32, not a weakly typed Python float: the state the epoch returns must have the
        # types it was given, or the jitted epoch compiles a second time at epoch 2.
        return cls(count=jnp.array(1e-4, jnp.float32), mean=jnp.zeros(obs_dim), var=jnp.ones(obs_dim))

    def update(self, batch: jax.Array, weights: jax.Array | None = None) -> RunningStatistics:
        """Merges a batch float32 [..., obs_dim] (Chan et al.'s parallel update).

        Args:
            batch: float32 [..., obs_dim].
            weights: optional float32 [...] of 0.0 or 1.0: only observations of
                weight 1 count (the steps an adaptive window simulated).
        """
        batch = batch.reshape(-1, batch.shape[-1])
        if weights is None:
            n = jnp.asarray(batch.shape[0], jnp.float32)
            batch_mean = batch.mean(axis=0)
            batch_var = batch.var(axis=0)
        else:
            weights = weights.reshape(-1, 1)
            n = jnp.maximum(weights.sum(), 1.0)
            batch_mean = (weights * batch).sum(axis=0) / n
            batch_var = (weights * (batch - batch_mean) ** 2).sum(axis=0) / n
        total = self.count + n
        delta = batch_mean - self.mean
        mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        return RunningStatistics(count=total, mean=mean, var=m2 / total)

    def normalize(self, obs: jax.Array) -> jax.Array:
        """(obs - mean) / sqrt(var + eps); differentiable in `obs`."""
        return (obs - self.mean) / jnp.sqrt(self.var + STD_EPS)
