"""Batched runs of the registered environments, compiled once per environment and shared by the tests.

An MJX compile of a contact-rich task takes tens of seconds (minutes for a
gradient), so every test of an environment goes through the same three jitted
functions: `reset`, `rollout` (always ROLLOUT_STEPS steps of N_ENVS envs, with
auto-reset) and `return_gradient`. A test that needs fewer steps reads the
first ones of a rollout rather than compiling a shorter one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import struct

import envs
from envs import MjxEnv, State
from envs.physics.smoothing import Smoothing
from shac.core.rollout import tree_where, window_rewards

N_ENVS = 2
ROLLOUT_STEPS = 1000
GRADIENT_STEPS = 32


@struct.dataclass
class Trace:
    """What a rollout produced at each step (time-major), before any auto-reset.

    Attributes:
        obs: float32 [T, N, obs_dim].
        reward, done, terminated, truncated: float32 [T, N].
        time: float32 [T, N] simulator clock after the step (restarts after a reset).
        metrics: the env's reward terms, each float32 [T, N].
    """

    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    time: jax.Array
    metrics: dict[str, jax.Array]


@functools.cache
def make(name: str, smoothing: str = "none") -> MjxEnv:
    return envs.make(name, smoothing=Smoothing(mode=smoothing))


@functools.cache
def reset(name: str) -> Callable[[jax.Array], State]:
    """Jitted batched reset: keys [N] -> State with a leading [N] axis."""
    return jax.jit(jax.vmap(make(name).reset))


def initial_states(name: str, seed: int = 0) -> State:
    """N_ENVS fresh states of `name`."""
    return reset(name)(jax.random.split(jax.random.key(seed), N_ENVS))


@functools.cache
def rollout(name: str) -> Callable[[State, jax.Array], Trace]:
    """Jitted (start [N], actions [ROLLOUT_STEPS, N, action_dim]) -> Trace.

    An env whose episode ends continues from its `start` state, as in training.
    """
    env = make(name)

    def run(start: State, actions: jax.Array) -> Trace:
        def step(state: State, action: jax.Array) -> tuple[State, Trace]:
            state = jax.vmap(env.step)(state, action)
            record = Trace(
                obs=state.obs,
                reward=state.reward,
                done=state.done,
                terminated=state.terminated,
                truncated=state.truncated,
                time=state.pipeline_state.time,
                metrics=state.metrics,
            )
            return tree_where(state.done > 0, start, state), record

        return jax.lax.scan(step, start, actions)[1]

    return jax.jit(run)


@functools.cache
def random_rollout(name: str) -> Trace:
    """ROLLOUT_STEPS steps of uniform random actions in [-1, 1] from `initial_states(name)`."""
    env = make(name)
    actions = jax.random.uniform(jax.random.key(7), (ROLLOUT_STEPS, N_ENVS, env.action_size), minval=-1, maxval=1)
    return rollout(name)(initial_states(name), actions)


def zero_actions(name: str) -> jax.Array:
    """float32 [ROLLOUT_STEPS, N_ENVS, action_dim] zeros."""
    return jnp.zeros((ROLLOUT_STEPS, N_ENVS, make(name).action_size))


@functools.cache
def return_gradient(name: str, smoothing: str = "none") -> Callable[[jax.Array, State], tuple[jax.Array, jax.Array]]:
    """Jitted sum of rewards over GRADIENT_STEPS steps and its gradient with respect to the actions:
    (actions [h, N, A], start [N]) -> (scalar, [h, N, A])."""
    env = make(name, smoothing)

    def total_return(actions: jax.Array, start: State) -> jax.Array:
        return window_rewards(jax.vmap(env.step), start, actions).sum()

    return jax.jit(jax.value_and_grad(total_return))
