"""Where the time of a 24-parameter arm fit goes, for this project's fit and mujoco.sysid's.

    python docs/sysid/arm_fit_cost.py

The five recordings of the arm comparison against mujoco.sysid (docs/sysid.md, "Against
mujoco.sysid", 24 parameters, forward differences), each fitted by both tools as the benchmark
fits them, with MuJoCo's multithreaded C rollout (`mujoco.rollout.Rollout.rollout`, which both
tools call for every simulation) wrapped to count the physics steps it simulates and the seconds
it takes. Per recording and tool it prints the fit's seconds, the seconds inside the rollout and
their share, the physics steps simulated (millions) and the rollout's microseconds per step; the
results go to docs/benchmarks/sysid_fit_cost_arm.json.
"""

import json
import time

import mujoco.rollout
import numpy as np

from launch.runtime import configure_runtime

configure_runtime()

from arm_comparison import BENCHMARKS, ArmComparison  # noqa: E402

from shac.sysid import versus_mujoco  # noqa: E402

OUTPUT = BENCHMARKS / "sysid_fit_cost_arm.json"
TOOLS = ("shac", "mujoco.sysid")

arm = ArmComparison.load("sysid_versus_mujoco_arm_reach_armature_damping_frictionloss_kp")
options, keys = arm.options, arm.keys
counted = {"steps": 0, "seconds": 0.0}
rollout = mujoco.rollout.Rollout.rollout


def counting_rollout(*args, **kwargs):
    start = time.perf_counter()
    state, sensordata = rollout(*args, **kwargs)
    counted["seconds"] += time.perf_counter() - start
    counted["steps"] += state.shape[0] * state.shape[1]  # [batch, steps, state size]
    return state, sensordata


mujoco.rollout.Rollout.rollout = counting_rollout


def fit(tool: str, recording) -> dict:
    counted.update(steps=0, seconds=0.0)
    steps, upper = options["steps"], options["upper"]
    if tool == "shac":
        result = versus_mujoco.fit_shac(arm.guess_model, keys, recording, steps, upper, "forward_difference")
    else:
        result = versus_mujoco.fit_mujoco(arm.guess_model, arm.spec, keys, recording, steps, upper)
    return {
        "fit_seconds": result.fit_seconds,
        "rollout_seconds": counted["seconds"],
        "rollout_share": counted["seconds"] / result.fit_seconds,
        "steps_simulated": counted["steps"],
        "microseconds_per_step": 1e6 * counted["seconds"] / counted["steps"],
        "solver_steps": result.steps,
        "status": result.status,
    }


versus_mujoco.fit_shac(arm.guess_model, keys, arm.recording(0), 1, options["upper"], "forward_difference")  # warm-up
rows = []
print(f"{'recording':>9s} {'tool':>13s} {'fit s':>6s} {'rollout s':>9s} {'share':>6s} {'M steps':>7s} {'us/step':>7s}")
for k in range(options["datasets"]):
    recording = arm.recording(k)
    row = {"recording": k, **{tool: fit(tool, recording) for tool in TOOLS}}
    rows.append(row)
    for tool in TOOLS:
        r = row[tool]
        print(
            f"{k:>9d} {tool:>13s} {r['fit_seconds']:>6.2f} {r['rollout_seconds']:>9.2f} {r['rollout_share']:>6.1%} "
            f"{r['steps_simulated'] / 1e6:>7.2f} {r['microseconds_per_step']:>7.2f}",
            flush=True,
        )

summary = {
    tool: {
        name: float(np.median([row[tool][name] for row in rows]))
        for name in ("fit_seconds", "rollout_share", "steps_simulated", "microseconds_per_step")
    }
    for tool in TOOLS
}
ratios = {
    name: [row["shac"][name] / row["mujoco.sysid"][name] for row in rows]
    for name in ("fit_seconds", "steps_simulated", "microseconds_per_step")
}
summary["shac_over_mujoco"] = {name: [min(r), max(r)] for name, r in ratios.items()}
print(json.dumps(summary, indent=1))
OUTPUT.write_text(json.dumps({"command": "python docs/sysid/arm_fit_cost.py", "summary": summary, "rows": rows}))
