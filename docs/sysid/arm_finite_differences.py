"""The arm's finite-difference sysid Jacobian: one core against every core, and the step's size.

    python docs/sysid/arm_finite_differences.py

20 s of smooth random excitation (up to 3 Hz, noise 1e-3 rad and 1e-2 rad/s, a 20 ms control delay)
recorded from the arm (`arm_reach`) at its model's values; the Jacobian of the residuals of its 24
joint and servo parameters and the delay (from 10 ms) by central differences in one multithreaded
C rollout, timed on one core and on every core this process may use (the median of 3 calls each,
in one run); then the norm of each parameter's column at central steps of 1e-3 to 1e-7 of the value,
and the largest ratio between two steps' norms. docs/sysid.md, "Which Jacobian".
"""

import os
import time

import numpy as np

from launch.runtime import configure_runtime

configure_runtime()

import envs  # noqa: E402
from shac.sysid.fit import Problem  # noqa: E402
from shac.sysid.recording import random_excitation, record  # noqa: E402
from shac.sysid.signals import DELAY  # noqa: E402

JOINTS = ("base_yaw", "shoulder_pitch", "elbow_pitch", "wrist_pitch", "wrist_roll", "wrist_yaw")
KEYS = [f"joint:{j}:{a}" for j in JOINTS for a in ("armature", "damping", "frictionloss")]
KEYS += [f"actuator:{j}:kp" for j in JOINTS]

env = envs.make("arm_reach")
model = env.mj_model
rng = np.random.default_rng(0)
ctrl = random_excitation(20.0, env.ctrl_dt, model.nu, rng, max_hz=3.0)
data = record(model, ctrl, model.qpos0.copy(), np.zeros(model.nv), env.ctrl_dt, 1e-3, 1e-2, rng, delay=0.02)
problem = Problem(model, [*KEYS, DELAY], data, signal_values={DELAY: 0.01})
print(problem.describe())
values, x0, weights = problem.initial_values, problem.segments.measured[:, 0], 1.0 / problem.noise[0]


def median_seconds(calls: int = 3) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        problem.jacobian(values, x0, weights, "finite_difference")
        times.append(time.perf_counter() - start)
    return float(np.median(times))


cores = os.sched_getaffinity(0)
os.sched_setaffinity(0, {min(cores)})
one = median_seconds()
os.sched_setaffinity(0, cores)
every = median_seconds()
print(f"central-difference Jacobian: {one:.2f} s on 1 core, {every:.2f} s on {len(cores)} ({one / every:.2f}x)")

steps = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
norms = np.array(
    [np.linalg.norm(problem._jacobian_mujoco(values, x0, weights, rel_step=h)[1], axis=(0, 1)) for h in steps]
)
print(f"{'column norm at a relative step of':36s} " + " ".join(f"{h:>9.0e}" for h in steps))
for i, key in enumerate(problem.keys):
    print(
        f"{key:36s} "
        + " ".join(f"{n:9.3g}" for n in norms[:, i])
        + f"   largest / smallest {norms[:, i].max() / norms[:, i].min():.3g}"
    )
