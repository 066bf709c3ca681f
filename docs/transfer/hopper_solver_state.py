"""The hopper's one-iteration constraint solver as hidden state: what a recording does not carry.

    python docs/transfer/hopper_solver_state.py <run_dir> [configs/real/hopper.yaml]

`<run_dir>` is a hopper run (`python launch/train.py env=hopper ...`). Two measurements, in MuJoCo's C
simulator under the run's deterministic policy:

1. Replays. A noise-free closed-loop recording of 1.4 s on the real file's hopper (reset key 0), replayed
   in pieces of 1, 5 and 20 control steps from its exact states, as a multiple-shooting fit's segments
   are. Every model here runs its solver for one iteration from a warm start (the previous step's
   accelerations), which the recorded positions and velocities do not hold. Each piece starts with the
   warm start zero (what a fit's segment gets), converged at its first state (50 solver passes),
   simulated from the measured state 1, 2 or 5 control steps before it (a burn-in), or the
   recording's own; the nominal model's error, zero warm start, is the scale a parameter error has.
   Errors are root-mean-square over the pieces' states, in units of a sensor's noise (qpos 0.001,
   qvel 0.01).
2. Falls. Control steps before the torso drops below 0.8 m (1000 at most), from reset keys 0-3, on the
   nominal and the real model, with the training model's one iteration and with a converged solver
   (100 iterations, tolerance 1e-10).
"""

import copy
import sys
import types

import jax
import mujoco
import numpy as np

from launch.runtime import configure_runtime

configure_runtime()

from envs.physics.parameters import ModelParameter  # noqa: E402
from launch.record_trajectory import policy_controller  # noqa: E402
from shac.run.real import load_real  # noqa: E402

SECONDS = 1.4
PIECES = (1, 5, 20)
BURN_INS = (1, 2, 5)
NOISE = (0.001, 0.01)

run_dir = sys.argv[1]
real_file = sys.argv[2] if len(sys.argv) > 2 else "configs/real/hopper.yaml"
env, controller = policy_controller(types.SimpleNamespace(policy=run_dir, env="hopper", dt=0.0))
nominal = env.mj_model
real = copy.deepcopy(nominal)
for key, value in load_real(real_file).items():
    ModelParameter.parse(key, real).write_mj(real, value)
n_substeps = round(env.ctrl_dt / real.opt.timestep)


def converged(model: mujoco.MjModel) -> mujoco.MjModel:
    model = copy.deepcopy(model)
    model.opt.iterations, model.opt.tolerance, model.opt.ls_iterations = 100, 1e-10, 50
    return model


def closed_loop(model: mujoco.MjModel, key: int, steps: int):
    """(qpos [T, nq], qvel [T, nv], warm starts [T, nv], commands [T, nu]) before each control step; T <= steps,
    fewer when the torso drops below the env's termination height."""
    start = jax.device_get(env.initial_data(jax.random.key(key)))
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = start.qpos, start.qvel
    rows, last = [], np.zeros(model.nu)
    for k in range(steps):
        last = np.clip(controller(data.qpos.copy(), data.qvel.copy(), k * env.ctrl_dt, last), -1.0, 1.0)
        rows.append((data.qpos.copy(), data.qvel.copy(), data.qacc_warmstart.copy(), last))
        data.ctrl[:] = last
        mujoco.mj_step(model, data, n_substeps)
        if data.qpos[1] < env.termination_height:
            break
    return tuple(np.array(column) for column in zip(*rows, strict=True))


qpos, qvel, warm, ctrl = closed_loop(real, 0, round(SECONDS / env.ctrl_dt) + 1)
first = max(BURN_INS)  # every piece starts where the longest burn-in fits before it


def replay_error(model: mujoco.MjModel, length: int, warm_start: str) -> float:
    data, errors = mujoco.MjData(model), []
    for s in range(first, len(qpos) - length, length):
        mujoco.mj_resetData(model, data)
        if warm_start.startswith("burn-in"):
            b = int(warm_start.split()[1])
            data.qpos[:], data.qvel[:] = qpos[s - b], qvel[s - b]
            for k in range(s - b, s):
                data.ctrl[:] = ctrl[k]
                mujoco.mj_step(model, data, n_substeps)
            simulated = data.qacc_warmstart.copy()
            mujoco.mj_resetData(model, data)
            data.qacc_warmstart[:] = simulated
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos[s], qvel[s], ctrl[s]
        if warm_start == "recorded":
            data.qacc_warmstart[:] = warm[s]
        elif warm_start == "converged":
            for _ in range(50):
                mujoco.mj_forward(model, data)
                data.qacc_warmstart[:] = data.qacc
        for k in range(s, s + length):
            data.ctrl[:] = ctrl[k]
            mujoco.mj_step(model, data, n_substeps)
            errors.append(np.concatenate([(data.qpos - qpos[k + 1]) / NOISE[0], (data.qvel - qvel[k + 1]) / NOISE[1]]))
    return float(np.sqrt(np.mean(np.square(errors))))


starts = ["zero", "converged", *(f"burn-in {b}" for b in BURN_INS), "recorded"]
print(f"replays of {len(qpos)} samples on {real_file}, error in noise units (qpos {NOISE[0]}, qvel {NOISE[1]})")
print("| control steps | " + " | ".join(f"warm start {s}" for s in starts) + " | nominal model, zero |")
print("|---" * (len(starts) + 2) + "|")
for length in PIECES:
    cells = [replay_error(real, length, s) for s in starts] + [replay_error(nominal, length, "zero")]
    print(f"| {length} | " + " | ".join(f"{c:.3g}" for c in cells) + " |")

print("\ncontrol steps before a fall (1000: none), reset keys 0-3")
for name, model in [("nominal", nominal), ("real", real)]:
    for solver, solved in [("1 iteration", model), ("converged", converged(model))]:
        steps = [len(closed_loop(solved, key, 1000)[0]) for key in range(4)]
        print(f"| {name} | {solver} | {', '.join(map(str, steps))} |")
