"""What AHAC's window costs on the Ant when it simulates fewer steps than it compiled.

    python docs/algorithms/ahac_window_cost.py

AHAC compiles its window at the longest horizon (`algo.horizon`, 64 steps) and simulates the first
round(H) of them. A step past the window's end is skipped by a conditional, but the backward pass
still writes and reads that step's share of the intermediates it keeps (zeros). With
`algo.remat_every=k` the window runs in segments of k steps, recomputed in the backward pass, and a
segment that starts past the end is skipped whole. For `env=ant algo=ahac` this times, alternating
the calls, the median of REPEATS of:

- gradient_s/<steps>/remat_<k>: the actor's gradient (window and backward pass) with `steps` of the
  64 simulated, each step skipped on its own (k = 0, AHAC's default) or in segments of 8 (k = 8);
- epoch_s/remat_<k>: the whole AHAC epoch at the first epoch's window (8 steps);
- gradient_s/shac_8: SHAC's gradient of a window compiled at 8 steps (`env=ant`), what 8 steps cost
  when nothing is skipped;

and compile_s/remat_<k>: the AHAC epoch's compilation (the persistent compilation cache off).
Results go to docs/benchmarks/ahac_window_cost_ant.json.
"""

import json
import time
from pathlib import Path

from launch.runtime import configure_runtime

configure_runtime(compile_cache="off")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from shac.config import make_env, to_train_config  # noqa: E402
from shac.core.algorithms import make_algorithm  # noqa: E402
from shac.run.hydra_config import register_configs, split_launch_config  # noqa: E402
from shac.tools.benchmarks.throughput import epoch_gradient, median_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "docs" / "benchmarks" / "ahac_window_cost_ant.json"
REPEATS = 15
WINDOWS = (8, 16, 32, 64)
REMAT = (0, 8)


def ant_config(*overrides: str):
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        return to_train_config(split_launch_config(compose(config_name="config", overrides=["env=ant", *overrides]))[0])


def compiled_gradient(algorithm, state):
    """The epoch's actor gradient (resets and keys fixed), compiled, and its state probes."""
    gradient, args = epoch_gradient(algorithm, state)
    return jax.jit(gradient).lower(*args).compile(), args[1]


def at_window(state, steps: int):
    return state.replace(algo_state={**state.algo_state, "horizon": jnp.float32(steps)})


def main() -> None:
    calls, result = {}, {}
    for remat_every in REMAT:
        config = ant_config("algo=ahac", f"algo.remat_every={remat_every}")
        env = make_env(config.env, config.randomization, config.smoothing)
        ahac = make_algorithm(config.algo, env)
        state = jax.block_until_ready(jax.jit(ahac.init)(jax.random.key(0)))
        start = time.perf_counter()
        epoch = jax.jit(ahac.epoch).lower(state).compile()
        result[f"compile_s/remat_{remat_every}"] = time.perf_counter() - start
        print(f"remat_every={remat_every}: the AHAC epoch compiled in {result[f'compile_s/remat_{remat_every}']:.0f} s")
        calls[f"epoch_s/remat_{remat_every}"] = (epoch, (state,))
        gradient, probes = compiled_gradient(ahac, state)
        for steps in WINDOWS:
            calls[f"gradient_s/{steps}/remat_{remat_every}"] = (gradient, (at_window(state, steps), probes))
    config = ant_config()
    shac = make_algorithm(config.algo, make_env(config.env, config.randomization, config.smoothing))
    state = jax.block_until_ready(jax.jit(shac.init)(jax.random.key(0)))
    gradient, probes = compiled_gradient(shac, state)
    shac_gradient = f"gradient_s/shac_{config.algo.horizon}"
    calls[shac_gradient] = (gradient, (state, probes))
    result.update(median_seconds(calls, REPEATS))
    for steps in WINDOWS:
        per_step, segments = (result[f"gradient_s/{steps}/remat_{k}"] for k in REMAT)
        result[f"gradient_s/{steps}/ratio"] = per_step / segments
        print(
            f"{steps} of 64 steps: gradient {per_step * 1e3:.0f} ms skipping steps, {segments * 1e3:.0f} ms "
            f"skipping segments of 8 ({per_step / segments:.2f}x)"
        )
    result["epoch_s/ratio"] = result["epoch_s/remat_0"] / result["epoch_s/remat_8"]
    print(
        f"epoch at 8 steps: {result['epoch_s/remat_0'] * 1e3:.0f} ms against {result['epoch_s/remat_8'] * 1e3:.0f} ms "
        f"({result['epoch_s/ratio']:.2f}x); SHAC's {config.algo.horizon}-step gradient "
        f"{result[shac_gradient] * 1e3:.0f} ms"
    )
    OUTPUT.write_text(json.dumps({"device": str(jax.devices()[0]), "repeats": REPEATS, **result}, indent=2) + "\n")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
