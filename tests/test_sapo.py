"""SAPO: the temperature's sign and fixed point, the entropy in the actor's return and the critic's
targets, no target critic, and the export of its policy (tanh of the mean)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shac.config import SapoConfig
from shac.core.sapo import Sapo
from shac.run import export
from tests import tiny_configs
from tests.test_ahac import window_of
from tests.toy_env import LineEnv

CONFIG = dataclasses.replace(
    tiny_configs.SAPO,
    sapo=SapoConfig(init_temperature=2.0, temperature_lr=5e-3, target_entropy_per_action=-0.5),
)


def window_with_log_probs(log_probs, rewards=None, next_values=None):
    """A window of 2 steps of 1 env with these log pi(a_t | s_t) (and rewards, bootstrap values)."""
    window = window_of(jnp.zeros((2, 1)), jnp.ones((2, 1)))
    window = window.replace(log_probs=jnp.asarray(log_probs, jnp.float32).reshape(2, 1))
    if rewards is not None:
        window = window.replace(rewards=jnp.asarray(rewards, jnp.float32).reshape(2, 1))
        window = window.replace(next_values=jnp.asarray(next_values, jnp.float32).reshape(2, 1))
    return window


@pytest.fixture(scope="module")
def sapo():
    algo = Sapo(CONFIG, LineEnv())
    return algo, algo.init(jax.random.key(0))


@pytest.mark.parametrize(
    ("log_prob", "direction"),
    [(-1.0, -1), (2.0, +1), (0.5, 0)],
    ids=["entropy_above_target", "entropy_below_target", "entropy_at_target"],
)
def test_temperature_moves_toward_the_target_entropy(sapo, log_prob, direction):
    # target = -0.5 * action_size (1) = -0.5; entropy estimate = -log pi: 1.0 (above: alpha falls),
    # -2.0 (below: alpha rises), -0.5 (at the target: the gradient, and Adam's step, are 0).
    # Adam's first step is lr * sign(gradient): log alpha moves by exactly -+5e-3.
    algo, state = sapo
    algo_state, metrics = algo.after_epoch(state, window_with_log_probs([log_prob, log_prob]))
    assert float(metrics["sapo/entropy"]) == pytest.approx(-log_prob)
    assert float(metrics["sapo/temperature"]) == pytest.approx(2.0)
    step = float(algo_state["log_temperature"] - state.algo_state["log_temperature"])
    assert step == pytest.approx(direction * 5e-3, abs=1e-7)


def test_entropy_enters_the_actor_return_and_the_critic_targets(sapo):
    # alpha = 2, log pi = [-1, 0.5]: soft rewards 1 - 2 * (-1) = 3 and 2 - 2 * 0.5 = 1.
    # TD(lambda) with gamma = 0.99, lambda = 0.95 over 2 steps, V'(s_1) = 4, V'(s_2) = 8 (window end):
    # t = 1: 1 + 0.99 * 8 = 8.92
    # t = 0: G1 = 3 + 0.99 * 4 = 6.96; G2 = 3 + 0.99 * 1 + 0.99^2 * 8 = 11.8308
    #        target = 0.05 * 6.96 + 0.95 * 11.8308 = 0.348 + 11.23926 = 11.58726
    algo, state = sapo
    window = window_with_log_probs([-1.0, 0.5], rewards=[1.0, 2.0], next_values=[4.0, 8.0])
    np.testing.assert_allclose(algo.rewards(window, state)[:, 0], [3.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(algo.critic_targets(window, state)[:, 0], [11.58726, 8.92], rtol=1e-5)


def test_an_epoch_has_no_target_critic_and_logs_its_signals(sapo):
    algo, state = sapo
    new_state, metrics = jax.jit(algo.epoch)(state)
    for target, online in zip(
        jax.tree.leaves(new_state.target_critic_params), jax.tree.leaves(new_state.critic_params), strict=True
    ):
        np.testing.assert_array_equal(target, online)  # alpha 0: the bootstrap uses the critic as last fitted
    assert {"sapo/temperature", "sapo/entropy"} <= set(metrics)
    assert float(new_state.algo_state["log_temperature"]) != float(state.algo_state["log_temperature"])
    assert all(np.isfinite(float(v)) for k, v in metrics.items() if not k.startswith("train/episode"))


def test_the_exported_policy_is_tanh_of_the_mean(sapo):
    algo, state = sapo
    normalizer = dataclasses.replace(state.normalizer, mean=jnp.array([0.5, -1.0]), var=jnp.array([4.0, 0.25]))
    policy = type("Policy", (), {"actor": algo.actor, "actor_params": state.actor_params, "normalizer": normalizer})
    fn = export.policy_function(policy)
    obs = np.random.default_rng(0).normal(0.0, 3.0, (64, 2)).astype(np.float32)
    mean, log_std = algo.actor.apply(state.actor_params, normalizer.normalize(obs))
    assert float(jnp.std(log_std)) > 0.0  # the std depends on the state, the exported action does not
    np.testing.assert_allclose(fn(obs), jnp.tanh(mean), rtol=1e-6)
    onnx_actions = export.run_onnx(export.to_onnx_bytes(fn, 2), obs)
    np.testing.assert_allclose(onnx_actions, fn(obs), atol=export.TOLERANCE)
