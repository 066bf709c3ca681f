import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shac.run.evaluate import Evaluation, evaluate_policy, summarize
from tests.toy_env import LineEnv


def constant(action):
    return lambda obs: jnp.full((obs.shape[0], 1), action)


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (1.0, (1.0 + 2.0 + 3.0, 3.0, 1.0)),  # x = 1, 2, 3: past 2.5 at step 3, terminated; steps 4-5 not counted
        (0.5, (0.5 + 1.0 + 1.5 + 2.0 + 2.5, 5.0, 0.0)),  # x never past 2.5: the time limit ends it
    ],
)
def test_an_episode_counts_its_rewards_and_steps_until_it_ends_and_says_why(action, expected):
    env = LineEnv(episode_length=5, terminate_above=2.5)
    evaluation = jax.jit(evaluate_policy, static_argnums=(0, 1, 3))(env, constant(action), jax.random.key(0), 3)
    returns, length, terminated = expected
    np.testing.assert_allclose(evaluation.returns, [returns] * 3)
    np.testing.assert_array_equal(evaluation.lengths, [length] * 3)
    np.testing.assert_array_equal(evaluation.terminated, [terminated] * 3)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # a NaN reward at step 2 ends the episode there; its return is step 1's
        ({"nan_reward_at_step": 2}, (1.0, 2.0, 0.0, 1.0)),
        # x = 3 at step 3 is past the bound of 2.5: the return counts steps 1 and 2
        ({"max_velocity": 2.5}, (1.0 + 2.0, 3.0, 0.0, 1.0)),
        # terminated at step 2 (x = 2 > 1.5): the NaN reward at step 4, of the ended episode's simulation
        # going on, is not counted (0 * NaN would be)
        ({"terminate_above": 1.5, "nan_reward_at_step": 4}, (1.0 + 2.0, 2.0, 1.0, 0.0)),
    ],
)
def test_an_episode_whose_physics_explodes_ends_there_and_a_finished_one_stays_finished(options, expected):
    env = LineEnv(episode_length=5, **options)
    evaluation = jax.jit(evaluate_policy, static_argnums=(0, 1, 3))(env, constant(1.0), jax.random.key(0), 2)
    returns, length, terminated, exploded = expected
    np.testing.assert_array_equal(evaluation.returns, [returns] * 2)
    np.testing.assert_array_equal(evaluation.lengths, [length] * 2)
    np.testing.assert_array_equal(evaluation.terminated, [terminated] * 2)
    np.testing.assert_array_equal(evaluation.exploded, [exploded] * 2)


def test_the_summary_averages_returns_lengths_terminations_and_explosions():
    evaluation = Evaluation(
        returns=jnp.array([6.0, 7.5]),
        lengths=jnp.array([3.0, 5.0]),
        terminated=jnp.array([1.0, 0.0]),
        exploded=jnp.array([0.0, 0.0]),
    )
    assert summarize(evaluation) == {
        "mean_return": 6.75,
        "std_return": 0.75,
        "episodes": 2,
        "mean_length": 4.0,
        "terminated": 0.5,
        "exploded": 0.0,
    }
