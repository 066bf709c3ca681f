"""Where the time of a window's gradient goes: XLA's CPU/GPU kernels of the forward and backward pass.

`launch/profile_gradient.py [env=ant] [num_envs=64] [horizon=32] [top=12] [unroll_substeps=false]
[hold_linesearch=false] [out=...]`
calls `profile_gradient`. It times the forward window (the sum of rewards of N envs over h steps of fixed
actions) and its gradient with respect to the actions (median of 5 calls),
then profiles one call of each with `jax.profiler` and prints the kernels
(thunks) that took the most time, grouped by kind (the name without its
number): e.g. `bitcast_pad_fusion`, the transposes of slices that dominated the
ant's backward pass before `envs/physics/mjx_math.py`. Trace files are left under
`runs/profile/<env>/` (`out=`) for Perfetto (https://ui.perfetto.dev).
"""

from __future__ import annotations

import collections
import gzip
import json
import re
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp

import envs
from envs.physics.smoothing import Smoothing
from shac.core.rollout import window_rewards


def kernel_times(trace_dir: Path) -> tuple[collections.Counter, collections.Counter]:
    """Microseconds and call counts per kernel kind in the newest Perfetto trace under `trace_dir`."""
    path = max(trace_dir.rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
    micros, calls = collections.Counter(), collections.Counter()
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    for event in events:
        name = event.get("name", "")
        kind = re.sub(r"[.\d]+$", "", name)
        # kernels only: not runtime phases ("A::B"), Python calls ("$...", "PjitFunction(...)"), end
        # markers, or loops (a loop's time is that of the kernels inside it)
        if event.get("ph") != "X" or name.startswith(("end:", "$")) or any(c in name for c in ":( ") or kind == "while":
            continue
        micros[kind] += event["dur"]
        calls[kind] += 1
    return micros, calls


def profile_gradient(
    env: str = "ant",
    num_envs: int = 64,
    horizon: int = 32,
    top: int = 12,
    unroll_substeps: bool = False,
    hold_linesearch: bool = False,
    out: str = "runs/profile",
) -> str:
    """Times and profiles the forward window of `env` and its gradient; the report, line by line.

    Args:
        env: environment name (see `envs.make`).
        num_envs: N, environments simulated in parallel.
        horizon: h, steps in the window.
        top: kernel kinds listed per pass.
        unroll_substeps: unroll the physics substeps (see `EnvConfig.unroll_substeps`).
        hold_linesearch: differentiate the solver's line search with its step held (`Smoothing.hold_linesearch`).
        out: where the traces go (`<out>/<env>/forward`, `<out>/<env>/gradient`).

    Raises:
        ValueError: an unknown environment.
    """
    name = env
    env = envs.make(name, unroll_substeps=unroll_substeps, smoothing=Smoothing(hold_linesearch=hold_linesearch))
    start = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), num_envs))

    def total_return(actions: jax.Array) -> jax.Array:
        return window_rewards(jax.vmap(env.step), start, actions).sum()

    actions = 0.3 * jnp.ones((horizon, num_envs, env.action_size))
    passes = {"forward": jax.jit(total_return), "gradient": jax.jit(jax.grad(total_return))}
    seconds = {}
    for label, fn in passes.items():
        tic = time.perf_counter()
        jax.block_until_ready(fn(actions))
        print(f"{label}: compiled and ran once in {time.perf_counter() - tic:.1f} s", flush=True)
        laps = []
        for _ in range(5):
            tic = time.perf_counter()
            jax.block_until_ready(fn(actions))
            laps.append(time.perf_counter() - tic)
        seconds[label] = statistics.median(laps)
    held = ", line search held" if hold_linesearch else ""
    lines = [
        f"{name}, N={num_envs}, h={horizon}{held}: forward {seconds['forward'] * 1e3:.2f} ms, "
        f"gradient {seconds['gradient'] * 1e3:.2f} ms, ratio {seconds['gradient'] / seconds['forward']:.2f}"
    ]
    for label, fn in passes.items():
        trace_dir = Path(out) / name / label
        with jax.profiler.trace(str(trace_dir), create_perfetto_trace=True):
            jax.block_until_ready(fn(actions))
        micros, calls = kernel_times(trace_dir)
        lines.append(
            f"{label}: {sum(micros.values()) / 1e3:.1f} ms in {sum(calls.values())} kernel calls; the largest:"
        )
        for kind, us in micros.most_common(top):
            lines.append(f"  {kind:40s} {us / 1e3:8.1f} ms {calls[kind]:7d} calls {us / calls[kind]:7.1f} us/call")
    return "\n".join(lines)
