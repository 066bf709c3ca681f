"""Gradient diagnostics: Jacobian checks, the horizon verdict, and the diagnose command."""

import json
from pathlib import Path

import jax
import pytest

import envs
from shac.core.algorithms import make_algorithm
from shac.core.normalizer import RunningStatistics
from shac.tools import diagnostics
from tests import tiny_configs
from tests.forked_python import run_python
from tests.toy_env import LineEnv

ROOT = Path(__file__).resolve().parents[1]


def test_pendulum_jacobian_matches_finite_differences_and_mujoco():
    # float64, one physics step per control step, so MuJoCo's mjd_transitionFD applies too
    with jax.enable_x64(True):
        env = envs.make("pendulum_swingup", ctrl_dt=0.01)
        report = diagnostics.jacobian_check(env, diagnostics.initial_state(env), eps=1e-6)
    assert report["dtype"] == "float64"
    for block, error in report["finite_difference"].items():
        assert error < 1e-3, (block, error)
    for block, error in report["mujoco_transition_fd"].items():
        assert error < 1e-3, (block, error)


def test_the_horizon_sweep_decays_the_gradient_through_the_state_as_the_window_does():
    env = envs.make("pendulum_swingup")
    actor = make_algorithm(tiny_configs.SHAC, env).actor
    params = actor.init(jax.random.key(0), jax.numpy.zeros(env.observation_size))
    normalizer = RunningStatistics.create(env.observation_size)

    def sweep(decay):
        return diagnostics.horizon_sweep(env, actor, params, normalizer, (1, 3), 2, 2, jax.random.key(1), decay)

    exact, decayed = sweep(1.0), sweep(0.5)
    assert (exact["state_grad_decay"], decayed["state_grad_decay"]) == (1.0, 0.5)
    # one step: the action's reward reaches it directly, through no state, so the decay changes nothing
    assert decayed["param_grad_norm"][0] == pytest.approx(exact["param_grad_norm"][0], rel=1e-6)
    assert decayed["action_grad_norm"][0] == pytest.approx(exact["action_grad_norm"][0], rel=1e-6)
    # three: the later rewards reach the first actions through the states, each path scaled by 0.5 per step
    assert decayed["param_grad_norm"][1] != pytest.approx(exact["param_grad_norm"][1], rel=1e-3)
    assert decayed["action_grad_norm"][1] != pytest.approx(exact["action_grad_norm"][1], rel=1e-3)


def sweep(norms, variances, nonfinite=None):
    return {
        "horizons": [1, 2, 4, 8][: len(norms)],
        "param_grad_norm": norms,
        "param_grad_relative_variance": variances,
        "nonfinite_fraction": nonfinite or [0.0] * len(norms),
        "contact_change_fraction": 0.25,
    }


@pytest.mark.parametrize(
    ("case", "expected", "reason"),
    [
        (sweep([1.0, 3.0, 9.0, 27.0], [0.1, 0.2, 0.3, 0.4]), 8, "every horizon tried qualified"),
        (sweep([1.0, 3.0, 500.0], [0.1, 0.2, 0.3]), 2, "h=4: gradient norm 500 is over 100x"),
        (sweep([1.0, 3.0, 9.0], [0.1, 2.5, 0.3]), 1, "h=2: relative variance across seeds 2.5 > 1"),
        (sweep([1.0, 3.0, 9.0], [0.1, 0.2, 0.3], [0.0, 0.0, 0.5]), 2, "h=4: non-finite gradients in 50% of seeds"),
    ],
)
def test_suggested_horizon_and_its_reasoning(case, expected, reason):
    horizon, reasoning = diagnostics.suggest_horizon(case)
    assert horizon == expected
    assert reason in reasoning and "contacts change in 25.0% of steps" in reasoning


def test_env_shares_agree_where_every_env_wants_the_same_step():
    # reward = x' = x + a in every env: each env's share of the gradient asks for larger actions, so
    # every group's sum points the same way, clipped or not
    env = LineEnv(episode_length=3)
    actor = make_algorithm(tiny_configs.SHAC, env).actor
    params = actor.init(jax.random.key(0), jax.numpy.zeros(env.observation_size))
    report = diagnostics.env_share_agreement(
        tiny_configs.SHAC, env, params, RunningStatistics.create(env.observation_size), jax.random.key(1), windows=2
    )
    assert (report["groups"], report["envs_per_group"], report["horizon"]) == (4, 4, 4)
    percentiles = list(report["norm_percentiles"].values())
    assert percentiles == sorted(percentiles) and percentiles[0] > 0
    assert report["max_over_median"] == pytest.approx(percentiles[-1] / percentiles[1])
    assert set(report["agreement"]) == {str(q) for q in diagnostics.ENV_CLIP_QUANTILES}
    for agreement in report["agreement"].values():
        assert 0.9 < agreement <= 1.0 + 1e-6


def test_diagnose_cli_writes_report_and_figure(tmp_path):
    result = run_python(
        "launch/diagnose.py",
        "env=pendulum_swingup",
        "diagnose.horizons=[1,4]",
        "diagnose.seeds=2",
        "diagnose.num_envs=2",
        "diagnose.compare_smoothing=false",
        "diagnose.env_shares=true",
        "algo.num_envs=4",
        "algo.horizon=4",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    sweep_none = report["sweeps"]["none"]
    assert sweep_none["horizons"] == [1, 4]
    # the rule of suggest_horizon applied by hand to the report's own numbers: h=4 qualifies
    # when its gradients were all finite, grew at most 100x over h=1's, and vary at most 1x
    norms, variances = sweep_none["param_grad_norm"], sweep_none["param_grad_relative_variance"]
    four_qualifies = sweep_none["nonfinite_fraction"][1] == 0 and norms[1] <= 100 * norms[0] and variances[1] <= 1
    assert sweep_none["suggested_horizon"] == (4 if four_qualifies else 1)
    assert all(n > 0 for n in sweep_none["param_grad_norm"] + sweep_none["action_grad_norm"])
    assert set(report["jacobian"]["finite_difference"]) == {"qpos", "qvel", "action"}
    assert (tmp_path / "gradients.png").stat().st_size > 1000
    assert "[none] suggested horizon" in result.stdout
    shares = report["env_shares"]
    assert (shares["groups"], shares["envs_per_group"], shares["horizon"]) == (4, 4, 4)
    assert all(-1.0 <= a <= 1.0 + 1e-6 for a in shares["agreement"].values())
    assert "[env shares] largest / median norm" in result.stdout
