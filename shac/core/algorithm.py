"""SHAC as pure functions: the training state and one jitted epoch, built from parts its successors reuse.

One epoch = one differentiable window of N * h env steps, one actor step on
the short-horizon loss, critic fitting on TD(lambda) targets, and the target
critic update (docs/algorithm.md). AHAC (`shac.core.ahac`) and SAPO
(`shac.core.sapo`) subclass `Shac` and change only its hooks: `init_algo_state`
(their own state), `active_horizon` (the window's length), `rewards` (what the
actor maximises and the critic predicts), `fit_critic` and `after_epoch` (their
own updates and metrics); docs/algorithms.md.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property, partial

import jax
import jax.numpy as jnp
import optax
from flax import struct

from envs import MjxEnv, State
from shac.config import AlgoConfig
from shac.core import losses
from shac.core.episodes import EpisodeStats
from shac.core.networks import Actor, Critic, critic_ensemble
from shac.core.normalizer import RunningStatistics
from shac.core.rollout import Window, rollout, state_gradient_growth, zero_probes

Params = dict
Metrics = dict[str, jax.Array]


@struct.dataclass
class TrainState:
    """Everything that changes during training (a pytree; batched leaves have [N]).

    Attributes:
        actor_params, critic_params, target_critic_params: network parameters.
        actor_opt_state, critic_opt_state: optax states.
        normalizer: observation statistics.
        env_state: the N environments, carried from window to window.
        episodes: running episode returns and lengths, [N].
        key: PRNG key of the next epoch.
        epoch: int32 [] epochs completed.
        env_steps: int32 [] environment steps simulated.
        actor_skipped: int32 [] actor updates skipped for non-finite gradients.
        critic_skipped: int32 [] critic minibatch updates skipped likewise.
        train_seconds: float32 [] training seconds before this epoch, counted by the training loop under
            `algo.budget_minutes` (`shac.run.budget.TrainingClock`); 0 without a budget.
        algo_state: what an algorithm adds (AHAC's horizon, SAPO's temperature); empty for SHAC.
    """

    actor_params: Params
    critic_params: Params
    target_critic_params: Params
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    normalizer: RunningStatistics
    env_state: State
    episodes: EpisodeStats
    key: jax.Array
    epoch: jax.Array
    env_steps: jax.Array
    actor_skipped: jax.Array
    critic_skipped: jax.Array
    train_seconds: jax.Array
    algo_state: dict = struct.field(default_factory=dict)


class Shac:
    """SHAC for one environment and configuration: networks, optimisers, `init` and `epoch`.

    Args:
        config: the algorithm's hyperparameters.
        env: the environment to train on (unbatched; batched with vmap here).
    """

    def __init__(self, config: AlgoConfig, env: MjxEnv):
        self.config = config
        self.env = env
        self.actor = Actor(
            hidden=tuple(config.actor_hidden),
            action_size=env.action_size,
            init_log_std=config.init_log_std,
            state_dependent_std=config.state_dependent_std,
            activation=config.activation,
        )
        critic = Critic if config.num_critics == 1 else critic_ensemble(config.num_critics)
        self.critic = critic(hidden=tuple(config.critic_hidden), activation=config.activation)
        # The learning rates live in the optimiser states, set each epoch from `decay_position`.
        self.actor_optimizer = optax.inject_hyperparams(self.actor_transform)(
            learning_rate=jnp.asarray(config.actor_lr, jnp.float32)
        )
        self.critic_optimizer = optax.inject_hyperparams(self.critic_transform)(
            learning_rate=jnp.asarray(config.critic_lr, jnp.float32)
        )

    def adam(self, learning_rate: optax.ScalarOrSchedule) -> optax.GradientTransformation:
        """Adam with the config's betas, or AdamW when `weight_decay` > 0."""
        config = self.config
        if config.weight_decay > 0:
            return optax.adamw(learning_rate, config.adam_b1, config.adam_b2, weight_decay=config.weight_decay)
        return optax.adam(learning_rate, b1=config.adam_b1, b2=config.adam_b2)

    def actor_transform(self, learning_rate: optax.ScalarOrSchedule) -> optax.GradientTransformation:
        """`adam` on `learning_rate`, after a global-norm clip at `actor_grad_norm`."""
        return optax.chain(optax.clip_by_global_norm(self.config.actor_grad_norm), self.adam(learning_rate))

    def critic_transform(self, learning_rate: optax.ScalarOrSchedule) -> optax.GradientTransformation:
        """`adam` on `learning_rate`, after a global-norm clip if `critic_grad_norm` > 0."""
        if self.config.critic_grad_norm > 0:
            return optax.chain(optax.clip_by_global_norm(self.config.critic_grad_norm), self.adam(learning_rate))
        return self.adam(learning_rate)

    def decay_position(self, state: TrainState) -> jax.Array:
        """float32 []: how far the learning-rate decays are at the start of this epoch, in epochs of
        `max_epochs`: the epochs completed or, under `algo.budget_minutes` or `algo.max_env_steps`, the share
        of that budget spent (`state.train_seconds`, `state.env_steps`) times `max_epochs`, the furthest."""
        config = self.config
        position = state.epoch.astype(jnp.float32)
        if config.budget_minutes is not None:
            spent = state.train_seconds / (60.0 * config.budget_minutes)
            position = jnp.maximum(position, spent * config.max_epochs)
        if config.max_env_steps is not None:
            spent = state.env_steps.astype(jnp.float32) / config.max_env_steps
            position = jnp.maximum(position, spent * config.max_epochs)
        return position

    def decayed(self, initial: float, position: jax.Array, final: float | None = None) -> jax.Array:
        """float32 []: `initial` decayed linearly to `final` (default `min_lr`) over `max_epochs`, at `position`."""
        final = self.config.min_lr if final is None else final
        return optax.linear_schedule(initial, final, self.config.max_epochs)(position)

    def init_algo_state(self) -> dict:
        """The algorithm's own state (`TrainState.algo_state`); SHAC has none."""
        return {}

    def init(self, key: jax.Array) -> TrainState:
        """Fresh parameters, optimiser states and N freshly reset environments."""
        actor_key, critic_key, env_key, key = jax.random.split(key, 4)
        obs_dim, n = self.env.observation_size, self.config.num_envs
        dummy_obs = jnp.zeros((obs_dim,))
        actor_params = self.actor.init(actor_key, dummy_obs)
        critic_params = self.critic.init(critic_key, dummy_obs)
        return TrainState(
            actor_params=actor_params,
            critic_params=critic_params,
            target_critic_params=critic_params,
            actor_opt_state=self.actor_optimizer.init(actor_params),
            critic_opt_state=self.critic_optimizer.init(critic_params),
            normalizer=RunningStatistics.create(obs_dim),
            env_state=strongly_typed(self.initial_env_states(env_key)),
            episodes=EpisodeStats.create(n),
            key=key,
            epoch=jnp.zeros((), jnp.int32),
            env_steps=jnp.zeros((), jnp.int32),
            actor_skipped=jnp.zeros((), jnp.int32),
            critic_skipped=jnp.zeros((), jnp.int32),
            train_seconds=jnp.zeros((), jnp.float32),
            algo_state=self.init_algo_state(),
        )

    @cached_property
    def state_shapes(self) -> TrainState:
        """The shapes and dtypes of `init`'s state (`jax.eval_shape`), traced once: a trace of an MJX
        reset takes seconds."""
        return jax.eval_shape(self.init, jax.random.key(0))

    def initial_env_states(self, key: jax.Array) -> State:
        """N fresh env states; with `staggered_starts`, each one's clock at a uniform step in [0, episode_length)."""
        states = jax.vmap(self.env.reset)(jax.random.split(key, self.config.num_envs))
        if not self.config.staggered_starts:
            return states
        data = states.pipeline_state
        if not hasattr(data, "time") or not hasattr(self.env, "ctrl_dt"):
            raise ValueError(
                f"algo.staggered_starts needs an env whose time limit reads the simulator's clock "
                f"(pipeline_state.time and ctrl_dt, as envs.MjxEnv's); {type(self.env).__name__} has none"
            )
        steps = jax.random.randint(jax.random.fold_in(key, 1), (self.config.num_envs,), 0, self.env.episode_length)
        return states.replace(pipeline_state=data.replace(time=(steps * self.env.ctrl_dt).astype(data.time.dtype)))

    def policy(self, actor_params: Params) -> Callable[[jax.Array], tuple[jax.Array, jax.Array]]:
        """Normalised obs [N, obs_dim] -> (mean, log_std) under `actor_params`."""
        return partial(self.actor.apply, actor_params)

    def per_env_policy(self, actor_params: Params) -> Callable[[jax.Array], tuple[jax.Array, jax.Array]]:
        """Normalised obs [..., N, obs_dim] -> (mean, log_std), env i acting under its own copy of the
        parameters (`actor_params` with a leading axis [N, ...]), so the gradient with respect to the copies
        is each env's share of the whole."""

        def apply(obs: jax.Array) -> tuple[jax.Array, jax.Array]:
            env_axis = obs.ndim - 2
            return jax.vmap(self.actor.apply, in_axes=(0, env_axis), out_axes=env_axis)(actor_params, obs)

        return apply

    def critic_values(self, critic_params: Params, obs: jax.Array) -> jax.Array:
        """Normalised obs float32 [..., obs_dim] -> every critic's values, float32 [num_critics, ...]."""
        values = self.critic.apply(critic_params, obs)
        return values[None] if self.config.num_critics == 1 else values

    def value(self, critic_params: Params, obs: jax.Array) -> jax.Array:
        """Normalised obs float32 [..., obs_dim] -> one value per obs, float32 [...] (critics combined)."""
        values = self.critic_values(critic_params, obs)
        return values.min(axis=0) if self.config.critic_combine == "min" else values.mean(axis=0)

    def active_horizon(self, state: TrainState) -> jax.Array | None:
        """int32 [] steps of this epoch's window, or None for all `horizon` (SHAC)."""
        del state
        return None

    def rewards(self, window: Window, state: TrainState) -> jax.Array:
        """float32 [h, N] the rewards the actor maximises and the critic predicts: the env's, in SHAC."""
        del state
        return window.rewards

    def actor_objective(
        self,
        actor_params: Params,
        state: TrainState,
        reset_states: State,
        key: jax.Array,
        state_probes=None,
        per_env: bool = False,
    ) -> tuple[jax.Array, tuple[State, Window]]:
        """The actor loss of one window from `state.env_state`, and what the window produced
        (`state_probes`: see `rollout`; `per_env`: `actor_params` holds one copy per env, see `per_env_policy`)."""
        policy = (self.per_env_policy if per_env else self.policy)(actor_params)
        env_state, window = rollout(
            self.env,
            policy,
            partial(self.value, state.target_critic_params),
            jax.lax.stop_gradient(state.normalizer),
            jax.lax.stop_gradient(state.env_state),
            reset_states,
            key,
            self.config.horizon,
            self.config.remat_every,
            self.active_horizon(state),
            state_probes,
            self.config.state_grad_decay,
        )
        loss = losses.actor_loss(
            self.rewards(window, state), window.next_values, window.dones, self.config.gamma, window.active
        )
        if self.config.action_mean_penalty > 0:
            mean, _ = policy(jax.lax.stop_gradient(window.obs))
            active = jax.lax.stop_gradient(window.active)[..., None]
            loss = loss + self.config.action_mean_penalty * jnp.sum(active * mean**2) / (
                jnp.maximum(jnp.sum(active), 1.0) * mean.shape[-1]
            )
        return loss, (env_state, window)

    def saturation(self, actor_params: Params, obs: jax.Array, active: jax.Array | None = None) -> jax.Array:
        """float32 []: the fraction of action components whose mean squashes past 0.95 on `obs`
        (normalised, [..., obs_dim]; only where `active` [...] is 1, if given): where tanh passes
        almost no gradient (its slope < 0.1)."""
        mean, _ = self.policy(actor_params)(obs)
        saturated = jnp.mean(jnp.abs(jnp.tanh(mean)) > 0.95, axis=-1)
        if active is None:
            return jnp.mean(saturated)
        return jnp.sum(active * saturated) / jnp.maximum(jnp.sum(active), 1.0)

    def critic_targets(self, window: Window, state: TrainState) -> jax.Array:
        """float32 [h, N] value targets of the window (meaningless where `window.active` is 0)."""
        rewards = jax.lax.stop_gradient(self.rewards(window, state))
        if self.config.critic_target == "one_step":
            return losses.one_step_targets(rewards, window.next_values, self.config.gamma)
        return losses.td_lambda_targets(
            rewards, window.next_values, window.dones, self.config.gamma, self.config.lam, window.active
        )

    def critic_pass(
        self,
        carry: tuple[Params, optax.OptState],
        key: jax.Array,
        obs: jax.Array,
        targets: jax.Array,
        weights: jax.Array,
    ) -> tuple[tuple[Params, optax.OptState], tuple[jax.Array, jax.Array]]:
        """One shuffled pass over the samples in `critic_minibatches` minibatches.

        Args:
            carry: (critic parameters, optimiser state).
            obs: float32 [M, obs_dim]; targets, weights: float32 [M] (weight 0: not a sample).

        Returns:
            The new carry; the pass's mean loss and its minibatch updates skipped for non-finite gradients.
        """

        def minibatch(carry, indices):
            def loss_fn(p):
                return losses.critic_loss(self.critic_values(p, obs[indices]), targets[indices], weights[indices])

            loss, grads = jax.value_and_grad(loss_fn)(carry[0])
            carry, skipped = self.critic_update(carry, grads)
            return carry, (loss, skipped)

        order = jax.random.permutation(key, targets.shape[0]).reshape(self.config.critic_minibatches, -1)
        carry, (batch_losses, skipped) = jax.lax.scan(minibatch, carry, order)
        return carry, (batch_losses.mean(), skipped.sum())

    def critic_update(
        self, carry: tuple[Params, optax.OptState], grads: Params
    ) -> tuple[tuple[Params, optax.OptState], jax.Array]:
        """One optimiser step of the critic on a minibatch's `grads`, skipped where they are not finite:
        the new (parameters, optimiser state) and bool [] whether it was skipped."""
        params, opt_state = carry
        updates, new_opt_state = self.critic_optimizer.update(grads, opt_state, params)
        finite = jnp.isfinite(optax.global_norm(grads))
        carry = _select(finite, (optax.apply_updates(params, updates), new_opt_state), carry)
        return carry, ~finite

    def fit_critic(
        self,
        params: Params,
        opt_state: optax.OptState,
        obs: jax.Array,
        targets: jax.Array,
        weights: jax.Array,
        key: jax.Array,
    ) -> tuple[Params, optax.OptState, Metrics]:
        """Minibatch regression of the critic onto `targets`: `critic_iterations` passes.

        Args:
            obs: float32 [M, obs_dim] normalised observations, M = N * h.
            targets, weights: float32 [M] (see `critic_pass`).

        Returns:
            New parameters and optimiser state; `loss` (mean of the last pass),
            `skipped` (minibatch updates with non-finite gradients) and `iterations` (passes).
        """

        def iteration(carry, key):
            return self.critic_pass(carry, key, obs, targets, weights)

        keys = jax.random.split(key, self.config.critic_iterations)
        (params, opt_state), (pass_losses, skipped) = jax.lax.scan(iteration, (params, opt_state), keys)
        iterations = jnp.asarray(self.config.critic_iterations, jnp.float32)
        return params, opt_state, {"loss": pass_losses[-1], "skipped": skipped.sum(), "iterations": iterations}

    def after_epoch(self, state: TrainState, window: Window) -> tuple[dict, Metrics]:
        """The algorithm's own update after the actor and critic steps: new `algo_state` and metrics.

        Args:
            state: the state the epoch started from.
            window: the epoch's window (no gradient).
        """
        del window
        return state.algo_state, {}

    def actor_gradient(
        self, state: TrainState, reset_states: State, key: jax.Array, probes
    ) -> tuple[tuple[jax.Array, tuple[State, Window]], tuple[Params, object]]:
        """((actor loss, (env state, window)), (gradient w.r.t. the actor parameters, w.r.t. `probes`))
        of one window from `state` (`probes`: zero state probes, see `rollout`). With
        `actor_env_clip_quantile` > 0 the parameter gradient is each env's share, [N, ...] per leaf
        (`combine_env_gradients` sums them)."""
        per_env = self.config.actor_env_clip_quantile > 0
        params = state.actor_params
        if per_env:
            params = jax.tree.map(lambda p: jnp.broadcast_to(p, (self.config.num_envs, *p.shape)), params)
        return jax.value_and_grad(
            lambda params, probes: self.actor_objective(params, state, reset_states, key, probes, per_env),
            argnums=(0, 1),
            has_aux=True,
        )(params, probes)

    def combine_env_gradients(self, grads: Params) -> tuple[Params, Metrics]:
        """`actor_gradient`'s parameter gradient as one gradient and its metrics: with
        `actor_env_clip_quantile` q > 0, the per-env shares [N, ...] each clipped to the q-quantile of their
        N norms, then summed (`actor/env_grad_spread`: the largest norm over that bound); else unchanged."""
        quantile = self.config.actor_env_clip_quantile
        if quantile == 0:
            return grads, {}
        combined, spread = clipped_sum(grads, quantile)
        return combined, {"actor/env_grad_spread": spread}

    def critic_step(
        self, state: TrainState, window: Window, key: jax.Array, learning_rate: jax.Array
    ) -> tuple[Params, optax.OptState, Metrics, jax.Array]:
        """The critic regressed onto the window's targets (`fit_critic` on its N * h samples) at
        `learning_rate`: new parameters, optimiser state, the fit's metrics and the targets, float32 [h, N]."""
        targets = self.critic_targets(window, state)
        params, opt_state, metrics = self.fit_critic(
            state.critic_params,
            with_learning_rate(state.critic_opt_state, learning_rate),
            window.obs.reshape(-1, window.obs.shape[-1]),
            targets.reshape(-1),
            window.active.reshape(-1),
            key,
        )
        return params, opt_state, metrics, targets

    def target_update(self, target_params: Params, critic_params: Params) -> Params:
        """The target critic moved towards `critic_params`: alpha * target + (1 - alpha) * online."""
        alpha = self.config.target_alpha
        return jax.tree.map(
            lambda target, online: alpha * target + (1.0 - alpha) * online, target_params, critic_params
        )

    def epoch(self, state: TrainState) -> tuple[TrainState, Metrics]:
        """One SHAC epoch; pure, so `jax.jit(shac.epoch)` compiles it once."""
        config = self.config
        key, reset_key, rollout_key, critic_key = jax.random.split(state.key, 4)
        reset_states = jax.vmap(self.env.reset)(jax.random.split(reset_key, config.num_envs))

        # Actor: back-propagate the window's return; skip non-finite gradients. The gradient with
        # respect to zero probes on each step's state shows how it grows back through the window.
        probes = zero_probes(state.env_state.pipeline_state, config.horizon)
        (actor_loss, (env_state, window)), (grads, probe_grads) = self.actor_gradient(
            state, reset_states, rollout_key, probes
        )
        grads, env_grad_metrics = self.combine_env_gradients(grads)
        grad_norm = optax.global_norm(grads)
        actor_finite = jnp.isfinite(grad_norm)
        frozen = state.epoch < config.critic_warmup_epochs  # the critic's warm-up: no actor update yet
        position = self.decay_position(state)
        actor_lr, critic_lr = self.decayed(config.actor_lr, position), self.decayed(config.critic_lr, position)
        actor_opt_state = with_learning_rate(state.actor_opt_state, actor_lr)
        updates, actor_opt_state = self.actor_optimizer.update(grads, actor_opt_state, state.actor_params)
        actor_params, actor_opt_state = _select(
            actor_finite & ~frozen,
            (optax.apply_updates(state.actor_params, updates), actor_opt_state),
            (state.actor_params, state.actor_opt_state),
        )

        # Critic: regress onto the window's targets, then move the target critic.
        window = jax.lax.stop_gradient(window)
        critic_params, critic_opt_state, critic_metrics, targets = self.critic_step(
            state, window, critic_key, critic_lr
        )
        target_critic_params = self.target_update(state.target_critic_params, critic_params)

        algo_state, algo_metrics = self.after_epoch(state, window)
        normalizer = state.normalizer
        if config.normalize_obs:
            normalizer = normalizer.update(window.raw_obs, window.active)
        episodes, episode_metrics = state.episodes.update(window.rewards, window.dones, window.active)
        critic_skipped = critic_metrics["skipped"].astype(jnp.int32)
        active_steps = window.active.sum()
        new_state = TrainState(
            actor_params=actor_params,
            critic_params=critic_params,
            target_critic_params=target_critic_params,
            actor_opt_state=actor_opt_state,
            critic_opt_state=critic_opt_state,
            normalizer=normalizer,
            env_state=strongly_typed(env_state),
            episodes=episodes,
            key=key,
            epoch=state.epoch + 1,
            env_steps=state.env_steps + active_steps.astype(jnp.int32),
            actor_skipped=state.actor_skipped + (~actor_finite).astype(jnp.int32),
            critic_skipped=state.critic_skipped + critic_skipped,
            train_seconds=state.train_seconds,
            algo_state=algo_state,
        )
        _, log_std = self.policy(actor_params)(jnp.zeros((self.env.observation_size,)))
        metrics = {
            "actor/loss": actor_loss,
            "actor/grad_norm": grad_norm,
            "actor/clipped": (grad_norm > config.actor_grad_norm).astype(jnp.float32),
            "actor/skipped": (~actor_finite).astype(jnp.float32),
            "actor/frozen": frozen.astype(jnp.float32),
            "actor/lr": actor_lr,
            "actor/std": jnp.exp(log_std).mean(),
            "actor/saturation": self.saturation(state.actor_params, window.obs, window.active),
            "actor/state_grad_growth": state_gradient_growth(probe_grads, window.active),
            "critic/loss": critic_metrics["loss"],
            "critic/skipped": critic_metrics["skipped"].astype(jnp.float32),
            "critic/lr": critic_lr,
            "critic/iterations": critic_metrics["iterations"],
            "critic/target_mean": (targets * window.active).sum() / active_steps,
            "train/reward": window.rewards.sum() / active_steps,
            "train/episodes": episode_metrics["episodes"],
            "train/episode_return": episode_metrics["episode_return"],
            "train/episode_length": episode_metrics["episode_length"],
            "physics/contact_fraction": (window.contacts * window.active).sum() / active_steps,
            "resets/terminated": window.terminated.sum(),
            "resets/truncated": window.truncated.sum(),
            "resets/nonfinite": window.nonfinite.sum(),
            "resets/too_fast": window.too_fast.sum(),
            "resets/nonfinite_envs": window.nonfinite.max(axis=0).sum(),
            **{f"reward/{name}": value.sum() / active_steps for name, value in window.metrics.items()},
            **env_grad_metrics,
            **algo_metrics,
        }
        return new_state, metrics


