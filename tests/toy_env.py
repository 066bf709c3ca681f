"""A tiny pure-JAX environment with hand-checkable dynamics, for rollout and trainer tests."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from envs import State


class LineEnv:
    """A point on a line: x' = x + a, reward = x', obs = [x, steps].

    Terminates when x' > `terminate_above`; truncates after `episode_length`
    steps; reset puts x at `start`. With `nan_at_step=k`, step k of an episode
    yields a non-finite observation; with `nan_reward_at_step=k`, a NaN reward
    and a finite observation. `|x|` stands in for a speed: past `max_velocity`
    the state is `too_fast`.
    """

    def __init__(
        self,
        episode_length=3,
        terminate_above=100.0,
        start=0.0,
        nan_at_step=-1,
        nan_reward_at_step=-1,
        max_velocity=float("inf"),
    ):
        self.episode_length = episode_length
        self.terminate_above = terminate_above
        self.start = start
        self.nan_at_step = nan_at_step
        self.nan_reward_at_step = nan_reward_at_step
        self.max_velocity = max_velocity
        self.observation_size = 2
        self.action_size = 1

    def reset(self, rng: jax.Array) -> State:
        del rng
        zero = jnp.zeros(())
        x = jnp.array(self.start, jnp.float32)
        return State(
            pipeline_state=(x, zero),
            obs=jnp.stack([x, zero]),
            reward=zero,
            done=zero,
            terminated=zero,
            truncated=zero,
            metrics={},
            info={},
        )

    def step(self, state: State, action: jax.Array) -> State:
        x, steps = state.pipeline_state
        x, steps = x + action[0], steps + 1.0
        obs = jnp.stack([x, steps])
        poison = steps == self.nan_at_step
        nan = jnp.sqrt(jnp.where(poison, -1.0 - x**2, 1.0))  # NaN at that step, with a NaN derivative in x
        obs = jnp.where(poison, jnp.stack([nan, steps]), obs)
        terminated = x > self.terminate_above
        truncated = (steps >= self.episode_length) & ~terminated
        reward = jnp.where(steps == self.nan_reward_at_step, jnp.nan, x)  # NaN value, zero derivative
        return state.replace(
            pipeline_state=(x, steps),
            obs=obs,
            reward=reward,
            done=(terminated | truncated).astype(jnp.float32),
            terminated=terminated.astype(jnp.float32),
            truncated=truncated.astype(jnp.float32),
        )

    def too_fast(self, state: State) -> jax.Array:
        return jnp.abs(state.pipeline_state[0]) > self.max_velocity


class RegisteredLineEnv(LineEnv):
    """`LineEnv` as the trainer builds envs from `env.name`: it takes the options of `MjxEnv`'s
    constructor and ignores them (no contacts to smooth, no model to randomise)."""

    def __init__(self, episode_length=3, smoothing=None, randomization=None, unroll_substeps=False, **kwargs):
        del smoothing, randomization, unroll_substeps
        super().__init__(episode_length=episode_length, **kwargs)


class NonFiniteLineEnv(RegisteredLineEnv):
    """`RegisteredLineEnv` whose first step of every episode is non-finite: after each reset, so every step is."""

    def __init__(self, episode_length=3, **options):
        super().__init__(episode_length=episode_length, nan_at_step=1, **options)
