"""The arm's sysid Jacobian by autodiff (MJX) and by finite differences (MuJoCo's C simulator).

    python docs/sysid/arm_jacobian_check.py

2 s of smooth random excitation (up to 3 Hz, noise 1e-3 rad and 1e-2 rad/s) recorded from the arm
(`arm_reach`) with its 24 joint and servo parameters off their model values and a 17 ms control
delay; the Jacobian of the residuals at the model's values (delay 5 ms) by both methods: each
parameter column's relative difference, the start-state columns', and each method's time (the
first autodiff call compiles). docs/sysid.md, "Which Jacobian".
"""

import time

import numpy as np

from launch.runtime import configure_runtime

configure_runtime()

import envs  # noqa: E402
from envs.physics.parameters import ModelParameter  # noqa: E402
from shac.sysid.fit import Problem  # noqa: E402
from shac.sysid.recording import random_excitation, record  # noqa: E402
from shac.sysid.signals import DELAY  # noqa: E402

JOINTS = ("base_yaw", "shoulder_pitch", "elbow_pitch", "wrist_pitch", "wrist_roll", "wrist_yaw")
KEYS = [f"joint:{j}:{a}" for j in JOINTS for a in ("armature", "damping", "frictionloss")]
KEYS += [f"actuator:{j}:kp" for j in JOINTS]

env = envs.make("arm_reach")
rng = np.random.default_rng(1)
truth = env.mj_model.__copy__()
for key in KEYS:
    parameter = ModelParameter.parse(key, truth)
    parameter.write_mj(truth, parameter.read(truth) * rng.uniform(0.7, 1.4))
dt = env.ctrl_dt
ctrl = random_excitation(2.0, dt, truth.nu, rng, max_hz=3.0)
qpos0, qvel0 = truth.qpos0.copy(), np.zeros(truth.nv)
data = record(truth, ctrl, qpos0, qvel0, dt, 1e-3, 1e-2, rng, delay=0.017)
problem = Problem(env.mj_model, [*KEYS, DELAY], data, signal_values={DELAY: 0.005})
print(problem.describe())
values, x0, weights = problem.initial_values, problem.segments.measured[:, 0], 1.0 / problem.noise[0]
start = time.perf_counter()
_, autodiff, autodiff_x0 = problem.jacobian(values, x0, weights, "autodiff")
print(f"autodiff Jacobian {time.perf_counter() - start:.1f} s (compilation included)")
start = time.perf_counter()
_, finite, finite_x0 = problem.jacobian(values, x0, weights, "finite_difference")
print(f"finite-difference Jacobian {time.perf_counter() - start:.1f} s")
for i, key in enumerate(problem.keys):
    a, b = autodiff[..., i].ravel(), finite[..., i].ravel()
    print(f"{key:36s} relative difference {np.linalg.norm(a - b) / np.linalg.norm(b):.2g}")
print(f"start states: relative difference {np.linalg.norm(autodiff_x0 - finite_x0) / np.linalg.norm(finite_x0):.2g}")
