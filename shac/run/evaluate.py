"""Deterministic evaluation over full episodes."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from flax import struct

from envs import MjxEnv, State
from shac.core.networks import Actor, act
from shac.core.normalizer import RunningStatistics
from shac.core.rollout import exploded


@struct.dataclass
class Evaluation:
    """What deterministic episodes came to, one entry per episode.

    Attributes:
        returns: float32 [episodes] undiscounted returns.
        lengths: float32 [episodes] steps until the episode ended (`env.episode_length`
            for one that reached the time limit).
        terminated: float32 [episodes] 1.0 where the episode ended by termination (a
            fall, for the locomotion tasks) rather than at the time limit.
        exploded: float32 [episodes] 1.0 where the episode ended because its physics did
            (a non-finite observation or reward, or a state past `env.too_fast`): its
            return counts the steps before that one.
    """

    returns: jax.Array
    lengths: jax.Array
    terminated: jax.Array
    exploded: jax.Array


def episode_step(env: MjxEnv, states: State, alive: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """How a step of a batch of episodes counts, from the states it reached and `alive` float32 [N] (1.0 for
    an episode still running before it).

    Returns:
        counted bool [N]: the step's reward and termination count towards its episode (running, and its
        physics did not explode: `exploded`, the states training resets); exploded float32 [N]: 1.0 where
        the step ended its episode by exploding; alive float32 [N] after the step.
    """
    blown = exploded(env, states)
    counted = (alive > 0) & ~blown
    return counted, alive * blown, jnp.where(counted, 1.0 - states.done, 0.0)


def evaluate(
    env: MjxEnv,
    actor: Actor,
    actor_params: dict,
    normalizer: RunningStatistics,
    key: jax.Array,
    episodes: int,
) -> Evaluation:
    """`episodes` full episodes under SHAC's mean action (see `evaluate_policy`)."""
    return evaluate_policy(env, partial(act, actor, actor_params, normalizer), key, episodes)


def evaluate_policy(env: MjxEnv, policy: Callable[[jax.Array], jax.Array], key: jax.Array, episodes: int) -> Evaluation:
    """`episodes` full episodes under a deterministic policy: returns, lengths, terminations.

    Each episode runs from a fresh reset until it terminates, reaches the time
    limit or its physics explodes (`exploded`, the states training resets);
    rewards after the end are not counted, and cannot reach the returns even
    when the simulation of an ended episode goes on to explode. Any method's policy can
    be evaluated this way (the benchmarks evaluate brax's PPO and APG with it).

    Args:
        policy: raw observations float32 [episodes, obs_dim] -> actions
            float32 [episodes, action_dim] in [-1, 1].
    """
    states = jax.vmap(env.reset)(jax.random.split(key, episodes))
    step_env = jax.vmap(env.step)

    def step(carry, _):
        state, alive, outcome = carry
        state = step_env(state, policy(state.obs))
        counted, blown, still_alive = episode_step(env, state, alive)
        outcome = Evaluation(
            returns=outcome.returns + jnp.where(counted, state.reward, 0.0),
            lengths=outcome.lengths + alive,
            terminated=outcome.terminated + jnp.where(counted, state.terminated, 0.0),
            exploded=outcome.exploded + blown,
        )
        return (state, still_alive, outcome), None

    zeros = jnp.zeros(episodes)
    init = (states, jnp.ones(episodes), Evaluation(returns=zeros, lengths=zeros, terminated=zeros, exploded=zeros))
    (_, _, outcome), _ = jax.lax.scan(step, init, None, length=env.episode_length)
    return outcome


@struct.dataclass
class Episode:
    """One deterministic episode of a single environment, `T = env.episode_length` steps.

    Attributes:
        obs: float32 [T, obs_dim] observation each action was taken in.
        actions: float32 [T, action_dim] the squashed mean actions.
        qpos: float32 [T + 1, nq] joint positions from the initial state on (for rendering).
        rewards: float32 [T] (0 at a step whose physics exploded, see `evaluate_policy`).
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
    """One episode from `env.reset(key)` under the mean action (as `evaluate`, which also says when an
    episode ends), recorded step by step."""

    def step(carry, _):
        state, alive = carry
        action = act(actor, actor_params, normalizer, state.obs)
        next_state = env.step(state, action)
        blown = exploded(env, jax.tree.map(lambda x: x[None], next_state))[0]
        reward = jnp.where(blown, 0.0, next_state.reward)
        record = (state.obs, action, next_state.pipeline_state.qpos, reward, alive)
        return (next_state, jnp.where(blown, 0.0, alive * (1.0 - next_state.done))), record

    state = env.reset(key)
    _, (obs, actions, qpos, rewards, alive) = jax.lax.scan(step, (state, jnp.ones(())), None, length=env.episode_length)
    qpos = jnp.concatenate([state.pipeline_state.qpos[None], qpos])
    return Episode(obs=obs, actions=actions, qpos=qpos, rewards=rewards, alive=alive)


def summarize(evaluation: Evaluation) -> dict[str, float]:
    """The JSON summary of an evaluation: mean_return, std_return, episodes, mean_length,
    terminated and exploded (the fractions of episodes that ended by termination, and by their
    physics exploding)."""
    return {
        "mean_return": float(jnp.mean(evaluation.returns)),
        "std_return": float(jnp.std(evaluation.returns)),
        "episodes": int(evaluation.returns.shape[0]),
        "mean_length": float(jnp.mean(evaluation.lengths)),
        "terminated": float(jnp.mean(evaluation.terminated)),
        "exploded": float(jnp.mean(evaluation.exploded)),
    }
