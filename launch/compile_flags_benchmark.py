"""What XLA's fast-compile flags save in compiling a window's gradient, and what they cost in running it.

    python launch/compile_flags_benchmark.py [envs=[cartpole_swingup,hopper]] [num_envs=2] [horizon=32] [calls=10]
        [out=docs/benchmarks/compile_flags.json]

For each environment, one fresh process at XLA's defaults and one with `FAST_COMPILE_XLA_FLAGS`
(launch/runtime.py, the flags the tests compile with), one after the other: each traces, compiles and calls
the jitted gradient of the `horizon`-step return of `num_envs` environments with respect to the actions
(the function tests/test_gradients.py checks), then times `calls` more calls. Prints seconds of tracing,
lowering and XLA compiling, the first call (all of those) and the later calls' mean, with each side's
ratio; writes them to `out`. Results are in docs/development.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from launch import cli

ROOT = Path(__file__).resolve().parents[1]
USAGE = (
    "usage: python launch/compile_flags_benchmark.py [envs=[cartpole_swingup,hopper]] [num_envs=2] [horizon=32]"
    " [calls=10] [out=docs/benchmarks/compile_flags.json]"
)
PHASES = {
    "trace_s": "/jax/core/compile/jaxpr_trace_duration",
    "lower_s": "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "compile_s": "/jax/core/compile/backend_compile_duration",
}
"""JAX's monitoring events for the three steps before a jitted function first runs."""


@dataclass
class BenchmarkArgs:
    envs: list[str] = field(default_factory=lambda: ["cartpole_swingup", "hopper"])
    """Environments to measure (see `envs.make`)."""
    num_envs: int = 2
    """N, environments simulated in parallel (the tests use 2)."""
    horizon: int = 32
    """h, steps in the window."""
    calls: int = 10
    """Calls timed after the first."""
    out: str = "docs/benchmarks/compile_flags.json"
    """Where the results go (JSON)."""


def measure(env_name: str, num_envs: int, horizon: int, calls: int) -> dict[str, float]:
    """Seconds of each step before the first call of the window's gradient, and the mean of `calls` later calls.

    Run in a fresh process: the flags are read once, when JAX starts its backend.
    """
    import time
    from collections import defaultdict

    from launch.runtime import configure_runtime

    configure_runtime(compile_cache="off")
    import jax

    import envs
    from shac.core.rollout import window_rewards

    seconds: dict[str, float] = defaultdict(float)

    def add(event: str, duration: float, **_) -> None:
        seconds[event] += duration

    jax.monitoring.register_event_duration_secs_listener(add)
    env = envs.make(env_name)
    start = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(1), num_envs))
    actions = 0.3 * jax.random.normal(jax.random.key(2), (horizon, num_envs, env.action_size))

    def total_return(actions: jax.Array) -> jax.Array:
        return window_rewards(jax.vmap(env.step), start, actions).sum()

    gradient = jax.jit(jax.value_and_grad(total_return))
    before = dict(seconds)
    clock = time.perf_counter()
    jax.block_until_ready(gradient(actions))
    first = time.perf_counter() - clock
    clock = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(gradient(actions))
    later = (time.perf_counter() - clock) / calls
    phases = {name: seconds[event] - before.get(event, 0.0) for name, event in PHASES.items()}
    return {**phases, "first_call_s": first, "call_ms": 1000 * later}


def measure_in_new_process(args: BenchmarkArgs, env_name: str, xla_flags: str) -> dict[str, float]:
    """`measure` in a new Python process whose `$XLA_FLAGS` is `xla_flags`."""
    code = (
        "import json, sys; from launch.compile_flags_benchmark import measure; "
        f"print(json.dumps(measure({env_name!r}, {args.num_envs}, {args.horizon}, {args.calls})))"
    )
    environment = {**os.environ, "XLA_FLAGS": xla_flags}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{env_name} with XLA_FLAGS={xla_flags!r} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    args = cli.parse(BenchmarkArgs, argv, USAGE)
    import envs
    from launch.runtime import FAST_COMPILE_XLA_FLAGS

    unknown = [name for name in args.envs if name not in envs.names()]
    if unknown:
        sys.exit(f"envs: {', '.join(unknown)} not registered (available: {', '.join(envs.names())})")
    sides = {"defaults": "", "fast_compile": " ".join(FAST_COMPILE_XLA_FLAGS)}
    results = {}
    print(f"{'env':<18} {'flags':<13} {'trace':>7} {'lower':>7} {'compile':>8} {'first call':>11} {'call':>10}")
    for env_name in args.envs:
        results[env_name] = {side: measure_in_new_process(args, env_name, flags) for side, flags in sides.items()}
        for side, row in results[env_name].items():
            print(
                f"{env_name:<18} {side:<13} {row['trace_s']:>5.1f} s {row['lower_s']:>5.1f} s"
                f" {row['compile_s']:>6.1f} s {row['first_call_s']:>9.1f} s {row['call_ms']:>7.1f} ms",
                flush=True,
            )
        fast, slow = results[env_name]["fast_compile"], results[env_name]["defaults"]
        print(
            f"{env_name:<18} fast/defaults: compile x{fast['compile_s'] / slow['compile_s']:.2f}, first call "
            f"x{fast['first_call_s'] / slow['first_call_s']:.2f}, later calls x{fast['call_ms'] / slow['call_ms']:.2f}"
        )
    record = {"args": asdict(args), "xla_flags": sides, "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
