"""One SHAC epoch on the toy env: bookkeeping, target update and non-finite safety."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from shac.core.algorithm import Shac
from shac.core.algorithms import make_algorithm
from tests import tiny_configs
from tests.toy_env import LineEnv

CONFIG = dataclasses.replace(tiny_configs.SHAC, target_alpha=0.25)


def leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def run_epoch(env, config=CONFIG):
    shac = Shac(config, env)
    state = shac.init(jax.random.key(0))
    new_state, metrics = jax.jit(shac.epoch)(state)
    return state, new_state, jax.device_get(metrics)


def test_epoch_bookkeeping_and_target_update():
    state, new_state, metrics = run_epoch(LineEnv(episode_length=3))
    assert int(new_state.epoch) == 1
    assert int(new_state.env_steps) == CONFIG.num_envs * CONFIG.horizon
    # target' = alpha * target + (1 - alpha) * critic, with alpha = 0.25
    for old_t, new_t, new_c in zip(
        leaves(state.target_critic_params),
        leaves(new_state.target_critic_params),
        leaves(new_state.critic_params),
        strict=True,
    ):
        np.testing.assert_allclose(new_t, 0.25 * old_t + 0.75 * new_c, rtol=1e-5, atol=1e-7)
    # the normaliser saw every observation of the window (N * h), on top of its prior count 1e-4
    assert float(new_state.normalizer.count) == pytest.approx(1e-4 + 16)
    # episodes of 3 steps in a 4-step window: every env finished exactly one
    assert metrics["train/episodes"] == 4
    assert metrics["resets/truncated"] == 4
    assert metrics["actor/skipped"] == 0 and metrics["actor/frozen"] == 0
    assert metrics["physics/contact_fraction"] == 0.0  # no MJX state, no contacts
    assert metrics["actor/state_grad_growth"] > 0.0
    assert all(np.isfinite(v) for v in metrics.values())
    assert any(
        not np.allclose(a, b) for a, b in zip(leaves(state.actor_params), leaves(new_state.actor_params), strict=True)
    )


@pytest.mark.parametrize("combine", ["min", "mean"])
def test_an_ensemble_of_four_critics_is_combined_and_trained_as_one(combine):
    config = dataclasses.replace(CONFIG, num_critics=4, critic_combine=combine)
    shac = Shac(config, LineEnv(episode_length=3))
    state = shac.init(jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (5, shac.env.observation_size))
    values = np.asarray(shac.critic_values(state.critic_params, obs))
    assert values.shape == (4, 5) and len({tuple(v) for v in values}) == 4  # four differently initialised critics
    expected = values.min(axis=0) if combine == "min" else values.mean(axis=0)
    np.testing.assert_allclose(shac.value(state.critic_params, obs), expected, rtol=1e-6)
    new_state, metrics = jax.jit(shac.epoch)(state)
    assert all(np.isfinite(v) for v in jax.device_get(metrics).values())
    for old, new in zip(leaves(state.critic_params), leaves(new_state.critic_params), strict=True):
        assert new.shape[0] == 4 and all(not np.allclose(old[i], new[i]) for i in range(4))  # every critic fitted


def test_the_state_shapes_are_inits_traced_once(monkeypatch):
    shac = Shac(CONFIG, LineEnv(episode_length=3))
    traced, init = [], Shac.init  # on the class: a new bound method each time, as unpatched
    monkeypatch.setattr(Shac, "init", lambda self, key: traced.append(key) or init(self, key))
    assert shac.state_shapes is shac.state_shapes and len(traced) == 1
    state = shac.init(jax.random.key(3))
    assert jax.tree.structure(shac.state_shapes) == jax.tree.structure(state)
    for shape, leaf in zip(jax.tree.leaves(shac.state_shapes), jax.tree.leaves(state), strict=True):
        assert (shape.shape, shape.dtype) == (leaf.shape, leaf.dtype)


def test_a_critic_warmup_fits_only_the_critic_for_its_epochs():
    shac = Shac(dataclasses.replace(CONFIG, critic_warmup_epochs=2), LineEnv(episode_length=3))
    epoch, states, frozen = jax.jit(shac.epoch), [shac.init(jax.random.key(0))], []
    for _ in range(3):
        state, metrics = epoch(states[-1])
        states.append(state)
        frozen.append(float(metrics["actor/frozen"]))
    assert frozen == [1.0, 1.0, 0.0]

    def moved(name, k):  # whether epoch k (from 0) changed the params `name`
        pairs = zip(leaves(getattr(states[k], name)), leaves(getattr(states[k + 1], name)), strict=True)
        return any(not np.array_equal(a, b) for a, b in pairs)

    assert [moved("actor_params", k) for k in range(3)] == [False, False, True]
    assert all(moved("critic_params", k) for k in range(3))


@pytest.mark.parametrize("quantile", [0.0, 0.5], ids=["whole", "clipped_env_shares"])
def test_nonfinite_gradient_skips_the_update_and_is_counted(quantile):
    config = dataclasses.replace(CONFIG, actor_env_clip_quantile=quantile)
    state, new_state, metrics = run_epoch(LineEnv(episode_length=10, nan_at_step=2), config)
    assert not np.isfinite(metrics["actor/grad_norm"])
    assert metrics["actor/skipped"] == 1 and int(new_state.actor_skipped) == 1
    # every second step of an episode is non-finite: t = 1 and t = 3 of the 4-step window, in each env
    assert metrics["resets/nonfinite"] == 2 * CONFIG.num_envs
    for old, new in zip(leaves(state.actor_params), leaves(new_state.actor_params), strict=True):
        np.testing.assert_array_equal(old, new)
    for tree in (
        new_state.actor_params,
        new_state.actor_opt_state,
        new_state.critic_params,
        new_state.target_critic_params,
        new_state.normalizer,
    ):
        assert all(np.isfinite(x).all() for x in leaves(tree) if np.issubdtype(x.dtype, np.floating))
    assert np.isfinite(np.asarray(new_state.env_state.obs)).all()
    assert metrics["resets/nonfinite_envs"] == CONFIG.num_envs  # every env had (at least) one
    assert metrics["resets/too_fast"] == 0


def test_a_nan_reward_with_a_finite_observation_leaves_the_update_finite():
    # Step 2 of each episode yields a NaN reward (with a zero derivative) and a finite observation:
    # the step is reset and counted, the rest of the window still trains the actor.
    state, new_state, metrics = run_epoch(LineEnv(episode_length=10, nan_reward_at_step=2))
    assert metrics["resets/nonfinite"] == 2 * CONFIG.num_envs  # t = 1 and t = 3 of the 4-step window
    assert metrics["resets/nonfinite_envs"] == CONFIG.num_envs
    assert np.isfinite(metrics["actor/grad_norm"]) and metrics["actor/skipped"] == 0
    assert np.isfinite(metrics["train/reward"]) and np.isfinite(metrics["critic/loss"])
    assert any(
        not np.allclose(a, b) for a, b in zip(leaves(state.actor_params), leaves(new_state.actor_params), strict=True)
    )


def test_learning_rates_decay_linearly_to_min_lr_over_the_epochs_or_the_budgets():
    config = dataclasses.replace(CONFIG, max_epochs=100)
    shac = Shac(config, LineEnv())
    for position, expected in [(0, config.actor_lr), (50, (config.actor_lr + config.min_lr) / 2), (100, 1e-5)]:
        assert float(shac.decayed(config.actor_lr, jnp.float32(position))) == pytest.approx(expected)
    assert float(shac.decayed(config.actor_lr, jnp.float32(150))) == pytest.approx(config.min_lr)  # stays there
    state = shac.init(jax.random.key(0)).replace(epoch=jnp.int32(30), train_seconds=jnp.float32(60.0))
    assert float(shac.decay_position(state)) == 30.0  # no budget: the epochs, whatever the clock says
    # a 2-minute budget half spent is half of max_epochs' decay, unless the epochs are further
    budgeted = Shac(dataclasses.replace(config, budget_minutes=2.0), LineEnv())
    assert float(budgeted.decay_position(state)) == pytest.approx(50.0)
    assert float(budgeted.decay_position(state.replace(epoch=jnp.int32(70)))) == 70.0
    assert float(budgeted.decay_position(state.replace(train_seconds=jnp.float32(300.0)))) == pytest.approx(250.0)
    # a step budget of 1,000 steps with 400 simulated: 40% of max_epochs' decay, unless the epochs or the clock
    # are further
    stepped = Shac(dataclasses.replace(config, max_env_steps=1000), LineEnv())
    assert float(stepped.decay_position(state.replace(env_steps=jnp.int32(400)))) == pytest.approx(40.0)
    assert float(stepped.decay_position(state.replace(env_steps=jnp.int32(200)))) == 30.0
    both = Shac(dataclasses.replace(config, max_env_steps=1000, budget_minutes=2.0), LineEnv())
    assert float(both.decay_position(state.replace(env_steps=jnp.int32(400)))) == pytest.approx(50.0)


def test_an_epoch_trains_at_the_rates_of_its_decay_position_and_leaves_the_clock_to_the_loop():
    config = dataclasses.replace(CONFIG, max_epochs=100, budget_minutes=2.0)
    shac = Shac(config, LineEnv(episode_length=3))
    state = shac.init(jax.random.key(0)).replace(train_seconds=jnp.float32(60.0))  # position 50 of 100
    new_state, metrics = jax.jit(shac.epoch)(state)
    middle = {name: (lr + config.min_lr) / 2 for name, lr in [("actor", config.actor_lr), ("critic", config.critic_lr)]}
    assert float(metrics["actor/lr"]) == pytest.approx(middle["actor"])
    assert float(metrics["critic/lr"]) == pytest.approx(middle["critic"])
    assert float(new_state.actor_opt_state.hyperparams["learning_rate"]) == pytest.approx(middle["actor"])
    assert float(new_state.critic_opt_state.hyperparams["learning_rate"]) == pytest.approx(middle["critic"])
    assert float(new_state.train_seconds) == 60.0


def test_actor_initial_log_std():
    shac = Shac(CONFIG, LineEnv())
    _, log_std = shac.actor.apply(shac.init(jax.random.key(0)).actor_params, jnp.zeros((3, 2)))
    np.testing.assert_allclose(log_std, -1.0)


class WeaklyTypedLineEnv(LineEnv):
    """`LineEnv` whose reset and step return weakly typed leaves, as `jnp.array(0.0)` and Python floats make
    them (MuJoCo Playground's CheetahRun resets `data.time` so)."""

    def reset(self, rng):
        state = super().reset(rng)
        return state.replace(pipeline_state=(jnp.array(self.start), jnp.array(0.0)), reward=jnp.array(0.0))

    def step(self, state, action):
        state = super().step(state, action)
        return state.replace(reward=jnp.array(1.0))


@pytest.mark.parametrize("config", [CONFIG, tiny_configs.AHAC, tiny_configs.SAPO], ids=["shac", "ahac", "sapo"])
@pytest.mark.parametrize("env", [LineEnv(), WeaklyTypedLineEnv()], ids=["strong", "weak"])
def test_epoch_returns_the_types_it_takes_so_it_compiles_once(env, config):
    shac = make_algorithm(config, env)
    state = shac.init(jax.random.key(0))
    new_state = jax.eval_shape(shac.epoch, state)[0]
    for old, new in zip(jax.tree.leaves(state), jax.tree.leaves(new_state), strict=True):
        assert (old.shape, old.dtype, jax.typeof(old).weak_type) == (new.shape, new.dtype, new.weak_type)


def plain_and_changed(**changes):
    """SHAC at CONFIG and with `changes` on LineEnv, a state, one window's reset states and its key."""
    env = LineEnv(episode_length=3)
    plain = Shac(CONFIG, env)
    reset_states = jax.vmap(env.reset)(jax.random.split(jax.random.key(1), CONFIG.num_envs))
    changed = Shac(dataclasses.replace(CONFIG, **changes), env)
    return plain, changed, plain.init(jax.random.key(0)), reset_states, jax.random.key(2)


def test_action_mean_penalty_adds_c_times_the_mean_squared_pre_squash_mean():
    plain, penalised, state, reset_states, key = plain_and_changed(action_mean_penalty=0.5)
    loss, (_, window) = plain.actor_objective(state.actor_params, state, reset_states, key)
    penalised_loss, _ = penalised.actor_objective(state.actor_params, state, reset_states, key)
    mean, _ = plain.policy(state.actor_params)(window.obs)  # [h, N, 1]
    # the same window (same key); the loss grows by c * mean over h * N actions of mu^2, c = 0.5
    assert float(penalised_loss) == pytest.approx(float(loss) + 0.5 * float(jnp.mean(mean**2)), rel=1e-6)
    # its gradient pulls the mean towards 0: d/dmu (c mu^2) = 2 c mu, never zero where tanh saturates
    grad = jax.grad(lambda p: penalised.actor_objective(p, state, reset_states, key)[0])(state.actor_params)
    assert all(np.isfinite(x).all() for x in leaves(grad))


def test_a_state_gradient_decay_keeps_the_loss_and_changes_only_the_gradient():
    plain, decayed, state, reset_states, key = plain_and_changed(state_grad_decay=0.5)

    def loss_and_gradient(shac):
        return jax.value_and_grad(lambda p: shac.actor_objective(p, state, reset_states, key)[0])(state.actor_params)

    (loss, grad), (decayed_loss, decayed_grad) = loss_and_gradient(plain), loss_and_gradient(decayed)
    assert float(decayed_loss) == float(loss)  # the forward pass is untouched
    differences = [float(jnp.abs(a - b).max()) for a, b in zip(leaves(grad), leaves(decayed_grad), strict=True)]
    assert max(differences) > 1e-3  # the rewards after each action reach it through the decayed state


def test_staggered_starts_set_each_envs_clock_inside_its_first_episode_and_its_time_limit_follows():
    env = envs.make("pendulum_swingup", episode_length=4)
    config = dataclasses.replace(CONFIG, num_envs=16)
    plain, staggered = Shac(config, env), Shac(dataclasses.replace(config, staggered_starts=True), env)
    assert (np.asarray(jax.jit(plain.initial_env_states)(jax.random.key(0)).pipeline_state.time) == 0).all()
    states = jax.jit(staggered.initial_env_states)(jax.random.key(0))
    steps = np.asarray(states.pipeline_state.time) / env.ctrl_dt
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-4)  # whole control steps
    assert set(np.round(steps).astype(int)) == {0, 1, 2, 3}  # 16 uniform draws from [0, 4) hit every step
    stepped = jax.jit(jax.vmap(env.step))(states, jnp.zeros((16, env.action_size)))
    np.testing.assert_array_equal(np.asarray(stepped.truncated), np.round(steps) == 3)  # its 4th step ends it


