"""SHAC as pure functions: the training state and one jitted epoch.

One epoch = one differentiable window of N * h env steps, one actor step on
the short-horizon loss, critic fitting on TD(lambda) targets, and the target
critic update (docs/algorithm.md).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import optax
from flax import struct

from envs import MjxEnv, State
from shac.config import AlgoConfig
from shac.core import losses
from shac.core.episodes import EpisodeStats
from shac.core.networks import Actor, Critic
from shac.core.normalizer import RunningStatistics
from shac.core.rollout import Window, rollout

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
            hidden=tuple(config.actor_hidden), action_size=env.action_size, init_log_std=config.init_log_std
        )
        self.critic = Critic(hidden=tuple(config.critic_hidden))
        self.actor_lr = optax.linear_schedule(config.actor_lr, config.min_lr, config.max_epochs)
        critic_updates_per_epoch = config.critic_iterations * config.critic_minibatches
        self.critic_lr = optax.linear_schedule(
            config.critic_lr, config.min_lr, config.max_epochs * critic_updates_per_epoch
        )
        self.actor_optimizer = optax.chain(
            optax.clip_by_global_norm(config.actor_grad_norm),
            optax.adam(self.actor_lr, b1=config.adam_b1, b2=config.adam_b2),
        )
        self.critic_optimizer = optax.adam(self.critic_lr, b1=config.adam_b1, b2=config.adam_b2)

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
            env_state=jax.vmap(self.env.reset)(jax.random.split(env_key, n)),
            episodes=EpisodeStats.create(n),
            key=key,
            epoch=jnp.zeros((), jnp.int32),
            env_steps=jnp.zeros((), jnp.int32),
            actor_skipped=jnp.zeros((), jnp.int32),
            critic_skipped=jnp.zeros((), jnp.int32),
        )

    def policy(self, actor_params: Params) -> Callable[[jax.Array], tuple[jax.Array, jax.Array]]:
        """Normalised obs [N, obs_dim] -> (mean, log_std) under `actor_params`."""
        return partial(self.actor.apply, actor_params)

    def actor_objective(
        self, actor_params: Params, state: TrainState, reset_states: State, key: jax.Array
    ) -> tuple[jax.Array, tuple[State, Window]]:
        """The actor loss of one window from `state.env_state`, and what the window produced."""
        env_state, window = rollout(
            self.env,
            self.policy(actor_params),
            partial(self.critic.apply, state.target_critic_params),
            jax.lax.stop_gradient(state.normalizer),
            jax.lax.stop_gradient(state.env_state),
            reset_states,
            key,
            self.config.horizon,
            self.config.remat_every,
        )
        loss = losses.actor_loss(window.rewards, window.next_values, window.dones, self.config.gamma)
        if self.config.action_mean_penalty > 0:
            mean, _ = self.policy(actor_params)(jax.lax.stop_gradient(window.obs))
            loss = loss + self.config.action_mean_penalty * jnp.mean(mean**2)
        return loss, (env_state, window)

    def saturation(self, actor_params: Params, obs: jax.Array) -> jax.Array:
        """float32 []: the fraction of action components whose mean squashes past 0.95 on `obs`
        (normalised, [..., obs_dim]): where tanh passes almost no gradient (its slope < 0.1)."""
        mean, _ = self.policy(actor_params)(obs)
        return jnp.mean(jnp.abs(jnp.tanh(mean)) > 0.95)

    def critic_targets(self, window: Window) -> jax.Array:
        """float32 [h, N] value targets of the window."""
        if self.config.critic_target == "one_step":
            return losses.one_step_targets(window.rewards, window.next_values, self.config.gamma)
        return losses.td_lambda_targets(
            window.rewards, window.next_values, window.dones, self.config.gamma, self.config.lam
        )

    def fit_critic(
        self, params: Params, opt_state: optax.OptState, obs: jax.Array, targets: jax.Array, key: jax.Array
    ) -> tuple[Params, optax.OptState, Metrics]:
        """Minibatch regression of the critic onto `targets`.

        Args:
            obs: float32 [M, obs_dim] normalised observations, M = N * h.
            targets: float32 [M].

        Returns:
            New parameters and optimiser state; `loss` (mean of the last pass)
            and `skipped` (minibatch updates with non-finite gradients).
        """
        num_minibatches = self.config.critic_minibatches

        def minibatch(carry, indices):
            params, opt_state = carry

            def loss_fn(p):
                return losses.critic_loss(self.critic.apply(p, obs[indices]), targets[indices])

            loss, grads = jax.value_and_grad(loss_fn)(params)
            updates, new_opt_state = self.critic_optimizer.update(grads, opt_state, params)
            finite = jnp.isfinite(optax.global_norm(grads))
            params, opt_state = _select(
                finite, (optax.apply_updates(params, updates), new_opt_state), (params, opt_state)
            )
            return (params, opt_state), (loss, ~finite)

        def iteration(carry, key):
            order = jax.random.permutation(key, targets.shape[0]).reshape(num_minibatches, -1)
            carry, (batch_losses, skipped) = jax.lax.scan(minibatch, carry, order)
            return carry, (batch_losses.mean(), skipped.sum())

        keys = jax.random.split(key, self.config.critic_iterations)
        (params, opt_state), (pass_losses, skipped) = jax.lax.scan(iteration, (params, opt_state), keys)
        return params, opt_state, {"loss": pass_losses[-1], "skipped": skipped.sum()}

    def epoch(self, state: TrainState) -> tuple[TrainState, Metrics]:
        """One SHAC epoch; pure, so `jax.jit(shac.epoch)` compiles it once."""
        config = self.config
        key, reset_key, rollout_key, critic_key = jax.random.split(state.key, 4)
        reset_states = jax.vmap(self.env.reset)(jax.random.split(reset_key, config.num_envs))

        # Actor: back-propagate the window's return; skip non-finite gradients.
        (actor_loss, (env_state, window)), grads = jax.value_and_grad(self.actor_objective, has_aux=True)(
            state.actor_params, state, reset_states, rollout_key
        )
        grad_norm = optax.global_norm(grads)
        actor_finite = jnp.isfinite(grad_norm)
        updates, actor_opt_state = self.actor_optimizer.update(grads, state.actor_opt_state, state.actor_params)
        actor_params, actor_opt_state = _select(
            actor_finite,
            (optax.apply_updates(state.actor_params, updates), actor_opt_state),
            (state.actor_params, state.actor_opt_state),
        )

        # Critic: regress onto the window's targets, then move the target critic.
        window = jax.lax.stop_gradient(window)
        targets = self.critic_targets(window)
        critic_params, critic_opt_state, critic_metrics = self.fit_critic(
            state.critic_params,
            state.critic_opt_state,
            window.obs.reshape(-1, window.obs.shape[-1]),
            targets.reshape(-1),
            critic_key,
        )
        alpha = config.target_alpha
        target_critic_params = jax.tree.map(
            lambda target, online: alpha * target + (1.0 - alpha) * online,
            state.target_critic_params,
            critic_params,
        )

        normalizer = state.normalizer.update(window.raw_obs) if config.normalize_obs else state.normalizer
        episodes, episode_metrics = state.episodes.update(window.rewards, window.dones)
        critic_skipped = critic_metrics["skipped"].astype(jnp.int32)
        new_state = TrainState(
            actor_params=actor_params,
            critic_params=critic_params,
            target_critic_params=target_critic_params,
            actor_opt_state=actor_opt_state,
            critic_opt_state=critic_opt_state,
            normalizer=normalizer,
            env_state=env_state,
            episodes=episodes,
            key=key,
            epoch=state.epoch + 1,
            env_steps=state.env_steps + config.num_envs * config.horizon,
            actor_skipped=state.actor_skipped + (~actor_finite).astype(jnp.int32),
            critic_skipped=state.critic_skipped + critic_skipped,
        )
        _, log_std = self.policy(actor_params)(jnp.zeros((self.env.observation_size,)))
        metrics = {
            "actor/loss": actor_loss,
            "actor/grad_norm": grad_norm,
            "actor/clipped": (grad_norm > config.actor_grad_norm).astype(jnp.float32),
            "actor/skipped": (~actor_finite).astype(jnp.float32),
            "actor/lr": self.actor_lr(state.epoch),
            "actor/std": jnp.exp(log_std).mean(),
            "actor/saturation": self.saturation(state.actor_params, window.obs),
            "critic/loss": critic_metrics["loss"],
            "critic/skipped": critic_metrics["skipped"].astype(jnp.float32),
            "critic/lr": self.critic_lr(state.epoch * config.critic_iterations * config.critic_minibatches),
            "critic/target_mean": targets.mean(),
            "train/reward": window.rewards.mean(),
            "train/episodes": episode_metrics["episodes"],
            "train/episode_return": episode_metrics["episode_return"],
            "train/episode_length": episode_metrics["episode_length"],
            "resets/terminated": window.terminated.sum(),
            "resets/truncated": window.truncated.sum(),
            "resets/nonfinite": window.nonfinite.sum(),
            "resets/too_fast": window.too_fast.sum(),
            "resets/nonfinite_envs": window.nonfinite.max(axis=0).sum(),
            **{f"reward/{name}": value.mean() for name, value in window.metrics.items()},
        }
        return new_state, metrics


def _select(pred: jax.Array, on_true, on_false):
    """`on_true` if the scalar `pred` holds, else `on_false`, leaf by leaf."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)
