"""Recordings without velocities: each fit with the recorded velocities, and again with them left out.

    python docs/sysid/positions_only_check.py [pendulum_datasets] [arm_datasets]

A robot whose log holds encoder positions alone leaves qvel out (or nan); the fit then weighs the
positions alone, and each segment's start velocity is estimated from them (docs/sysid.md, "Positions
alone"). Two systems, each dataset fitted both ways:

- the pendulum's damping (0.137, from the model's 0.05), 10 s of smooth random torques sampled every
  0.05 s, noise 1e-3 rad and 1e-2 rad/s (`pendulum_datasets`, default 50, seeds 0, 1, ...);
- the arm's 24 parameters of the comparison against mujoco.sysid (docs/sysid.md, "Against
  mujoco.sysid": its results.json gives the truth, the initial guesses, the bounds, the noise and the
  excitation), its recordings (seed [0, k]), by forward differences (`arm_datasets`, default 5).

Per system and way: the fits that converged, the 95% intervals covering the truth, and the median
relative error and relative standard error over every estimate.
"""

import json
import sys
from pathlib import Path

import numpy as np

from launch.runtime import configure_runtime

configure_runtime()

import envs  # noqa: E402
from shac.sysid import coverage, versus_mujoco  # noqa: E402
from shac.sysid.fit import Problem, fit  # noqa: E402
from shac.sysid.parameters import parse_assignments  # noqa: E402
from shac.sysid.recording import Trajectory, random_excitation, record  # noqa: E402
from shac.sysid.report import analyze  # noqa: E402

RESULTS = (
    Path(__file__).parents[1] / "benchmarks/sysid_versus_mujoco_arm_reach_armature_damping_frictionloss_kp/results.json"
)


def positions_only(data: Trajectory) -> Trajectory:
    """`data` with its velocities left out (nan: not measured)."""
    return Trajectory(time=data.time, qpos=data.qpos, qvel=np.full_like(data.qvel, np.nan), ctrl=data.ctrl)


def pendulum_datasets(count: int):
    pendulum = envs.make("pendulum_swingup")
    key, truth = "joint:hinge:damping", 0.137
    true_model = coverage.models(pendulum.mj_model, {key: truth}, {key: 0.05})[0]
    for seed in range(count):
        rng = np.random.default_rng(seed)
        ctrl = random_excitation(10.0, 0.05, 1, rng)
        data = record(true_model, ctrl, np.array([np.pi]), np.array([0.0]), 0.05, 1e-3, 1e-2, rng)
        yield pendulum.mj_model, (key,), data, {}, np.array([truth]), {"method": "autodiff"}


def arm_datasets(count: int):
    options = json.loads(RESULTS.read_text())["options"]
    true_values, initial_values = parse_assignments(options["true_params"]), parse_assignments(options["init"])
    keys = tuple(true_values)
    arm = envs.make("arm_reach")
    true_model, guess_model = versus_mujoco.models(arm, true_values, initial_values, options["upper"])
    limits = dict(zip(keys, versus_mujoco.bounds(guess_model, keys, options["upper"]), strict=True))
    initial_state = coverage.reset_states(arm)
    noise = tuple(options["qpos_noise"]), tuple(options["qvel_noise"])
    for k in range(count):
        rng = np.random.default_rng([0, k])
        data = coverage.simulate(
            true_model, keys, initial_state, rng, options["dt"], options["seconds"], options["max_hz"], *noise
        ).data
        truth = np.array([true_values[key] for key in keys])
        fitting = {"method": "forward_difference", "steps": options["steps"]}
        yield guess_model, keys, data, {"bounds": limits}, truth, fitting


def main() -> None:
    counts = [int(a) for a in sys.argv[1:3]] + [50, 5][len(sys.argv[1:3]) :]
    print(f"{'system':>8s} {'velocities':>10s} {'converged':>9s} {'covering':>10s} {'median error':>12s} "
          f"{'median std error':>16s}")  # fmt: skip
    for system, datasets in (("pendulum", pendulum_datasets(counts[0])), ("arm", arm_datasets(counts[1]))):
        tally = {way: {"converged": 0, "covering": 0, "intervals": 0, "errors": [], "stds": []} for way in (1, 0)}
        for model, keys, data, options, truth, fitting in datasets:
            for measured, recording in ((1, data), (0, positions_only(data))):
                result = fit(Problem(model, keys, recording, **options), **fitting)
                report = analyze(keys, result.values, result.information, result.converged)["parameters"]
                low, high = np.array([report[key]["ci95"] for key in keys]).T
                row = tally[measured]
                row["converged"] += int(result.converged)
                row["covering"] += int(np.sum((low <= truth) & (truth <= high)))
                row["intervals"] += len(truth)
                row["errors"].extend(np.abs(result.values / truth - 1))
                row["stds"].extend(report[key]["relative_std"] for key in keys)
        fits = len(tally[1]["errors"]) // len(truth)
        for measured, row in tally.items():
            print(
                f"{system:>8s} {'recorded' if measured else 'left out':>10s} {row['converged']:>5d} of {fits:<2d} "
                f"{row['covering']:>4d} of {row['intervals']:<4d} {np.median(row['errors']):>12.3%} "
                f"{np.median(row['stds']):>16.3%}",
                flush=True,
            )


if __name__ == "__main__":
    main()