def clipped_sum(shares: Params, quantile: float) -> tuple[Params, jax.Array]:
    """Per-env gradient shares, [N, ...] per leaf -> (their sum after clipping each share's norm to the
    `quantile` of the nonzero norms among the N, float32 [] the largest norm over that bound; 1 when every
    share is zero). Envs whose share is zero (a flat reward, a finished episode) do not lower the bound.
    NaN in any share makes both NaN."""
    norms = jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree.leaves(shares)))
    bound = jnp.nanquantile(jnp.where(norms > 0, norms, jnp.nan), quantile)  # NaN when no share is nonzero
    scale = jnp.where(norms > bound, bound / jnp.where(norms > bound, norms, 1.0), 1.0)
    spread = jnp.where(jnp.all(norms == 0), 1.0, norms.max() / bound)
    return jax.tree.map(lambda g: jnp.tensordot(scale, g, axes=1), shares), spread


def with_learning_rate(opt_state: optax.OptState, learning_rate: jax.Array) -> optax.OptState:
    """An `optax.inject_hyperparams` state with its `learning_rate` set to `learning_rate` (float32 [])."""
    return opt_state._replace(hyperparams={**opt_state.hyperparams, "learning_rate": learning_rate})


def strongly_typed(tree):
    """`tree` with its weakly typed leaves (`jnp.array(0.0)`, a Python float in an env's reset) given
    their dtype strongly, so the epoch takes and returns the same types and `jit` compiles it once."""
    return jax.tree.map(lambda x: x.astype(x.dtype) if jax.typeof(x).weak_type else x, tree)


def _select(pred: jax.Array, on_true, on_false):
    """`on_true` if the scalar `pred` holds, else `on_false`, leaf by leaf."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)
