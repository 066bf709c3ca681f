"""brax compatibility: brax's PPO and APG `train` run on our env object with their default evaluation."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from brax.training.agents.apg import networks as apg_networks
from brax.training.agents.apg import train as apg_train
from brax.training.agents.ppo import networks as ppo_networks
from brax.training.agents.ppo import train as ppo_train

import envs


def test_step_keeps_the_metrics_keys_it_receives():
    env = envs.make("pendulum_swingup")
    state = jax.jit(env.reset)(jax.random.key(0))  # jitted: op by op, MJX compiles each operation on its own
    own = set(state.metrics)
    # brax's EvalWrapper adds metrics["reward"] at reset; its scan needs the same keys after a step
    state = state.replace(metrics={**state.metrics, "reward": jnp.float32(7.0)})
    stepped = jax.jit(env.step)(state, jnp.ones(env.action_size))
    assert set(stepped.metrics) == own | {"reward"}
    assert float(stepped.metrics["reward"]) == 7.0  # not ours: left as received
    _, terms = jax.jit(env.reward)(stepped.pipeline_state, jnp.ones(env.action_size))
    for name in own:  # ours: this step's reward terms, not the zeros of reset
        np.testing.assert_allclose(stepped.metrics[name], terms[name], rtol=1e-6)


def test_brax_ppo_trains_with_its_default_evaluation():
    env = envs.make("pendulum_swingup", episode_length=20)
    make_policy, params, metrics = ppo_train.train(
        environment=env,
        num_timesteps=80,  # one training step: 2 minibatches of 8 envs x 5 steps
        num_evals=2,  # run_evals left at its default (True): brax's evaluator runs before and after
        episode_length=20,
        num_envs=8,
        num_eval_envs=2,
        batch_size=8,
        num_minibatches=2,
        unroll_length=5,
        num_updates_per_batch=1,
        network_factory=functools.partial(
            ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=(8,), value_hidden_layer_sizes=(8,)
        ),
        seed=0,
    )
    # the pendulum starts away from upright and every step costs (the reward is <= 0 by construction)
    assert np.isfinite(metrics["eval/episode_reward"]) and metrics["eval/episode_reward"] < 0
    assert metrics["eval/avg_episode_length"] == 20
    action = make_policy(params, deterministic=True)(jnp.zeros(env.observation_size), jax.random.key(0))[0]
    assert action.shape == (env.action_size,)


def test_brax_apg_trains_with_its_default_evaluation():
    env = envs.make("pendulum_swingup", episode_length=20)
    _, _, metrics = apg_train.train(
        environment=env,
        episode_length=20,
        policy_updates=1,
        horizon_length=5,
        num_envs=4,
        num_evals=2,  # brax's evaluator runs before training and after the one update
        num_eval_envs=2,
        network_factory=functools.partial(apg_networks.make_apg_networks, hidden_layer_sizes=(8,)),
        seed=0,
    )
    assert np.isfinite(metrics["eval/episode_reward"]) and metrics["eval/episode_reward"] < 0
    assert metrics["eval/avg_episode_length"] == 20
