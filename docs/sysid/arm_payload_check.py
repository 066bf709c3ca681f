"""A known payload as a model variant: the arm's 24 parameters from recordings with and without it.

    python docs/sysid/arm_payload_check.py [datasets]

The arm of the comparison against mujoco.sysid (docs/sysid.md, "Against mujoco.sysid": its
results.json gives the truth, the initial guesses, the bounds, the noise and the excitation), each
dataset k fitted by forward differences four ways, from 20 s of recordings in all:

- `one 20 s`: the comparison's own recording (seed [0, k]), the arm as it is;
- `two free`: two 10 s recordings of the arm as it is (seeds [1, k] and [2, k]);
- `free + payload`: the first of those, and 10 s with a 0.5 kg payload in the hand (seed [3, k]; the
  hand's 0.2 kg made 0.7 kg, its inertia scaled with it), fitted with the payload as the second
  recording's variant (`Problem(..., variants=[{}, {"body:hand:mass": 0.7}])`);
- `payload ignored`: the same two recordings fitted as if both were of the arm as it is.

Per fit: whether it converged, the misfit (the residuals' RMS over the noise the data show; about 1
when the model explains the data), how many of the 24 95% intervals cover the truth, the median
relative error and the median relative standard error. The fits that ignore the payload step
through models MuJoCo's simulator finds unstable, and it prints a warning for each on stderr
(`2>/dev/null` keeps the table alone).
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
from shac.sysid.mjcf import fitted_model  # noqa: E402
from shac.sysid.parameters import parse_assignments  # noqa: E402
from shac.sysid.report import analyze  # noqa: E402

RESULTS = (
    Path(__file__).parents[1] / "benchmarks/sysid_versus_mujoco_arm_reach_armature_damping_frictionloss_kp/results.json"
)
PAYLOAD = {"body:hand:mass": 0.7}

options = json.loads(RESULTS.read_text())["options"]
datasets = int(sys.argv[1]) if len(sys.argv) > 1 else options["datasets"]
true_values, initial_values = parse_assignments(options["true_params"]), parse_assignments(options["init"])
keys = tuple(true_values)
truth = np.array([true_values[key] for key in keys])
env = envs.make("arm_reach")
true_model, guess_model = versus_mujoco.models(env, true_values, initial_values, options["upper"])
loaded_model = fitted_model(true_model, PAYLOAD)
limits = dict(zip(keys, versus_mujoco.bounds(guess_model, keys, options["upper"]), strict=True))
initial_state = coverage.reset_states(env)


def recording(model, seed, seconds):
    rng = np.random.default_rng(seed)
    noise = tuple(options["qpos_noise"]), tuple(options["qvel_noise"])
    return coverage.simulate(model, keys, initial_state, rng, options["dt"], seconds, options["max_hz"], *noise).data


print(f"{'dataset':>7s} {'fit':>16s} {'converged':>9s} {'misfit':>7s} {'covering':>8s} {'median error':>12s} "
      f"{'median std error':>16s}")  # fmt: skip
for k in range(datasets):
    free = recording(true_model, [1, k], options["seconds"] / 2)
    fits = {
        "one 20 s": ([recording(true_model, [0, k], options["seconds"])], None),
        "two free": ([free, recording(true_model, [2, k], options["seconds"] / 2)], None),
        "free + payload": ([free, loaded := recording(loaded_model, [3, k], options["seconds"] / 2)], [{}, PAYLOAD]),
        "payload ignored": ([free, loaded], None),
    }
    for name, (data, variants) in fits.items():
        problem = Problem(guess_model, keys, data, bounds=limits, variants=variants)
        result = fit(problem, steps=options["steps"], method="forward_difference")
        report = analyze(keys, result.values, result.information, result.converged)["parameters"]
        low, high = np.array([report[key]["ci95"] for key in keys]).T
        covering = int(np.sum((low <= truth) & (truth <= high)))
        error = float(np.median(np.abs(result.values / truth - 1)))
        std_error = float(np.median([report[key]["relative_std"] for key in keys]))
        print(
            f"{k:>7d} {name:>16s} {result.converged!s:>9s} {result.misfit:>7.2f} {covering:>8d} {error:>12.2%} "
            f"{std_error:>16.2%}",
            flush=True,
        )
