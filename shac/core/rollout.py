"""Differentiable short-horizon rollouts of N parallel environments."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import struct
from mujoco import mjx

from envs import MjxEnv, State
from envs.physics.smoothing import scale_gradient
from envs.private_apis import contact_distances
from shac.core.networks import sample_action
from shac.core.normalizer import RunningStatistics

PolicyFn = Callable[[jax.Array], tuple[jax.Array, jax.Array]]
"""Normalised obs float32 [N, obs_dim] -> (mean, log_std), each [N, action_dim]."""
ValueFn = Callable[[jax.Array], jax.Array]
"""Normalised obs float32 [N, obs_dim] -> values float32 [N]."""


@struct.dataclass
class Window:
    """What one window of h steps of N envs produced (time-major).

    Attributes:
        obs: float32 [h, N, obs_dim] normalised observation each action was taken in.
        raw_obs: float32 [h, N, obs_dim] the same, before normalisation.
        rewards: float32 [h, N] (0 where the step went non-finite).
        next_values: float32 [h, N] target-critic value of the state reached,
            before any reset; 0 after termination or a non-finite state.
        dones: float32 [h, N] 1.0 where the episode ended at this step.
        terminated, truncated, nonfinite: float32 [h, N] why it ended; `nonfinite`
            also where the state's velocities passed the env's bound (`MjxEnv.too_fast`).
        too_fast: float32 [h, N] 1.0 where the velocities passed the bound (finite
            but exploding physics, handled as non-finite).
        metrics: the env's per-step metrics (its reward terms), each float32 [h, N].
        log_probs: float32 [h, N] log-density of each sampled (squashed) action
            under the policy; differentiable in the policy's parameters.
        stiffness: float32 [h, N] `contact_stiffness` of the state reached (no gradient).
        contacts: float32 [h, N] 1.0 where the state reached has an active contact
            (two geoms penetrate); 0 for simulator states that are not an `mjx.Data`.
        active: float32 [h, N] 1.0 for the steps simulated; 0.0 for the steps
            after an adaptive window's end (all other fields are 0 there).
    """

    obs: jax.Array
    raw_obs: jax.Array
    rewards: jax.Array
    next_values: jax.Array
    dones: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    nonfinite: jax.Array
    too_fast: jax.Array
    metrics: dict[str, jax.Array]
    log_probs: jax.Array
    stiffness: jax.Array
    contacts: jax.Array
    active: jax.Array


def contact_stiffness(data: mjx.Data) -> jax.Array:
    """AHAC's stiffness signal of one simulator state: |constraint force| / |acceleration|.

    `qfrc_constraint` is the force every active constraint (contacts, joint
    limits, equalities) applies, in generalised coordinates (J^T efc_force);
    `qacc` the generalised acceleration it produced. Their ratio, an effective
    mass, is large when big contact forces hold a body nearly still: a stiff
    contact, where the step's Jacobian is large and gradients through it grow.
    0 where the acceleration is 0 (nothing moves, or no constraint is active),
    and for a simulator state that is not an `mjx.Data` (pure-JAX test envs).

    Args:
        data: one environment's `mjx.Data` (batch it with vmap).

    Returns:
        float32 [] (no gradient).
    """
    if not isinstance(data, mjx.Data):
        return jnp.zeros(())
    data = jax.lax.stop_gradient(data)
    force = jnp.linalg.norm(data.qfrc_constraint)
    acceleration = jnp.linalg.norm(data.qacc)
    return jnp.where(acceleration > 0, force / jnp.where(acceleration > 0, acceleration, 1.0), 0.0)


def in_contact(data: mjx.Data) -> jax.Array:
    """bool []: whether any two geoms of one simulator state penetrate (no gradient);
    False for a simulator state that is not an `mjx.Data` (pure-JAX test envs)."""
    if not isinstance(data, mjx.Data):
        return jnp.zeros((), bool)
    return jnp.any(jax.lax.stop_gradient(contact_distances(data)) < 0)


def carried_state(data):
    """The part of a simulator state that carries the dynamics from one step to the next.

    `(qpos, qvel, act)` of an `mjx.Data`; the whole simulator state of any
    other env (a pytree of arrays). `probe_state` adds `zero_probes` to a
    state, so the gradient of a loss with respect to a zero probe is the
    gradient that flows back through the state at that step.
    """
    if isinstance(data, mjx.Data):
        return (data.qpos, data.qvel, data.act)
    return data


def zero_probes(data, horizon: int):
    """Zeros of the structure of `carried_state(data)` with a leading [horizon] axis
    (None for leaves that are not floating point: no gradient flows through them)."""

    def zeros(x):
        return jnp.zeros((horizon, *x.shape), x.dtype) if jnp.issubdtype(x.dtype, jnp.inexact) else None

    return jax.tree.map(zeros, carried_state(data))


def probe_state(data, probe):
    """`data` with `probe` (one step of `zero_probes(data, h)`) added to its carried state."""

    def add(x, p):
        return x if p is None else x + p

    if isinstance(data, mjx.Data):
        qpos, qvel, act = jax.tree.map(add, carried_state(data), probe)
        return data.replace(qpos=qpos, qvel=qvel, act=act)
    return jax.tree.map(add, data, probe)


def state_gradient_growth(probe_grads, active: jax.Array) -> jax.Array:
    """float32 []: how much the gradient flowing back through the state grows per step.

    (|g_0| / |g_last|) ** (1 / last), where |g_t| is the norm over all envs of
    the gradient with respect to step t's state probe (see `rollout`) and
    `last` the window's last simulated step: above 1, the gradient grows on
    its way back through the window (exploding), below 1 it fades. 1.0 when
    undefined (one step, or a zero gradient at either end).

    Args:
        probe_grads: the gradient with respect to `state_probes`, leaves [h, N, ...].
        active: float32 [h, N] the window's simulated steps (`Window.active`).
    """
    squares = sum(jnp.sum(jnp.square(g).reshape(g.shape[0], -1), axis=1) for g in jax.tree.leaves(probe_grads))
    norms = jnp.sqrt(squares)
    last = jnp.sum(jnp.any(active > 0, axis=1)) - 1
    first_norm, last_norm = norms[0], norms[jnp.maximum(last, 0)]
    defined = (last > 0) & (first_norm > 0) & (last_norm > 0)
    ratio = jnp.where(defined, first_norm / jnp.where(defined, last_norm, 1.0), 1.0)
    return ratio ** (1.0 / jnp.maximum(last, 1))


def decay_state_gradient(state: State, decay: float) -> State:
    """`state` unchanged forward; the gradient flowing back into it multiplied by `decay` (d = 1: no op at all,
    so the exact gradient stays bit for bit)."""
    return state if decay == 1.0 else scale_gradient(state, decay)


def tree_where(mask: jax.Array, on_true, on_false):
    """Per-env select between two batched pytrees; `mask` is bool [N]."""

    def select(x, y):
        return jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)), x, y)

    return jax.tree.map(select, on_true, on_false)


def exploded(env: MjxEnv, states: State) -> jax.Array:
    """bool [N]: which of a batch of states just stepped have a non-finite observation or reward, or
    physics past `env.too_fast`. Training resets those envs; an evaluation ends their episodes."""
    finite = jnp.isfinite(states.obs).all(axis=-1) & jnp.isfinite(states.reward)
    return ~finite | jax.vmap(env.too_fast)(states)


def rollout(
    env: MjxEnv,
    policy: PolicyFn,
    target_value: ValueFn,
    normalizer: RunningStatistics,
    env_state: State,
    reset_states: State,
    key: jax.Array,
    horizon: int,
    remat_every: int = 0,
    active_horizon: jax.Array | None = None,
    state_probes=None,
    state_grad_decay: float = 1.0,
) -> tuple[State, Window]:
    """Runs `horizon` steps of the batched env under the stochastic policy.

    Gradients flow from rewards and bootstrap values back through the
    simulator into the policy. Envs whose episode ends, or whose state goes
    non-finite or too fast (`env.too_fast`), are replaced by their entry in
    `reset_states` (one fresh state per env for the whole window).

    Args:
        env: the environment (unbatched; vmapped here).
        policy: see `PolicyFn`.
        target_value: see `ValueFn` (the target critic).
        normalizer: observation statistics, frozen for the window.
        env_state: batched [N] state at the start of the window.
        reset_states: batched [N] initial states used for resets.
        key: randomness of the action noise.
        horizon: h, the number of steps.
        remat_every: if k > 0 (k must divide h), the window runs as h / k
            segments of k steps and the backward pass keeps only the state at
            each segment's start, recomputing the segment's forward steps
            (`jax.checkpoint`): memory ~ (h / k) states + k steps of
            intermediates instead of h steps, at the cost of recomputing them.
        active_horizon: None, or int32 [] in [1, horizon]: only the first
            `active_horizon` steps are simulated (a conditional skips the rest,
            forward and backward, so one compiled window serves every shorter
            horizon); the window reports them in `Window.active`. A step
            skipped on its own still writes and reads its share of the
            intermediates the backward pass keeps (zeros); with `remat_every`,
            a segment that starts past the end is skipped whole and keeps
            only the state it starts from (docs/algorithms.md has what each
            costs).
        state_probes: None, or `zero_probes(env_state.pipeline_state, horizon)`
            batched over N: the gradient with respect to step t's probe is the
            gradient that flows back into the state step t starts from.
        state_grad_decay: d in (0, 1]: the gradient flowing back from each step into
            the whole state it starts from (simulator state and observation) is
            multiplied by d (forward values unchanged), so every path from a reward or
            bootstrap value back to the action k steps before it is scaled by d^k: a
            soft truncation of the window's backward pass. 1 is the exact gradient.
            (`smoothing.state_grad_decay` scales the simulator's state alone, at each
            physics step, so the path through the policy's next observation escapes it.)

    Returns:
        The batched state after the window (resets applied) and the `Window`.
    """
    step_env = jax.vmap(env.step)
    too_fast_env = jax.vmap(env.too_fast)

    def simulate(state: State, step_key: jax.Array, probe) -> tuple[State, Window]:
        state = decay_state_gradient(state, state_grad_decay)
        if probe is not None:
            state = state.replace(pipeline_state=probe_state(state.pipeline_state, probe))
        obs = normalizer.normalize(state.obs)
        mean, log_std = policy(obs)
        action, log_prob = sample_action(mean, log_std, step_key)
        next_state = step_env(state, action)

        too_fast = too_fast_env(next_state)
        nonfinite = exploded(env, next_state)
        next_obs = jnp.where(nonfinite[:, None], 0.0, next_state.obs)
        no_future = (next_state.terminated > 0) | nonfinite
        next_value = jnp.where(no_future, 0.0, target_value(normalizer.normalize(next_obs)))
        done = (next_state.done > 0) | nonfinite

        record = Window(
            obs=obs,
            raw_obs=state.obs,
            rewards=jnp.where(nonfinite, 0.0, next_state.reward),
            next_values=next_value,
            dones=done.astype(jnp.float32),
            terminated=next_state.terminated * (1.0 - nonfinite),
            truncated=next_state.truncated * (1.0 - nonfinite),
            nonfinite=nonfinite.astype(jnp.float32),
            too_fast=too_fast.astype(jnp.float32),
            metrics=next_state.metrics,
            log_probs=log_prob,
            stiffness=jnp.where(nonfinite, 0.0, jax.vmap(contact_stiffness)(next_state.pipeline_state)),
            contacts=(~nonfinite & jax.vmap(in_contact)(next_state.pipeline_state)).astype(jnp.float32),
            active=jnp.ones_like(next_state.reward),
        )
        return tree_where(done, reset_states, next_state), record

    def skip(state: State, step_key: jax.Array, probe) -> tuple[State, Window]:
        record = jax.eval_shape(simulate, state, step_key, probe)[1]
        return state, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), record)

    def step(state: State, inputs) -> tuple[State, Window]:
        t, step_key, probe = inputs
        if active_horizon is None:
            return simulate(state, step_key, probe)
        return jax.lax.cond(t < active_horizon, simulate, skip, state, step_key, probe)

    inputs = (jnp.arange(horizon), jax.random.split(key, horizon), state_probes)
    if not remat_every:
        return jax.lax.scan(step, env_state, inputs)
    segments = horizon // remat_every
    key_impl = jax.random.key_impl(key)

    @jax.checkpoint
    def segment(state: State, segment_inputs) -> tuple[State, Window]:
        t, key_data, probes = segment_inputs
        return jax.lax.scan(step, state, (t, jax.random.wrap_key_data(key_data, impl=key_impl), probes))

    def skip_segment(state: State, segment_inputs) -> tuple[State, Window]:
        window = jax.eval_shape(segment, state, segment_inputs)[1]
        return state, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), window)

    def segment_unless_past_the_end(state: State, segment_inputs) -> tuple[State, Window]:
        if active_horizon is None:
            return segment(state, segment_inputs)
        first_step = segment_inputs[0][0]
        return jax.lax.cond(first_step < active_horizon, segment, skip_segment, state, segment_inputs)

    # the keys go into the segments as raw data: `lax.cond` pads the residuals of the branch not taken
    # with zeros, which JAX cannot make of a key type
    inputs = (inputs[0], jax.random.key_data(inputs[1]), inputs[2])
    segment_inputs = jax.tree.map(lambda x: x.reshape(segments, remat_every, *x.shape[1:]), inputs)
    env_state, window = jax.lax.scan(segment_unless_past_the_end, env_state, segment_inputs)
    return env_state, jax.tree.map(lambda x: x.reshape(horizon, *x.shape[2:]), window)


def window_rewards(step: Callable[[State, jax.Array], State], start: State, actions: jax.Array) -> jax.Array:
    """The rewards of `start` stepped open loop under `actions`, without resets.

    Args:
        step: the environment's step, or its `jax.vmap` for a batch.
        start: the first state (with a leading [N] axis for a batch).
        actions: float32 [h, action_dim] or [h, N, action_dim].

    Returns:
        float32 [h] or [h, N] rewards, differentiable in `actions` and `start`.
    """

    def one_step(state: State, action: jax.Array) -> tuple[State, jax.Array]:
        state = step(state, action)
        return state, state.reward

    return jax.lax.scan(one_step, start, actions)[1]
