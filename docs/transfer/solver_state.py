"""The one-iteration constraint solver as hidden state (what a recording does not carry), and a policy under a
converged solver.

    python docs/transfer/solver_state.py <run_dir> [<real file>]

`<run_dir>` is a training run of a task with a termination (`python launch/train.py env=hopper ...`). Two
measurements, in MuJoCo's C simulator under the run's deterministic policy:

1. Replays. A noise-free closed-loop recording of 1.4 s on the real file's model (the nominal one without a
   real file; reset key 0), replayed
   in pieces of 1, 5 and 20 control steps from its exact states, as a multiple-shooting fit's segments
   are. Every model here runs its solver for one iteration from a warm start (the previous step's
   accelerations), which the recorded positions and velocities do not hold. Each piece starts with the
   warm start zero (what a fit's segment gets), converged at its first state (50 solver passes),
   simulated from the measured state 1, 2 or 5 control steps before it (a burn-in), or the
   recording's own; with a real file, the nominal model's error, zero warm start, is the scale a parameter
   error has.
   Errors are root-mean-square over the pieces' states, in units of a sensor's noise (qpos 0.001,
   qvel 0.01).
2. Falls. Control steps before the task terminates (1000 at most) and the mean forward speed until then
   (m/s), from reset keys 0-3, on the nominal and the real model, with the training model's one iteration
   and with a converged solver (100 iterations, tolerance 1e-10).
"""

import copy
import sys
import types
from pathlib import Path

import jax
import mujoco
import numpy as np

from launch.runtime import configure_runtime

configure_runtime()

from envs.physics.parameters import ModelParameter  # noqa: E402
from launch.record_trajectory import policy_controller  # noqa: E402
from shac.run.real import check_real, load_real  # noqa: E402
from shac.run.serialization import load_config  # noqa: E402

SECONDS = 1.4
PIECES = (1, 5, 20)
BURN_INS = (1, 2, 5)
NOISE = (0.001, 0.01)

run_dir = sys.argv[1]
real_file = sys.argv[2] if len(sys.argv) > 2 else None
task = load_config(Path(run_dir)).env.name
env, controller = policy_controller(types.SimpleNamespace(policy=run_dir, env=task, dt=0.0))
nominal = env.mj_model
real = copy.deepcopy(nominal)
real_values = load_real(real_file) if real_file else {}
check_real(real_values, nominal, real_file)
for key, value in real_values.items():
    ModelParameter.parse(key, real).write_mj(real, value)
n_substeps = round(env.ctrl_dt / real.opt.timestep)
terminated = jax.jit(lambda qpos, qvel: env.terminated(env.data_from_qpos_qvel(qpos, qvel)))


def converged(model: mujoco.MjModel) -> mujoco.MjModel:
    model = copy.deepcopy(model)
    model.opt.iterations, model.opt.tolerance, model.opt.ls_iterations = 100, 1e-10, 50
    return model


def closed_loop(model: mujoco.MjModel, key: int, steps: int):
    """(qpos [T, nq], qvel [T, nv], warm starts [T, nv], commands [T, nu]) before each control step, and the state
    after the last; T <= steps, fewer when the task terminates."""
    start = jax.device_get(env.initial_data(jax.random.key(key)))
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = start.qpos, start.qvel
    rows, last = [], np.zeros(model.nu)
    for k in range(steps):
        last = np.clip(controller(data.qpos.copy(), data.qvel.copy(), k * env.ctrl_dt, last), -1.0, 1.0)
        rows.append((data.qpos.copy(), data.qvel.copy(), data.qacc_warmstart.copy(), last))
        data.ctrl[:] = last
        mujoco.mj_step(model, data, n_substeps)
        if terminated(data.qpos.astype(np.float32), data.qvel.astype(np.float32)):
            break
    return *(np.array(column) for column in zip(*rows, strict=True)), data.qpos.copy()


qpos, qvel, warm, ctrl, _ = closed_loop(real, 0, round(SECONDS / env.ctrl_dt) + 1)
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
print(
    f"{task}: replays of {len(qpos)} samples on {real_file or 'the nominal model'}, error in noise units (qpos "
    f"{NOISE[0]}, qvel {NOISE[1]})"
)
scale = " nominal model, zero |" * bool(real_file)
print("| control steps | " + " | ".join(f"warm start {s}" for s in starts) + " |" + scale)
print("|---" * (len(starts) + 1 + bool(real_file)) + "|")
for length in PIECES:
    cells = [replay_error(real, length, s) for s in starts] + [replay_error(nominal, length, "zero")] * bool(real_file)
    print(f"| {length} | " + " | ".join(f"{c:.3g}" for c in cells) + " |")

print("\ncontrol steps before the task terminates (1000: it does not) and forward speed (m/s), reset keys 0-3")
for name, model in [("nominal", nominal)] + [("real", real)] * bool(real_file):
    for solver, solved in [("1 iteration", model), ("converged", converged(model))]:
        episodes = [closed_loop(solved, key, 1000) for key in range(4)]
        steps = [len(e[0]) for e in episodes]
        speeds = [(e[-1][0] - e[0][0, 0]) / (len(e[0]) * env.ctrl_dt) for e in episodes]
        print(f"| {name} | {solver} | {', '.join(map(str, steps))} | {', '.join(f'{v:.2f}' for v in speeds)} |")
