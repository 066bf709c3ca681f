"""System identification on data from MuJoCo's C simulator, identifiability flags, and the CLI."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import envs
from envs.physics.parameters import ModelParameter
from shac.tools import identifiability, sysid

ROOT = Path(__file__).resolve().parents[1]
DAMPING, FRICTION = "joint:hinge:damping", "joint:hinge:frictionloss"
PENDULUM = envs.make("pendulum_swingup")


def model_with(**values):
    """The pendulum's MuJoCo model with parameters set, e.g. model_with(damping=0.1)."""
    model = copy.deepcopy(PENDULUM.mj_model)
    for attribute, value in values.items():
        ModelParameter.parse(f"joint:hinge:{attribute}", model).write_mj(model, value)
    return model


def recording(model, seconds, amplitudes, frequencies, qpos_noise, qvel_noise):
    ctrl = sysid.multisine(seconds, PENDULUM.ctrl_dt, amplitudes, frequencies)
    return sysid.record(model, ctrl, np.array([np.pi]), np.array([0.0]), PENDULUM.ctrl_dt, qpos_noise, qvel_noise)


def test_parameter_names_are_checked_against_the_model():
    with pytest.raises(ValueError, match="no joint named 'hinj' in the model; joints: hinge"):
        ModelParameter.parse("joint:hinj:damping", PENDULUM.mj_model)
    with pytest.raises(
        ValueError, match="unsupported parameter 'joint:hinge:stiffness'; accepted: joint:<name>:damping"
    ):
        ModelParameter.parse("joint:hinge:stiffness", PENDULUM.mj_model)
    with pytest.raises(ValueError, match="is not element:name:attribute"):
        ModelParameter.parse("damping", PENDULUM.mj_model)


def test_parameters_write_into_mjx_and_mujoco_models():
    bob = ModelParameter.parse("body:pole:mass", PENDULUM.mj_model)
    mjx_model = bob.write(PENDULUM.mjx_model, 2.0)
    assert bob.read(mjx_model) == pytest.approx(2.0)
    # the inertia scales with the mass (1.0 kg -> 2.0 kg doubles it)
    np.testing.assert_allclose(mjx_model.body_inertia[1], 2.0 * np.asarray(PENDULUM.mjx_model.body_inertia[1]))
    model = model_with(damping=0.3)
    assert ModelParameter.parse(DAMPING, model).read(model) == pytest.approx(0.3)
    assert ModelParameter.parse(DAMPING, PENDULUM.mj_model).read(PENDULUM.mj_model) == pytest.approx(0.05)


def test_trajectory_files_round_trip(tmp_path):
    trajectory = recording(PENDULUM.mj_model, 1.0, [0.5], [2.0], 0.0, 0.0)
    trajectory.save(tmp_path / "t.npz")
    loaded = sysid.Trajectory.load(tmp_path / "t.npz")
    np.testing.assert_array_equal(loaded.qvel, trajectory.qvel)
    header = "time,qpos_0,qvel_0,ctrl_0"
    table = np.column_stack([trajectory.time, trajectory.qpos, trajectory.qvel, trajectory.ctrl])
    np.savetxt(tmp_path / "t.csv", table, delimiter=",", header=header, comments="")
    from_csv = sysid.Trajectory.load(tmp_path / "t.csv")
    np.testing.assert_allclose(from_csv.qpos, trajectory.qpos)
    (tmp_path / "t.txt").write_text("time qpos\n")
    with pytest.raises(ValueError, match="unsupported trajectory file"):
        sysid.Trajectory.load(tmp_path / "t.txt")


def test_autodiff_recovers_damping_within_2_percent_in_50_steps():
    # 20 s of multisine excitation simulated by MuJoCo (C, float64) with damping 0.12,
    # measured with noise (0.005 rad, 0.02 rad/s); the fit starts from the model's 0.05.
    data = recording(model_with(damping=0.12), 20.0, [0.8, 0.4], [2.0, 5.3], 0.005, 0.02)
    problem = sysid.Problem(PENDULUM.mj_model, [DAMPING], data, segment_length=20)
    result = sysid.fit(problem, steps=50)
    assert result.steps <= 50
    assert result.values[0] == pytest.approx(0.12, rel=0.02)
    jacobian = problem.jacobian(result.values, method="finite_difference")  # no second compile
    report = identifiability.analyze((DAMPING,), result.values, jacobian, problem.residuals_mujoco(result.values))
    assert report["flags"] == []
    assert report["parameters"][DAMPING]["relative_std"] < 0.02


def friction_problem(amplitudes, frequencies):
    # true damping 0.1 and Coulomb friction 0.2; the fit starts at half of each.
    data = recording(model_with(damping=0.1, frictionloss=0.2), 20.0, amplitudes, frequencies, 0.002, 0.02)
    return sysid.Problem(model_with(damping=0.05, frictionloss=0.1), [DAMPING, FRICTION], data, segment_length=20)


def fit_and_analyze(problem):
    result = sysid.fit(problem, steps=50, method="finite_difference")
    jacobian = problem.jacobian(result.values, method="finite_difference")
    residuals = problem.residuals_mujoco(result.values)
    return result, identifiability.analyze((DAMPING, FRICTION), result.values, jacobian, residuals)


def test_low_speed_data_is_flagged_as_unable_to_separate_damping_and_friction():
    problem = friction_problem([0.5, 0.3], [0.3, 0.5])
    assert np.abs(problem.trajectory.qvel).max() < 0.5  # slow: a fraction of a rad/s
    _, report = fit_and_analyze(problem)
    assert len(report["flags"]) == 1
    flag = report["flags"][0]
    assert DAMPING in flag and FRICTION in flag and "cannot separate" in flag


def test_rich_motion_identifies_damping_and_friction_within_5_percent():
    problem = friction_problem([1.0, 0.6, 0.4], [1.5, 3.7, 6.1])
    result, report = fit_and_analyze(problem)
    assert result.values[0] == pytest.approx(0.1, rel=0.05)
    assert result.values[1] == pytest.approx(0.2, rel=0.05)
    assert report["flags"] == []


def test_sysid_cli_writes_report_and_figure(tmp_path):
    recording(model_with(damping=0.12), 10.0, [0.8, 0.4], [2.0, 5.3], 0.005, 0.02).save(tmp_path / "pend.npz")
    result = subprocess.run(
        [
            sys.executable,
            "launch/sysid.py",
            f"data={tmp_path / 'pend.npz'}",
            "env=pendulum_swingup",
            f"params=[{DAMPING}]",
            "method=finite_difference",
            "compare_cost=false",
            f"out={tmp_path / 'out'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"{DAMPING}: 0.1" in result.stdout and "every direction is resolved" in result.stdout
    report = json.loads((tmp_path / "out" / "sysid.json").read_text())
    assert report["parameters"][DAMPING]["estimate"] == pytest.approx(0.12, rel=0.05)
    assert report["seconds_per_gradient"]["finite_difference"] > 0
    assert (tmp_path / "out" / "landscape.png").stat().st_size > 1000
