"""The launch scripts' process-wide settings (launch/runtime.py)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = """
import sys
import jax.numpy as jnp
from launch.runtime import configure_compile_cache

configure_compile_cache(sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
print(jax.jit(lambda x: jnp.sin(x) @ x.T)(jnp.ones((3, 3))).sum())
"""


def run_with_cache(cache: Path, xla_log_level: str | None) -> str:
    """Runs PROGRAM in a fresh interpreter with the compilation cache in `cache`; returns its stderr."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if xla_log_level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = xla_log_level
    command = [sys.executable, "-c", "import jax\n" + PROGRAM, str(cache)]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def test_loading_from_the_cache_logs_nothing_unless_xla_log_level_0_asks(tmp_path):
    run_with_cache(tmp_path, None)  # compiles and fills the cache
    # every load from the cache makes XLA log (a warning on any CPU, errors on some); level 0 shows them
    assert "pjrt_executable.cc" in run_with_cache(tmp_path, "0")
    quiet = run_with_cache(tmp_path, None)
    assert not [line for line in quiet.splitlines() if line[:1] in "EW" and line[1:5].isdigit()], quiet
