"""AHAC: the horizon's dual update against a plain-Python loop, the window's cut, the stiffness
signal on a real MJX contact, and the critic's early stop."""

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import optax
import pytest
from mujoco import mjx

from shac.core import losses
from shac.core.ahac import PATIENCE, Ahac, horizon_update
from shac.core.algorithm import Shac
from shac.core.rollout import Window, contact_stiffness, rollout
from tests import tiny_configs
from tests.toy_env import LineEnv

CONFIG = dataclasses.replace(
    tiny_configs.AHAC,
    horizon=8,
    critic_iterations=8,
    ahac=dataclasses.replace(tiny_configs.AHAC.ahac, min_horizon=3),
)


def window_of(stiffness, active):
    """A window whose only non-zero fields are `stiffness` and `active`, both [h, N]."""
    zeros = jnp.zeros(stiffness.shape)
    return Window(
        obs=jnp.zeros((*stiffness.shape, 2)),
        raw_obs=jnp.zeros((*stiffness.shape, 2)),
        rewards=zeros,
        next_values=zeros,
        dones=zeros,
        terminated=zeros,
        truncated=zeros,
        nonfinite=zeros,
        too_fast=zeros,
        metrics={},
        log_probs=zeros,
        stiffness=jnp.asarray(stiffness, jnp.float32),
        contacts=zeros,
        active=jnp.asarray(active, jnp.float32),
    )


def test_horizon_update_by_hand():
    # 8 + 5e-4 * (500 - 100) = 8.2; clipped to [8, 64] at both ends
    assert horizon_update(jnp.array(8.0), jnp.array(100.0), 500.0, 5e-4, 8, 64) == pytest.approx(8.2)
    assert horizon_update(jnp.array(63.9), jnp.array(0.0), 500.0, 1.0, 8, 64) == 64.0
    assert horizon_update(jnp.array(8.1), jnp.array(1e6), 500.0, 5e-4, 8, 64) == 8.0


def test_horizon_follows_a_plain_python_loop_over_epochs():
    ahac = Ahac(CONFIG, LineEnv())
    state = ahac.init(jax.random.key(0))
    rng = np.random.default_rng(0)
    horizon, threshold, lr0, epochs = 3.0, 5.0, 0.5, 6
    for epoch in range(epochs):
        per_step = rng.uniform(0.0, 2.0, size=(CONFIG.horizon, CONFIG.num_envs))
        # plain Python: simulate round(H) steps, sum each env's stiffness over them, mean over envs,
        # then H <- clip(H + lr_k (threshold - S), 3, 8) with lr_k = lr0 (1 - k / max_epochs)
        steps = min(max(round(horizon), 3), 8)
        stiffness = sum(per_step[t, n] for t in range(steps) for n in range(CONFIG.num_envs)) / CONFIG.num_envs
        expected = min(max(horizon + lr0 * (1 - epoch / CONFIG.max_epochs) * (threshold - stiffness), 3.0), 8.0)

        state = state.replace(epoch=jnp.asarray(epoch, jnp.int32))
        assert int(ahac.active_horizon(state)) == steps
        active = (np.arange(CONFIG.horizon) < steps)[:, None] * np.ones((1, CONFIG.num_envs))
        algo_state, metrics = ahac.after_epoch(state, window_of(per_step * active, active))
        assert float(metrics["ahac/horizon"]) == steps
        assert float(metrics["ahac/stiffness"]) == pytest.approx(stiffness, rel=1e-5)
        assert float(algo_state["horizon"]) == pytest.approx(expected, rel=1e-5)
        state, horizon = state.replace(algo_state=algo_state), expected
    assert horizon != 3.0  # it moved


def test_the_window_end_cuts_the_gradient_and_bootstraps_the_critic():
    # AHAC's objective over a window of 8 steps of which 3 are simulated has the value and gradient
    # of SHAC's loss on the first 3 steps of the same full rollout (the same noise): the last
    # active step bootstraps with V'(s_3) and nothing after it reaches the gradient.
    env = LineEnv(episode_length=10)
    config = dataclasses.replace(CONFIG, num_critics=1)
    ahac, shac = Ahac(config, env), Shac(dataclasses.replace(config, name="shac"), env)
    state = ahac.init(jax.random.key(0))
    resets = jax.vmap(env.reset)(jax.random.split(jax.random.key(1), config.num_envs))
    key = jax.random.key(2)

    def first_three_steps(actor_params):
        _, window = rollout(
            env,
            shac.policy(actor_params),
            jax.tree_util.Partial(shac.value, state.target_critic_params),
            state.normalizer,
            state.env_state,
            resets,
            key,
            config.horizon,
        )
        cut = jax.tree.map(lambda x: x[:3], window)
        return losses.actor_loss(cut.rewards, cut.next_values, cut.dones, config.gamma)

    (loss, (env_state, window)), grads = jax.value_and_grad(ahac.actor_objective, has_aux=True)(
        state.actor_params, state, resets, key
    )
    expected_loss, expected_grads = jax.value_and_grad(first_three_steps)(state.actor_params)
    assert float(loss) == pytest.approx(float(expected_loss), rel=1e-5)
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(expected_grads), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(window.active.sum(axis=0), 3.0)
    np.testing.assert_array_equal(env_state.obs[:, 1], 3.0)  # the carried envs stopped after step 3


