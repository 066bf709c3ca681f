"""AHAC: SHAC with a window that shortens where contact is stiff and grows where dynamics are smooth.

Georgiev et al., "Adaptive Horizon Actor-Critic for Policy Learning in
Contact-Rich Differentiable Simulation" (ICML 2024). What differs from SHAC:

- The window is compiled once at the longest horizon (`algo.horizon`); each
  epoch simulates only its first H steps (`Window.active`), so the gradient
  stops and the critic bootstraps where the shorter window ends.
- After each epoch the horizon H moves by dual ascent on the constraint "a
  window's summed contact stiffness stays below a threshold" (`horizon_update`).
- Two critics; the minimum of the two target critics bootstraps the actor and
  the targets (`algo.num_critics=2`, `algo.critic_combine=min`).
- The critic trains until its loss stops changing (over `PATIENCE` passes), up
  to `algo.critic_iterations` passes, each over the steps simulated only, in
  `algo.critic_minibatches` equal minibatches (`Ahac.critic_pass`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from shac.core.algorithm import Metrics, Params, Shac, TrainState
from shac.core.rollout import Window

PATIENCE = 4
"""The critic's passes stop when the loss changed too little over this many passes (`Ahac.fit_critic`)."""


def horizon_update(
    horizon: jax.Array,
    stiffness: jax.Array,
    threshold: float,
    learning_rate: jax.Array,
    min_horizon: int,
    max_horizon: int,
) -> jax.Array:
    """One dual-ascent step of the (continuous) horizon.

    H' = clip(H + learning_rate * (threshold - stiffness), min_horizon, max_horizon):
    the horizon grows while the window's stiffness is under the threshold and
    shrinks over it; it rests where a window accumulates exactly `threshold`
    (a longer window sums more steps, so the stiffness grows with H).

    Args:
        horizon: float32 [] H of the epoch just run.
        stiffness: float32 [] that window's summed stiffness (mean over envs).

    Returns:
        float32 [] the next epoch's H; the steps simulated are round(H).
    """
    return jnp.clip(horizon + learning_rate * (threshold - stiffness), min_horizon, max_horizon)


def window_stiffness(window: Window) -> jax.Array:
    """float32 []: each env's `contact_stiffness` summed over the steps simulated, mean over envs."""
    return jnp.mean(jnp.sum(window.stiffness * window.active, axis=0))


