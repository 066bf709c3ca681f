"""Process-wide settings for the launch scripts (never done at library import time)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import numpy as np
from jax.experimental import multihost_utils

if TYPE_CHECKING:  # importing shac.config imports mujoco, which must wait for headless_rendering()
    from shac.config import DistributedConfig

DEFAULT_CACHE = Path.home() / ".cache" / "shac" / "jax"
CACHE_ENV = "SHAC_JAX_CACHE"
XLA_LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
FAST_COMPILE_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
"""`XLA_FLAGS` that compile XLA:CPU programs faster and run them slower: LLVM's optimisation passes off, and
XLA's own loop emitters for fusions instead of its newer fusion emitters. For short runs that mostly compile,
as the tests' are (`tests/conftest.py`); `launch/compile_flags_benchmark.py` measures both sides."""


def with_fast_compile(xla_flags: str) -> str:
    """`xla_flags` (an `$XLA_FLAGS` value) with each of `FAST_COMPILE_XLA_FLAGS` it does not set otherwise.

    Set `$XLA_FLAGS` to the result before JAX's first computation: XLA reads it when JAX starts its backend.
    """
    given = xla_flags.split()
    names = {flag.split("=")[0] for flag in given}
    return " ".join(given + [flag for flag in FAST_COMPILE_XLA_FLAGS if flag.split("=")[0] not in names])


def headless_rendering() -> None:
    """Selects MuJoCo's headless EGL backend unless `MUJOCO_GL` is set; call before importing mujoco.

    MuJoCo picks its OpenGL backend when it is first imported. Set
    `MUJOCO_GL=osmesa` where EGL is missing.
    """
    os.environ.setdefault("MUJOCO_GL", "egl")


def compile_cache_dir(setting: str | None = None) -> str | None:
    """The persistent compilation cache directory: `setting`, else `$SHAC_JAX_CACHE`, else the default.

    Returns None when the cache is off (`off`).
    """
    cache = setting if setting is not None else os.environ.get(CACHE_ENV, str(DEFAULT_CACHE))
    return None if cache == "off" else str(Path(cache).expanduser())


def configure_compile_cache(setting: str | None = None) -> None:
    """Turns on JAX's persistent compilation cache in `compile_cache_dir(setting)` (unless it is off).

    Every compilation that takes a second or more is stored, so a relaunch of
    the same config on the same machine skips most of its compile time.

    XLA:CPU (jaxlib 0.9.2) logs two 3 kB errors for every program it loads from the cache,
    ending "could lead to execution errors such as SIGILL": it checks LLVM tuning flags
    (`+prefer-no-gather`, `+prefer-no-scatter`) as if they were CPU features, and the program
    it loads runs. With the cache on, XLA's C++ log therefore shows fatal messages only,
    unless `TF_CPP_MIN_LOG_LEVEL=0` asks for all of it.
    """
    cache = compile_cache_dir(setting)
    if cache is not None:
        if os.environ.get(XLA_LOG_LEVEL_ENV) != "0":
            from envs.private_apis import set_xla_log_level  # imports mujoco: after headless_rendering()

            set_xla_log_level(3)
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def configure_precision(precision: str) -> None:
    """`float64`: jax_enable_x64 and the highest matmul precision (before any array exists); `float32`: nothing."""
    if precision == "float64":
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_default_matmul_precision", "highest")


def initialize_distributed(cfg: DistributedConfig) -> None:
    """Joins the multi-process run `cfg` describes (nothing unless `cfg.enabled`); call before any JAX computation.

    Unset values are detected by `jax.distributed.initialize` (SLURM). CPU
    processes exchange their collectives over gloo.

    Raises:
        RuntimeError: the values are missing and no cluster was detected, or the
            coordinator cannot be reached; the message says which.
    """
    if not cfg.enabled:
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(
            coordinator_address=cfg.coordinator_address,
            num_processes=cfg.num_processes,
            process_id=cfg.process_id,
        )
    except (ValueError, RuntimeError) as e:
        raise RuntimeError(
            f"distributed.enabled=true: cannot initialise jax.distributed ({str(e).splitlines()[0]}); outside SLURM, "
            "set distributed.coordinator_address=<host:port>, distributed.num_processes and distributed.process_id"
        ) from e


def shared_run_dir(run_dir: Path) -> Path:
    """Process 0's `run_dir` on every process of a multi-process run (each may have timed its own); else `run_dir`."""
    if jax.process_count() == 1:
        return run_dir
    encoded = np.zeros(4096, np.uint8)
    path = os.fsencode(run_dir)[: encoded.size]
    encoded[: len(path)] = np.frombuffer(path, np.uint8)
    shared = multihost_utils.broadcast_one_to_all(encoded)
    return Path(os.fsdecode(np.asarray(shared, np.uint8).tobytes().rstrip(b"\0")))


def configure_runtime(compile_cache: str | None = None, precision: str = "float32") -> None:
    """Headless rendering, the persistent compilation cache and the precision (see the functions above)."""
    headless_rendering()
    configure_compile_cache(compile_cache)
    configure_precision(precision)
