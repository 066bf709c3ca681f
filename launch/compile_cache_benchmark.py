"""Cold versus warm time-to-first-epoch with JAX's persistent compilation cache.

    python launch/compile_cache_benchmark.py [envs=[cartpole_swingup,ant]] [epochs=2]

For each environment (those not registered are skipped), launches
`launch/train.py` twice in fresh processes that share a new, empty cache
directory: the first compiles everything (cold), the second loads it (warm).
Reports, from process start, the time until the first epoch is in
metrics.jsonl and until the process exits. Results are in docs/compile_cache.md.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from launch import cli

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 0.05


@dataclass
class BenchmarkArgs:
    envs: list[str] = field(default_factory=lambda: ["cartpole_swingup", "ant"])
    """Environments to measure, each with its configs/env/<name>.yaml settings."""
    epochs: int = 2
    """Epochs per launch (evaluation runs after the last, outside the first-epoch time)."""
    timeout_s: float = 1800.0
    """Give up on a launch after this long."""


def launch(env: str, epochs: int, cache: Path, run_dir: Path, timeout_s: float) -> tuple[float, float]:
    """Seconds from process start to the first epoch's record, and to the process's exit."""
    command = [
        sys.executable,
        "launch/train.py",
        f"env={env}",
        f"algo.max_epochs={epochs}",
        "eval.every=0",
        "logger=disabled",
        "logger.progress=false",
        f"compile_cache={cache}",
        f"hydra.run.dir={run_dir}",
    ]
    metrics = run_dir / "metrics.jsonl"
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first_epoch = None
    while process.poll() is None:
        if first_epoch is None and metrics.is_file() and metrics.read_text().strip():
            first_epoch = time.perf_counter() - start
        if time.perf_counter() - start > timeout_s:
            process.kill()
            sys.exit(f"{env}: no result after {timeout_s:.0f} s")
        time.sleep(POLL_S)
    total = time.perf_counter() - start
    if process.returncode != 0:
        sys.exit(f"{env}: train.py failed:\n{process.stderr.read()[-3000:]}")
    return first_epoch if first_epoch is not None else total, total


def cache_size_mb(cache: Path) -> float:
    return sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()) / 1e6


def main(argv: list[str]) -> None:
    args = cli.parse(BenchmarkArgs, argv, "usage: python launch/compile_cache_benchmark.py [envs=[a,b]] [epochs=2]")
    import envs

    columns = ("cold first epoch", "warm first epoch", "cold exit", "warm exit", "cache")
    print(f"{'env':<18} " + " ".join(f"{c:>17}" if "epoch" in c else f"{c:>10}" for c in columns))
    for env in args.envs:
        if env not in envs.names():
            print(f"{env:<18} skipped: not registered (available: {', '.join(envs.names())})")
            continue
        work = Path(tempfile.mkdtemp(prefix=f"shac-cache-{env}-"))
        try:
            cache = work / "jax_cache"
            cold = launch(env, args.epochs, cache, work / "cold", args.timeout_s)
            warm = launch(env, args.epochs, cache, work / "warm", args.timeout_s)
            print(
                f"{env:<18} {cold[0]:>15.1f} s {warm[0]:>15.1f} s {cold[1]:>8.1f} s {warm[1]:>8.1f} s "
                f"{cache_size_mb(cache):>6.1f} MB",
                flush=True,
            )
        finally:
            shutil.rmtree(work)


if __name__ == "__main__":
    main(sys.argv[1:])
