"""The falls tool: its report by hand, and its episodes against the evaluation's on a falling hopper."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from shac.run.evaluate import evaluate_policy
from shac.tools.falls import SIGNALS, fall_report, record_episodes, root_body
from tests.forked_python import run_python


def test_fall_report_by_hand():
    # 3 episodes of 5 steps, signal value = 10 * step + episode; episode 0 falls at step 3, episode 2 at step 1
    steps, episodes = 5, 3
    value = 10.0 * np.arange(steps)[:, None] + np.arange(episodes)[None, :]
    signals = np.repeat(value[..., None], len(SIGNALS), axis=-1)
    terminated = np.zeros((steps, episodes))
    terminated[3, 0] = terminated[1, 2] = 1.0
    alive = np.ones((steps, episodes))
    alive[4:, 0] = alive[2:, 2] = 0.0
    report = fall_report(signals, alive, terminated, before=2)
    assert (report["episodes"], report["falls"], report["fall_steps"]) == (3, 2, [1, 3])
    assert report["fall_fraction"] == pytest.approx(2 / 3)
    # before: episode 0 steps 2, 3 (20, 30); episode 2 steps 0, 1 (2, 12): mean 16
    assert report["before_fall"]["height"] == pytest.approx(16.0)
    assert report["at_fall"]["saturation"] == pytest.approx((30 + 12) / 2)
    # episode 1 never fell: all 5 steps, 1, 11, 21, 31, 41
    assert report["no_fall"]["uprightness"] == pytest.approx(21.0)


def test_no_falls_leaves_the_fall_means_empty():
    report = fall_report(np.ones((4, 2, len(SIGNALS))), np.ones((4, 2)), np.zeros((4, 2)), before=3)
    assert report["falls"] == 0 and report["before_fall"] is None and report["no_fall"]["height"] == 1.0


def test_hopper_without_actions_falls_where_the_evaluation_says():
    env = envs.make("hopper", episode_length=150)
    key, episodes = jax.random.key(3), 4

    def zero(obs):
        return jnp.zeros((obs.shape[0], env.action_size))

    signals, alive, terminated, rewards, exploded = jax.jit(record_episodes, static_argnums=(0, 1, 3, 4))(
        env, zero, key, episodes, root_body(env, None)
    )
    evaluation = jax.jit(evaluate_policy, static_argnums=(0, 1, 3))(env, zero, key, episodes)
    report = fall_report(*(np.asarray(x) for x in (signals, alive, terminated)), before=10)
    np.testing.assert_array_equal(np.asarray(terminated).sum(axis=0), np.asarray(evaluation.terminated))
    np.testing.assert_array_equal(np.asarray(alive).sum(axis=0), np.asarray(evaluation.lengths))
    # two compiled programs, each rounding its own way through 150 steps of a falling hopper (a step's reward is
    # about 1, so a step counted twice or missed would be off by 1e-2 of these returns)
    np.testing.assert_allclose(np.asarray(rewards).sum(axis=0), np.asarray(evaluation.returns), rtol=1e-3)
    assert not np.asarray(exploded).any() and not np.asarray(evaluation.exploded).any()
    assert (np.asarray(rewards)[np.asarray(alive) == 0] == 0).all()  # nothing counted after the fall
    assert report["falls"] == int(np.asarray(evaluation.terminated).sum()) == episodes  # it topples
    np.testing.assert_array_equal(report["fall_steps"], np.sort(np.asarray(evaluation.lengths) - 1))
    torso_height = float(env.mj_model.body_pos[1][2])  # 1.25 m in the MJCF
    assert report["at_fall"]["height"] < report["before_fall"]["height"] < torso_height
    assert report["at_fall"]["saturation"] == report["at_fall"]["action_norm"] == 0.0


def test_a_velocity_perturbation_moves_the_first_step_by_about_its_size_and_zero_moves_nothing():
    env = envs.make("hopper", episode_length=20)
    key, episodes, body = jax.random.key(3), 4, root_body(env, None)

    def zero(obs):
        return jnp.zeros((obs.shape[0], env.action_size))

    record = jax.jit(record_episodes, static_argnums=(0, 1, 3, 4))
    plain = [np.asarray(x) for x in record(env, zero, key, episodes, body)]
    unmoved = [np.asarray(x) for x in record(env, zero, key, episodes, body, jnp.float32(0.0))]
    moved = [np.asarray(x) for x in record(env, zero, key, episodes, body, jnp.float32(1e-3))]
    for a, b in zip(plain, unmoved, strict=True):  # the default 0.0 is a constant XLA folds: another program's rounding
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
    # the torso's x speed after the first step moves by about the perturbation of its velocity
    speed = SIGNALS.index("forward_speed")
    speed_change = np.abs(moved[0][0, :, speed] - plain[0][0, :, speed])
    assert (speed_change > 0).all() and (speed_change < 1e-2).all()


def test_an_unknown_body_is_refused_with_the_models_bodies():
    with pytest.raises(ValueError, match="no body 'nose' in the model; its bodies: torso, thigh, leg, foot"):
        root_body(envs.make("hopper"), "nose")


def test_falls_cli_says_what_is_missing_in_one_line(tmp_path):
    result = run_python("launch/falls.py", f"run_dir={tmp_path}", "episodes=0")
    assert result.returncode != 0 and "episodes must be >= 1, got 0" in result.stderr.strip().splitlines()[-1]
