"""The secant update's effect on the arm: simulated Jacobians, steps and accuracy per recording.

    python docs/sysid/arm_secant_check.py

The five recordings of the arm comparison against mujoco.sysid (docs/sysid.md, "Against
mujoco.sysid": its results.json gives the truth, the initial guesses, the bounds and the noise;
the recordings are simulated again from the same seeds), each fitted by forward differences with
`secant_below` 0 (every Jacobian simulated), 1 (the default), 10 and infinity, then at the default
with 2 s and 4 s segments instead of the default 1 s. Per fit: the seconds, the steps, the
Jacobians simulated, whether it converged, how many of the 24 95% intervals cover the truth (converged
or not, unlike the benchmark, which counts an unconverged fit's as missing), and
the median relative error. The seconds are this machine's at the time; the counts do not depend on it.
"""

import time

import numpy as np

from launch.runtime import configure_runtime

configure_runtime()

from arm_comparison import ArmComparison  # noqa: E402

from shac.sysid.fit import Problem, fit  # noqa: E402
from shac.sysid.report import analyze  # noqa: E402

SETTINGS = [(0.0, None), (1.0, None), (10.0, None), (np.inf, None), (1.0, 2.0), (1.0, 4.0)]

arm = ArmComparison.load("sysid_versus_mujoco_arm_reach_armature_damping_frictionloss_kp")
options, keys, truth, guess_model, limits = arm.options, arm.keys, arm.truth, arm.guess_model, arm.limits
print(
    f"{'secant_below':>12s} {'segment':>8s} {'recording':>9s} {'seconds':>8s} {'steps':>5s} {'Jacobians':>9s} "
    f"{'converged':>9s} {'covering':>8s} {'median error':>12s}"
)
for k in range(options["datasets"]):
    recording = arm.recording(k)
    for secant_below, segment_seconds in SETTINGS:
        problem = Problem(guess_model, keys, recording.data, bounds=limits, segment_seconds=segment_seconds)
        start = time.perf_counter()
        result = fit(problem, steps=options["steps"], method="forward_difference", secant_below=secant_below)
        seconds = time.perf_counter() - start
        report = analyze(keys, result.values, result.information, result.converged)["parameters"]
        low, high = np.array([report[key]["ci95"] for key in keys]).T
        covering = int(np.sum((low <= truth) & (truth <= high)))
        error = float(np.median(np.abs(result.values / truth - 1)))
        segment = f"{problem.segment_seconds:.2f}"
        print(
            f"{secant_below:>12g} {segment:>8s} {k:>9d} {seconds:>8.2f} {result.steps:>5d} {result.jacobians:>9d} "
            f"{result.converged!s:>9s} {covering:>8d} {error:>12.2%}"
        )
