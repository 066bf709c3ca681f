"""Process-wide settings for the launch scripts (never done at library import time)."""

from __future__ import annotations

import os
from pathlib import Path

import jax

DEFAULT_CACHE = Path.home() / ".cache" / "shac" / "jax"


def configure_runtime(precision: str = "float32") -> None:
    """Turns on JAX's persistent compilation cache, headless MuJoCo rendering and the precision.

    The cache lives in `$SHAC_JAX_CACHE` (default ~/.cache/shac/jax); set
    `SHAC_JAX_CACHE=off` to disable it. `precision="float64"` enables
    jax_enable_x64 and the highest matmul precision, before any array exists.
    """
    if precision == "float64":
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_default_matmul_precision", "highest")
    os.environ.setdefault("MUJOCO_GL", "egl")
    cache = os.environ.get("SHAC_JAX_CACHE", str(DEFAULT_CACHE))
    if cache != "off":
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
