"""Where the time of a window's gradient goes: XLA's CPU/GPU kernels of the forward and backward pass.

    python launch/profile_gradient.py [env=ant] [num_envs=64] [horizon=32] [top=12] [unroll_substeps=false] [out=...]

Times the forward window (the sum of rewards of N envs over h steps of fixed
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
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from launch.runtime import configure_runtime


@dataclass
class ProfileArgs:
    env: str = "ant"
    """Registered environment."""
    num_envs: int = 64
    """N, environments simulated in parallel."""
    horizon: int = 32
    """h, steps in the window."""
    top: int = 12
    """Kernel kinds to print per pass."""
    unroll_substeps: bool = False
    """Unroll the physics substeps (see `EnvConfig.unroll_substeps`)."""
    out: str = "runs/profile"
    """Where the traces go (`<out>/<env>/forward`, `<out>/<env>/gradient`)."""


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


def main(argv: list[str]) -> None:
    try:
        args = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(ProfileArgs), OmegaConf.from_dotlist(argv)))
    except OmegaConfBaseException as e:
        sys.exit(f"config error: {e}")
    configure_runtime()
    import jax
    import jax.numpy as jnp

    import envs

    if args.env not in envs.names():
        sys.exit(f"config error: unknown env '{args.env}'; available: {', '.join(envs.names())}")
    env = envs.make(args.env)
    env.unroll_substeps = args.unroll_substeps
    start = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), args.num_envs))

    def total_return(actions: jax.Array) -> jax.Array:
        def step(state, action):
            state = jax.vmap(env.step)(state, action)
            return state, state.reward

        return jax.lax.scan(step, start, actions)[1].sum()

    actions = 0.3 * jnp.ones((args.horizon, args.num_envs, env.action_size))
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
    print(
        f"{args.env}, N={args.num_envs}, h={args.horizon}: forward {seconds['forward'] * 1e3:.2f} ms, "
        f"gradient {seconds['gradient'] * 1e3:.2f} ms, ratio {seconds['gradient'] / seconds['forward']:.2f}"
    )
    for label, fn in passes.items():
        trace_dir = Path(args.out) / args.env / label
        with jax.profiler.trace(str(trace_dir), create_perfetto_trace=True):
            jax.block_until_ready(fn(actions))
        micros, calls = kernel_times(trace_dir)
        print(f"{label}: {sum(micros.values()) / 1e3:.1f} ms in {sum(calls.values())} kernel calls; the largest:")
        for kind, us in micros.most_common(args.top):
            print(f"  {kind:40s} {us / 1e3:8.1f} ms {calls[kind]:7d} calls {us / calls[kind]:7.1f} us/call")


if __name__ == "__main__":
    main(sys.argv[1:])
