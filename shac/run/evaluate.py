"""Deterministic evaluation over full episodes."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from flax import struct

from envs import MjxEnv
from shac.core.networks import Actor, act
from shac.core.normalizer import RunningStatistics


def evaluate(
    env: MjxEnv,
    actor: Actor,
    actor_params: dict,
    normalizer: RunningStatistics,
    key: jax.Array,
    episodes: int,
) -> jax.Array:
    """Undiscounted returns of `episodes` full episodes under SHAC's mean action (see `evaluate_policy`).

    Returns:
        float32 [episodes] returns.
    """

    return evaluate_policy(env, partial(act, actor, actor_params, normalizer), key, episodes)


def evaluate_policy(env: MjxEnv, policy: Callable[[jax.Array], jax.Array], key: jax.Array, episodes: int) -> jax.Array:
    """Undiscounted returns of `episodes` full episodes under a deterministic policy.

    Each episode runs from a fresh reset until it terminates or reaches the
    time limit; rewards after the end are not counted. Any method's policy can
    be evaluated this way (the benchmarks evaluate brax's PPO and APG with it).

    Args:
        policy: raw observations float32 [episodes, obs_dim] -> actions
            float32 [episodes, action_dim] in [-1, 1].

    Returns:
        float32 [episodes] returns.
    """
    states = jax.vmap(env.reset)(jax.random.split(key, episodes))
    step_env = jax.vmap(env.step)

    def step(carry, _):
        state, alive, returns = carry
        state = step_env(state, policy(state.obs))
        returns = returns + alive * state.reward
        alive = alive * (1.0 - state.done)
        return (state, alive, returns), None

    init = (states, jnp.ones(episodes), jnp.zeros(episodes))
    (_, _, returns), _ = jax.lax.scan(step, init, None, length=env.episode_length)
    return returns


@struct.dataclass
class Episode:
    """One deterministic episode of a single environment, `T = env.episode_length` steps.

    Attributes:
        obs: float32 [T, obs_dim] observation each action was taken in.
        actions: float32 [T, action_dim] the squashed mean actions.
        qpos: float32 [T + 1, nq] joint positions from the initial state on (for rendering).
        rewards: float32 [T].
        alive: float32 [T] 1.0 up to and including the step at which the episode ended.
    """

    obs: jax.Array
    actions: jax.Array
    qpos: jax.Array
    rewards: jax.Array
    alive: jax.Array


def run_episode(
    env: MjxEnv, actor: Actor, actor_params: dict, normalizer: RunningStatistics, key: jax.Array
) -> Episode:
    """One episode from `env.reset(key)` under the mean action (as `evaluate`), recorded step by step."""

    def step(carry, _):
        state, alive = carry
        action = act(actor, actor_params, normalizer, state.obs)
        next_state = env.step(state, action)
        record = (state.obs, action, next_state.pipeline_state.qpos, next_state.reward, alive)
        return (next_state, alive * (1.0 - next_state.done)), record

    state = env.reset(key)
    _, (obs, actions, qpos, rewards, alive) = jax.lax.scan(step, (state, jnp.ones(())), None, length=env.episode_length)
    qpos = jnp.concatenate([state.pipeline_state.qpos[None], qpos])
    return Episode(obs=obs, actions=actions, qpos=qpos, rewards=rewards, alive=alive)


def summarize(returns: jax.Array) -> dict[str, float]:
    """The JSON summary of evaluation returns: mean_return, std_return, episodes."""
    return {
        "mean_return": float(jnp.mean(returns)),
        "std_return": float(jnp.std(returns)),
        "episodes": int(returns.shape[0]),
    }