def test_staggered_starts_refuse_an_env_without_a_simulator_clock():
    staggered = Shac(dataclasses.replace(CONFIG, staggered_starts=True), LineEnv())
    with pytest.raises(ValueError, match=r"algo.staggered_starts needs an env .*; LineEnv has none"):
        staggered.init(jax.random.key(0))


def test_saturation_counts_means_that_squash_past_0_95():
    shac = Shac(CONFIG, LineEnv())
    params = shac.init(jax.random.key(0)).actor_params
    obs = jax.random.normal(jax.random.key(1), (64, 2))
    # all weights x0: every mean is 0, tanh(0) = 0, nothing saturates
    assert float(shac.saturation(jax.tree.map(jnp.zeros_like, params), obs)) == 0.0
    # all weights x100: means of order 100; tanh(mu) > 0.95 exactly where |mu| > atanh(0.95) = 1.832
    loud = jax.tree.map(lambda x: 100.0 * x, params)
    mean, _ = shac.policy(loud)(obs)
    assert float(shac.saturation(loud, obs)) == pytest.approx(float(jnp.mean(jnp.abs(mean) > 1.8318)))
    assert float(shac.saturation(loud, obs)) > 0.5


def test_per_env_gradient_shares_sum_to_the_gradient_and_clip_at_the_quantile():
    plain, shares, state, reset_states, key = plain_and_changed(actor_env_clip_quantile=1.0)
    probes = None
    (loss, _), (grad, _) = plain.actor_gradient(state, reset_states, key, probes)
    (share_loss, _), (per_env, _) = shares.actor_gradient(state, reset_states, key, probes)
    # one copy of every parameter per env, whose gradients add up to the plain gradient
    assert float(share_loss) == pytest.approx(float(loss), rel=1e-6)
    for whole, split in zip(leaves(grad), leaves(per_env), strict=True):
        assert split.shape == (CONFIG.num_envs, *whole.shape)
        np.testing.assert_allclose(split.sum(axis=0), whole, rtol=1e-5, atol=1e-7)
    combined, metrics = shares.combine_env_gradients(per_env)  # q = 1: nothing is clipped
    for whole, summed in zip(leaves(grad), leaves(combined), strict=True):
        np.testing.assert_allclose(summed, whole, rtol=1e-5, atol=1e-7)
    norms = np.sqrt(sum((x.reshape(CONFIG.num_envs, -1) ** 2).sum(axis=1) for x in leaves(per_env)))
    assert float(metrics["actor/env_grad_spread"]) == pytest.approx(1.0)
    assert norms.min() > 0

    # by hand: 4 envs whose shares have norms 1, 2, 3 and 10 (one leaf, a vector along x or y);
    # the median of the norms is 2.5, so the third share is scaled by 2.5 / 3 and the fourth by 2.5 / 10
    median = Shac(dataclasses.replace(CONFIG, actor_env_clip_quantile=0.5), LineEnv())
    hand = {"w": jnp.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0], [0.0, 10.0]])}
    combined, metrics = median.combine_env_gradients(hand)
    np.testing.assert_allclose(np.asarray(combined["w"]), [1.0 + 2.5, 2.0 + 2.5], rtol=1e-6)
    assert float(metrics["actor/env_grad_spread"]) == pytest.approx(10.0 / 2.5)
    # envs whose share is zero do not count: norms 0, 0, 0, 2 and 4 have a nonzero median of 3 (not 0,
    # which would clip every share to nothing), so only the last share is scaled, by 3 / 4
    flat = {"w": jnp.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [2.0, 0.0], [0.0, 4.0]])}
    combined, metrics = median.combine_env_gradients(flat)
    np.testing.assert_allclose(np.asarray(combined["w"]), [2.0, 3.0], rtol=1e-6)
    assert float(metrics["actor/env_grad_spread"]) == pytest.approx(4.0 / 3.0)
    combined, metrics = median.combine_env_gradients(jax.tree.map(jnp.zeros_like, flat))  # nothing moves
    np.testing.assert_array_equal(np.asarray(combined["w"]), [0.0, 0.0])
    assert float(metrics["actor/env_grad_spread"]) == 1.0
    nan = {"w": flat["w"].at[0, 0].set(jnp.nan)}  # a non-finite share reaches the sum, which skips the update
    combined, metrics = median.combine_env_gradients(nan)
    assert np.isnan(np.asarray(combined["w"])).any() and np.isnan(float(metrics["actor/env_grad_spread"]))


def test_an_epoch_with_clipped_env_shares_updates_the_actor_and_logs_their_spread():
    state, new_state, metrics = run_epoch(
        LineEnv(episode_length=3), dataclasses.replace(CONFIG, actor_env_clip_quantile=0.5)
    )
    assert metrics["actor/skipped"] == 0 and metrics["actor/env_grad_spread"] >= 1.0
    assert all(np.isfinite(v) for v in metrics.values())
    assert jax.tree.map(jnp.shape, new_state.actor_params) == jax.tree.map(jnp.shape, state.actor_params)
    assert any(
        not np.allclose(a, b) for a, b in zip(leaves(state.actor_params), leaves(new_state.actor_params), strict=True)
    )
