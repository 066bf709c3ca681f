"""What multiple shooting costs in accuracy on the arm, measured against single shooting and mujoco.sysid.

    python docs/sysid/arm_single_shooting.py [element:name:attribute=value ...]

The twenty recordings of the arm comparison against mujoco.sysid (docs/sysid.md, "Against
mujoco.sysid": its results.json gives the truth, the initial guesses, the bounds and the noise;
the recordings are simulated again from the same seeds), each fitted three ways:

- multiple shooting: this project's fit at its defaults (1 s segments, each with its own fitted
  start state, the noise estimated);
- single shooting: `shac.sysid.fit.join_segments`, the fit again from those estimates with one
  segment as long as the recording (one fitted start state) and the noise the first fit estimated;
- mujoco.sysid: as the benchmark fits it (single shooting from the first noisy state).

Errors are measured in one yardstick for all three: the standard errors of the multiple-shooting
fit of the same recording, so z = (estimate - truth) / standard error, and an estimator at the
Cramer-Rao bound has a mean z^2 of 1. Per recording it prints the mean z^2 of each, the median
relative error, how much narrower the single-shooting intervals are, and the seconds; then the
means over the recordings, with the standard error of the paired differences, and the correlation
of each fit's z with mujoco.sysid's. The results go to
docs/benchmarks/sysid_single_shooting_arm.json.

Values given on the command line make the model wrong: the recordings are simulated with them, while
every fit keeps the model's own (e.g. body:forearm:mass=1.1, a forearm 10% heavier than the model
says). The results then go to sysid_single_shooting_arm_<values>.json.
"""

import json
import sys
import time

import numpy as np

from launch.runtime import configure_runtime

configure_runtime()

from arm_comparison import BENCHMARKS, ArmComparison  # noqa: E402

from envs.physics.parameters import ModelParameter  # noqa: E402
from shac.sysid import versus_mujoco  # noqa: E402
from shac.sysid.fit import Problem, fit, join_segments  # noqa: E402
from shac.sysid.parameters import parse_assignments  # noqa: E402

FITS = ("multiple", "single", "mujoco.sysid")

arm = ArmComparison.load("sysid_versus_mujoco_arm_20")
options, keys, truth, guess_model, limits = arm.options, arm.keys, arm.truth, arm.guess_model, arm.limits
model_errors = parse_assignments(sys.argv[1:])
for key, value in model_errors.items():
    ModelParameter.parse(key, arm.true_model).write_mj(arm.true_model, value)
suffix = "".join(f"_{key.replace(':', '_')}_{value:g}" for key, value in model_errors.items())
OUTPUT = BENCHMARKS / f"sysid_single_shooting_arm{suffix}.json"


def standard_errors(information: np.ndarray) -> np.ndarray:
    return np.sqrt(np.diag(np.linalg.inv(information)))


rows = []
print(
    f"{'recording':>9s} {'mean z^2: multiple':>18s} {'single':>7s} {'mujoco':>7s}  {'median error: multiple':>22s} "
    f"{'single':>7s} {'mujoco':>7s}  {'se single/multiple':>18s}  {'seconds: multiple':>17s} {'+single':>7s} "
    f"{'mujoco':>7s}"
)
for k in range(options["datasets"]):
    recording = arm.recording(k)
    start = time.perf_counter()
    problem = Problem(guess_model, keys, recording.data, bounds=limits)
    multiple = fit(problem, options["steps"], method="forward_difference")
    multiple_seconds = time.perf_counter() - start
    start = time.perf_counter()
    _, single = join_segments(problem, multiple, options["steps"], method="forward_difference")
    single_seconds = time.perf_counter() - start
    try:
        other = versus_mujoco.fit_mujoco(guess_model, arm.spec, keys, recording, options["steps"], options["upper"])
        estimates = {"mujoco.sysid": np.array(other.estimates)}
        mujoco_seconds, mujoco_status = other.fit_seconds, other.status
    except Exception as error:  # its own failure, scored as in the benchmark
        estimates, mujoco_seconds, mujoco_status = {}, float("nan"), f"raised {type(error).__name__}"
    estimates |= {"multiple": multiple.values, "single": single.values}
    se = standard_errors(multiple.information)
    z = {name: (value - truth) / se for name, value in estimates.items()}  # [P] each
    z2 = {name: float(np.mean(value**2)) for name, value in z.items()}
    errors = {name: float(np.median(np.abs(value / truth - 1))) for name, value in estimates.items()}
    narrower = float(np.median(standard_errors(single.information) / se))
    rows.append(
        {
            "recording": k,
            "converged": {"multiple": multiple.converged, "single": single.converged, "mujoco.sysid": mujoco_status},
            "joined": single.joined,
            "z": {name: value.tolist() for name, value in z.items()},
            "mean_z2": z2,
            "median_relative_error": errors,
            "median_se_ratio_single_to_multiple": narrower,
            "seconds": {"multiple": multiple_seconds, "single": single_seconds, "mujoco.sysid": mujoco_seconds},
            "jacobians": {"multiple": multiple.jacobians, "single": single.jacobians - multiple.jacobians},
        }
    )
    cells = "".join(f" {z2.get(name, float('nan')):>{w}.3f}" for name, w in zip(FITS, (18, 7, 7), strict=True))
    error_cells = "".join(f" {errors.get(n, float('nan')):>{w}.3%}" for n, w in zip(FITS, (22, 7, 7), strict=True))
    print(
        f"{k:>9d}{cells} {error_cells}  {narrower:>18.3f}  {multiple_seconds:>17.2f} {single_seconds:>7.2f} "
        f"{mujoco_seconds:>7.2f}",
        flush=True,
    )

both = [row for row in rows if "mujoco.sysid" in row["mean_z2"]]
summary = {}
for name in FITS:
    kept = both if name == "mujoco.sysid" else rows
    summary[name] = {"recordings": len(kept), "mean_z2": float(np.mean([row["mean_z2"][name] for row in kept]))}
for name in ("multiple", "single"):
    differences = np.array([row["mean_z2"][name] - row["mean_z2"]["mujoco.sysid"] for row in both])
    summary[name]["minus_mujoco"] = float(differences.mean())
    summary[name]["minus_mujoco_standard_error"] = float(differences.std(ddof=1) / np.sqrt(len(differences)))
    summary[name]["lower_mean_z2_than_mujoco"] = int(np.sum(differences < 0))
    pairs = np.array([[row["z"][name], row["z"]["mujoco.sysid"]] for row in both])  # [N, 2, P]
    summary[name]["z_correlation_with_mujoco"] = float(np.corrcoef(pairs[:, 0].ravel(), pairs[:, 1].ravel())[0, 1])
    summary[name]["lower_median_error_than_mujoco"] = int(
        sum(row["median_relative_error"][name] < row["median_relative_error"]["mujoco.sysid"] for row in both)
    )
ratios = [row["median_se_ratio_single_to_multiple"] for row in rows]
summary["single"]["median_se_ratio_to_multiple"] = float(np.median(ratios))
print(json.dumps(summary, indent=1))
command = " ".join(["python docs/sysid/arm_single_shooting.py", *sys.argv[1:]])
OUTPUT.write_text(json.dumps({"command": command, "model_errors": model_errors, "summary": summary, "rows": rows}))
