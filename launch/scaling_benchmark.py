"""SHAC env-steps/s against the number of devices, one global batch split over them.

    python launch/scaling_benchmark.py [env=pendulum_swingup] [num_envs=64] [horizon=32] [epochs=5]
        [platform=cpu] [devices=[1,2]] [out=docs/scaling_cpu]

Each device count runs in its own process. platform=cpu splits the host into
that many XLA devices (`--xla_force_host_platform_device_count`, set before jax
starts; they share the host's cores); platform=gpu uses the first that many
GPUs (default: 1, 2, 4, ... up to all of them). The same `num_envs` is split
over the devices (`shac.run.parallel`); after one epoch (compilation) `epochs`
epochs are timed. Prints a table and writes `<out>.json` and `<out>.png`.
Results are in docs/scaling.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from launch import cli

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = {"cpu": "cpu", "gpu": "cuda"}
"""platform= -> JAX_PLATFORMS of the measuring process."""


@dataclass
class ScalingArgs:
    env: str = "pendulum_swingup"
    """Environment, with its configs/env/<name>.yaml settings (num_envs and horizon below override them)."""
    num_envs: int = 64
    """Environments in total, split over the devices (a multiple of every device count)."""
    horizon: int = 32
    """Steps per window."""
    epochs: int = 5
    """Timed epochs per device count, after one untimed epoch that compiles."""
    platform: str = "cpu"
    """cpu (forced host devices) or gpu."""
    devices: list[int] | None = None
    """Device counts to measure; None: [1, 2] on cpu, 1, 2, 4, ... and all on gpu."""
    out: str | None = None
    """Output path without suffix; None: docs/scaling_<platform>."""
    timeout_s: float = 1800.0
    """Give up on a device count after this long."""


def measure(args: ScalingArgs, num_devices: int) -> dict:
    """Trains `args.epochs` timed epochs on the first `num_devices` devices of this process; the timings."""
    from hydra import compose, initialize_config_dir

    from launch.runtime import configure_runtime

    configure_runtime()
    import jax

    from shac.config import make_env, to_train_config
    from shac.core.algorithms import make_algorithm
    from shac.run import parallel
    from shac.run.hydra_config import register_configs, split_launch_config

    register_configs()
    overrides = [f"env={args.env}", f"algo.num_envs={args.num_envs}", f"algo.horizon={args.horizon}"]
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        config = to_train_config(split_launch_config(compose(config_name="config", overrides=overrides))[0])
    if jax.device_count() < num_devices:
        raise SystemExit(f"devices={num_devices}, but this process has {jax.device_count()}: {jax.devices()}")
    shac = make_algorithm(config.algo, make_env(config.env, config.randomization, config.smoothing))
    mesh = parallel.make_mesh(config.algo.num_envs, jax.devices()[:num_devices])
    start = time.perf_counter()
    state = parallel.sharded_init(shac, mesh)(jax.random.key(0))
    epoch = parallel.sharded_epoch(shac, mesh)
    state = jax.block_until_ready(epoch(state)[0])
    first_epoch = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(args.epochs):
        state, _ = epoch(state)
    jax.block_until_ready(state)
    seconds = time.perf_counter() - start
    steps = args.epochs * config.algo.num_envs * config.algo.horizon
    return {
        "devices": num_devices,
        "device_kind": jax.devices()[0].device_kind,
        "envs_per_device": config.algo.num_envs // num_devices,
        "first_epoch_s": round(first_epoch, 2),
        "timed_s": round(seconds, 3),
        "env_steps_per_s": round(steps / seconds, 1),
    }


def launch(args: ScalingArgs, num_devices: int) -> dict:
    """`measure` in a fresh process with `num_devices` devices of `args.platform`."""
    env = {**os.environ, "JAX_PLATFORMS": PLATFORMS[args.platform]}
    if args.platform == "cpu":
        flags = env.get("XLA_FLAGS", "")
        env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={num_devices}".strip()
    argv = [f"{k}={v}" for k, v in vars(args).items() if v is not None and k != "devices"]
    command = [sys.executable, __file__, "measure", f"devices=[{num_devices}]", *argv]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.timeout_s)
    if result.returncode != 0:
        sys.exit(f"devices={num_devices} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def gpu_counts() -> list[int]:
    """1, 2, 4, ... and the number of GPUs of this machine (asked in a subprocess that allocates nothing)."""
    env = {**os.environ, "JAX_PLATFORMS": "cuda", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    command = [sys.executable, "-c", "import jax; print(jax.device_count())"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        sys.exit(f"platform=gpu: no GPU found:\n{result.stderr[-2000:]}")
    total = int(result.stdout.strip().splitlines()[-1])
    counts = [2**k for k in range(total.bit_length()) if 2**k < total]
    return [*counts, total]


def plot(results: list[dict], title: str, path: Path) -> None:
    """env-steps/s against devices, with linear scaling from one device for reference."""
    from matplotlib.figure import Figure

    devices = [r["devices"] for r in results]
    rates = [r["env_steps_per_s"] for r in results]
    figure = Figure(figsize=(5, 4), layout="constrained")
    ax = figure.subplots()
    ax.plot(devices, rates, "o-", label="measured")
    if devices[0] == 1:
        ax.plot(devices, [rates[0] * d for d in devices], "--", color="gray", label="linear scaling")
    ax.set_xlabel("devices")
    ax.set_ylabel("env steps / s")
    ax.set_xticks(devices)
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=9)
    ax.legend()
    figure.savefig(path, dpi=100)


def main(argv: list[str]) -> None:
    worker = argv[:1] == ["measure"]
    args = cli.parse(ScalingArgs, argv[1:] if worker else argv, f"usage: {__doc__.strip().splitlines()[2].strip()} ...")
    if args.platform not in PLATFORMS:
        sys.exit(f"unknown platform '{args.platform}'; available: {', '.join(PLATFORMS)}")
    if worker:
        print(json.dumps(measure(args, args.devices[0])))
        return
    counts = args.devices or ([1, 2] if args.platform == "cpu" else gpu_counts())
    results = []
    print(f"{args.env}, {args.num_envs} envs x {args.horizon} steps, {args.epochs} timed epochs")
    print(f"{'devices':>7} {'envs/device':>11} {'first epoch (s)':>15} {'env steps/s':>12} {'speed-up':>8}")
    for count in counts:
        result = launch(args, count)
        results.append(result)
        speedup = result["env_steps_per_s"] / results[0]["env_steps_per_s"]
        print(
            f"{count:>7} {result['envs_per_device']:>11} {result['first_epoch_s']:>15.1f} "
            f"{result['env_steps_per_s']:>12,.0f} {speedup:>7.2f}x",
            flush=True,
        )
    out = ROOT / (args.out or f"docs/scaling_{args.platform}")
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": " ".join(["python launch/scaling_benchmark.py", *argv]),
        "date": time.strftime("%Y-%m-%d"),
        "host_cpu_cores": os.cpu_count(),
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "args": vars(args),
        "results": results,
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    kind = results[0]["device_kind"]
    plot(results, f"SHAC {args.env}, {args.num_envs} envs x {args.horizon} steps, {kind}", out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main(sys.argv[1:])