def test_an_epoch_simulates_only_the_active_steps():
    ahac = Ahac(CONFIG, LineEnv(episode_length=10))
    state = ahac.init(jax.random.key(0))
    new_state, metrics = jax.jit(ahac.epoch)(state)
    assert int(new_state.env_steps) == CONFIG.num_envs * 3
    assert float(new_state.normalizer.count) == pytest.approx(1e-4 + CONFIG.num_envs * 3)
    np.testing.assert_array_equal(new_state.env_state.obs[:, 1], 3.0)
    # no contact: stiffness 0, so H = 3 + 0.5 * (5 - 0) = 5.5
    assert float(metrics["ahac/horizon"]) == 3.0 and float(metrics["ahac/stiffness"]) == 0.0
    assert float(new_state.algo_state["horizon"]) == pytest.approx(5.5)
    assert PATIENCE + 1 <= float(metrics["critic/iterations"]) <= CONFIG.critic_iterations


@pytest.mark.parametrize(("tolerance", "passes"), [(1e6, PATIENCE + 1), (0.0, CONFIG.critic_iterations)])
def test_critic_passes_stop_when_the_loss_stops_changing(tolerance, passes):
    # tolerance 1e6: no loss moves that fast, so the first check (after pass 5) stops; tolerance 0:
    # the fit goes on while the loss moves at all, up to the cap
    config = dataclasses.replace(CONFIG, ahac=dataclasses.replace(CONFIG.ahac, critic_tolerance=tolerance))
    ahac = Ahac(config, LineEnv())
    state = ahac.init(jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (32, 2))
    targets, weights = jnp.full(32, 3.0), jnp.ones(32)
    _, _, metrics = jax.jit(ahac.fit_critic)(
        state.critic_params, state.critic_opt_state, obs, targets, weights, jax.random.key(2)
    )
    assert float(metrics["iterations"]) == passes


def test_a_critic_pass_is_equal_minibatches_of_the_simulated_samples_and_never_reads_the_rest():
    # 7 of the 8 steps simulated: 28 samples in 2 minibatches of 14, each summed over chunks of
    # 4 envs x 3 steps (min_horizon) / 2 = 6 samples (6 + 6 + 2); the unsimulated rows are NaN
    ahac = Ahac(CONFIG, LineEnv())
    state = ahac.init(jax.random.key(0))
    size, simulated = CONFIG.horizon * CONFIG.num_envs, 7 * CONFIG.num_envs
    weights = (jnp.arange(size) < simulated).astype(jnp.float32)
    obs = jnp.where(weights[:, None] > 0, jax.random.normal(jax.random.key(1), (size, 2)), jnp.nan)
    targets = jnp.where(weights > 0, 3.0 * jax.random.normal(jax.random.key(2), (size,)), jnp.nan)
    key = jax.random.key(3)
    (params, _), (loss, skipped) = jax.jit(ahac.critic_pass)(
        (state.critic_params, state.critic_opt_state), key, obs, targets, weights
    )
    # the reference: the simulated samples in the pass's random order, cut into equal minibatches,
    # one optimiser step on each minibatch's mean squared error
    order = np.argsort(np.where(weights > 0, jax.random.uniform(key, (size,)), 2.0))[:simulated]
    expected, opt_state, batch_losses = state.critic_params, state.critic_opt_state, []
    for part in np.split(order, CONFIG.critic_minibatches):
        value, grads = jax.value_and_grad(
            lambda p, part=part: losses.critic_loss(ahac.critic_values(p, obs[part]), targets[part])
        )(expected)
        updates, opt_state = ahac.critic_optimizer.update(grads, opt_state, expected)
        expected = optax.apply_updates(expected, updates)
        batch_losses.append(value)
    assert int(skipped) == 0
    assert float(loss) == pytest.approx(float(np.mean(batch_losses)), rel=1e-5)
    for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_contact_stiffness_is_zero_in_free_fall_and_positive_in_contact():
    model = mujoco.MjModel.from_xml_string(
        """<mujoco><option timestep="0.002"/><worldbody><geom type="plane" size="1 1 0.1"/>
        <body pos="0 0 0.5"><freejoint/><geom type="sphere" size="0.1" mass="1"/></body></worldbody></mujoco>"""
    )
    mx = mjx.put_model(model)
    step = jax.jit(mjx.step)
    data = mjx.put_data(model, mujoco.MjData(model))
    data = step(mx, data)
    assert float(contact_stiffness(data)) == 0.0  # falling: no constraint force
    for _ in range(400):  # 0.8 s: it has landed and rests on the plane
        data = step(mx, data)
    expected = np.linalg.norm(data.qfrc_constraint) / np.linalg.norm(data.qacc)
    assert float(contact_stiffness(data)) == pytest.approx(float(expected), rel=1e-5)
    assert float(contact_stiffness(data)) > 1.0  # ~ 9.81 N held against a small residual acceleration


def test_the_learning_benchmark_evaluates_ahac_every_eval_every_steps_as_its_window_grows():
    from shac.tools.benchmarks.learning import train_shac

    # no contacts: the window grows by 0.5 * 5 = 2.5 steps an epoch from 3 to 8, so an epoch of 4
    # envs simulates 12, then 20 or 24, then 32 steps; evaluations stay at least 40 steps apart
    config = dataclasses.replace(CONFIG, max_epochs=10_000)
    result = train_shac(LineEnv(episode_length=5), config, seed=0, budget_s=0.3, episodes=2, eval_every_steps=40)
    gaps = np.diff([record.env_steps for record in result.records])
    assert len(gaps) >= 3 and all(40 <= gap < 40 + 4 * 8 for gap in gaps), gaps
