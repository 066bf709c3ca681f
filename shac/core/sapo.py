"""SAPO: SHAC in the maximum-entropy framework.

Xing et al., "Stabilizing Reinforcement Learning in Differentiable Multiphysics
Simulation" (ICLR 2025). What differs from SHAC:

- The rewards the actor maximises and the critic predicts are
  r_t - alpha * log pi(a_t | s_t) (`losses.soft_rewards`): the policy's entropy
  enters the window's return and the TD(lambda) targets.
- The temperature alpha follows the policy's entropy toward a target by Adam
  on log(alpha) (`losses.temperature_loss`), once per epoch.
- The policy is a tanh-squashed Gaussian with a state-dependent standard
  deviation (`algo.state_dependent_std`), its log-density computed stably
  (`networks.squashed_log_prob`); the deterministic action stays tanh(mean).
- Two critics averaged, no target critic (`algo.num_critics=2`,
  `algo.critic_combine=mean`, `algo.target_alpha=0`), AdamW, SiLU, and
  gradient-norm clips of 0.5 (configs/algo/sapo.yaml).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from shac.core import losses
from shac.core.algorithm import Metrics, Shac, TrainState
from shac.core.rollout import Window


def window_entropy(window: Window) -> jax.Array:
    """float32 []: the policy's entropy estimate, -log pi(a_t | s_t) averaged over the steps simulated."""
    return -jnp.sum(window.log_probs * window.active) / jnp.maximum(jnp.sum(window.active), 1.0)


class Sapo(Shac):
    """SAPO for one environment and configuration (see the module docstring)."""

    @property
    def temperature_optimizer(self) -> optax.GradientTransformation:
        return optax.adam(self.config.sapo.temperature_lr)

    @property
    def target_entropy(self) -> float:
        """The entropy the temperature steers toward: `target_entropy_per_action` * action_size."""
        return self.config.sapo.target_entropy_per_action * self.env.action_size

    def init_algo_state(self) -> dict:
        """`log_temperature`: float32 [] log(alpha); `temperature_opt_state`: its Adam state."""
        log_temperature = jnp.log(jnp.asarray(self.config.sapo.init_temperature, jnp.float32))
        return {
            "log_temperature": log_temperature,
            "temperature_opt_state": self.temperature_optimizer.init(log_temperature),
        }

    def rewards(self, window: Window, state: TrainState) -> jax.Array:
        """r_t - alpha * log pi(a_t | s_t), float32 [h, N]."""
        temperature = jnp.exp(state.algo_state["log_temperature"])
        return losses.soft_rewards(window.rewards, window.log_probs, temperature)

    def after_epoch(self, state: TrainState, window: Window) -> tuple[dict, Metrics]:
        """One Adam step of log(alpha) on `losses.temperature_loss`; logs alpha and the entropy."""
        entropy = window_entropy(window)
        log_temperature = state.algo_state["log_temperature"]
        grad = jax.grad(losses.temperature_loss)(log_temperature, entropy, self.target_entropy)
        updates, opt_state = self.temperature_optimizer.update(grad, state.algo_state["temperature_opt_state"])
        new_log_temperature = optax.apply_updates(log_temperature, updates)
        metrics = {"sapo/temperature": jnp.exp(log_temperature), "sapo/entropy": entropy}
        return {"log_temperature": new_log_temperature, "temperature_opt_state": opt_state}, metrics
