"""Deterministic evaluation over full episodes."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from envs import MjxEnv
from shac.networks import Actor, deterministic_action
from shac.normalizer import RunningStatistics


def evaluate(
    env: MjxEnv,
    actor: Actor,
    actor_params: dict,
    normalizer: RunningStatistics,
    key: jax.Array,
    episodes: int,
) -> jax.Array:
    """Undiscounted returns of `episodes` full episodes under the mean action.

    Each episode runs from a fresh reset until it terminates or reaches the
    time limit; rewards after the end are not counted.

    Returns:
        float32 [episodes] returns.
    """
    states = jax.vmap(env.reset)(jax.random.split(key, episodes))
    step_env = jax.vmap(env.step)

    def step(carry, _):
        state, alive, returns = carry
        mean, _ = actor.apply(actor_params, normalizer.normalize(state.obs))
        state = step_env(state, deterministic_action(mean))
        returns = returns + alive * state.reward
        alive = alive * (1.0 - state.done)
        return (state, alive, returns), None

    init = (states, jnp.ones(episodes), jnp.zeros(episodes))
    (_, _, returns), _ = jax.lax.scan(step, init, None, length=env.episode_length)
    return returns


def summarize(returns: jax.Array) -> dict[str, float]:
    """The JSON summary of evaluation returns: mean_return, std_return, episodes."""
    return {
        "mean_return": float(jnp.mean(returns)),
        "std_return": float(jnp.std(returns)),
        "episodes": int(returns.shape[0]),
    }