class Ahac(Shac):
    """AHAC for one environment and configuration (see the module docstring)."""

    def init_algo_state(self) -> dict:
        """`horizon`: float32 [] the continuous horizon, from `ahac.min_horizon`."""
        return {"horizon": jnp.asarray(self.config.ahac.min_horizon, jnp.float32)}

    def active_horizon(self, state: TrainState) -> jax.Array:
        """int32 [] round(H), within [min_horizon, horizon]."""
        steps = jnp.round(state.algo_state["horizon"]).astype(jnp.int32)
        return jnp.clip(steps, self.config.ahac.min_horizon, self.config.horizon)

    def critic_pass(
        self,
        carry: tuple[Params, optax.OptState],
        key: jax.Array,
        obs: jax.Array,
        targets: jax.Array,
        weights: jax.Array,
    ) -> tuple[tuple[Params, optax.OptState], tuple[jax.Array, jax.Array]]:
        """One shuffled pass over the samples simulated (weight 1) in `critic_minibatches` minibatches
        of equal size (within one sample), as the reference code's dataset of the window's steps; the
        rest of the buffer is never read. See `Shac.critic_pass` for the arguments and returns.

        A minibatch is evaluated in chunks of the smallest window's minibatch (N * `ahac.min_horizon`
        / `critic_minibatches` samples), its gradient summed over them, so a pass costs what the
        window simulated, not what the longest window would.
        """
        minibatches = self.config.critic_minibatches
        chunk = -(-self.config.num_envs * self.config.ahac.min_horizon // minibatches)
        simulated = weights > 0
        # the simulated samples first, in random order; then padding, so a chunk's slice stays in bounds
        order = jnp.argsort(jnp.where(simulated, jax.random.uniform(key, weights.shape), 2.0))
        order = jnp.concatenate([order, jnp.zeros(chunk, order.dtype)])
        bounds = jnp.arange(minibatches + 1) * jnp.sum(simulated) // minibatches

        def minibatch(carry, j):
            start, end = bounds[j], bounds[j + 1]

            def add_chunk(k, sums):
                first = start + k * chunk
                indices = jax.lax.dynamic_slice(order, (first,), (chunk,))
                inside = first + jnp.arange(chunk) < end  # past the minibatch's end: zeros, never read
                chunk_obs = jnp.where(inside[:, None], obs[indices], 0.0)
                chunk_targets = jnp.where(inside, targets[indices], 0.0)

                def squared_errors(p):  # summed over the chunk's samples, averaged over the critics
                    values = self.critic_values(p, chunk_obs)
                    return jnp.mean(jnp.sum(inside * (values - chunk_targets) ** 2, axis=-1))

                return jax.tree.map(jnp.add, sums, jax.value_and_grad(squared_errors)(carry[0]))

            zeros = (jnp.zeros((), targets.dtype), jax.tree.map(jnp.zeros_like, carry[0]))
            total, grads = jax.lax.fori_loop(0, (end - start + chunk - 1) // chunk, add_chunk, zeros)
            size = jnp.maximum(end - start, 1).astype(targets.dtype)
            carry, skipped = self.critic_update(carry, jax.tree.map(lambda g: g / size, grads))
            return carry, (total / size, skipped)

        carry, (batch_losses, skipped) = jax.lax.scan(minibatch, carry, jnp.arange(minibatches))
        return carry, (batch_losses.mean(), skipped.sum())

    def fit_critic(
        self,
        params: Params,
        opt_state: optax.OptState,
        obs: jax.Array,
        targets: jax.Array,
        weights: jax.Array,
        key: jax.Array,
    ) -> tuple[Params, optax.OptState, Metrics]:
        """Passes until the loss stops changing, at most `critic_iterations` (see `Shac.fit_critic` for the
        arguments): the fit stops once the loss moved by less than `ahac.critic_tolerance` per pass,
        on average over the last `PATIENCE` passes (|L_k - L_{k-PATIENCE}| / PATIENCE < tolerance).

        The loss of one pass (the mean over its minibatches, before each update) is noisy; averaging
        over several passes keeps that noise from stopping the fit while the loss still falls.
        """
        cap, tolerance = self.config.critic_iterations, self.config.ahac.critic_tolerance

        def improving(carry):
            passes, _, history, _ = carry
            change = jnp.abs(history[-1] - history[0]) / PATIENCE
            return (passes < cap) & ((passes <= PATIENCE) | (change >= tolerance))

        def one_pass(carry):
            passes, params_and_state, history, skipped = carry
            pass_key = jax.random.fold_in(key, passes)
            params_and_state, (loss, new_skipped) = self.critic_pass(params_and_state, pass_key, obs, targets, weights)
            history = jnp.concatenate([history[1:], loss[None]])
            return passes + 1, params_and_state, history, skipped + new_skipped

        history = jnp.full(PATIENCE + 1, jnp.inf, jnp.float32)
        init = (jnp.zeros((), jnp.int32), (params, opt_state), history, jnp.zeros((), jnp.int32))
        passes, (params, opt_state), history, skipped = jax.lax.while_loop(improving, one_pass, init)
        return params, opt_state, {"loss": history[-1], "skipped": skipped, "iterations": passes.astype(jnp.float32)}

    def after_epoch(self, state: TrainState, window: Window) -> tuple[dict, Metrics]:
        """The horizon's dual step; logs the horizon simulated and the window's stiffness."""
        config = self.config
        stiffness = window_stiffness(window)
        learning_rate = self.decayed(config.ahac.horizon_lr, self.decay_position(state), final=0.0)
        horizon = horizon_update(
            state.algo_state["horizon"],
            stiffness,
            config.ahac.stiffness_threshold,
            learning_rate,
            config.ahac.min_horizon,
            config.horizon,
        )
        metrics = {
            "ahac/horizon": self.active_horizon(state).astype(jnp.float32),
            "ahac/horizon_next": horizon,
            "ahac/stiffness": stiffness,
            "ahac/step_stiffness_max": jnp.max(window.stiffness * window.active),
        }
        return {"horizon": horizon}, metrics
