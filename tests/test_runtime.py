"""The launch scripts' process-wide settings (launch/runtime.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launch import compile_flags_benchmark
from launch.runtime import FAST_COMPILE_XLA_FLAGS, with_fast_compile

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


def test_fast_compile_flags_join_the_given_ones_and_never_override_them():
    defaults = "--xla_backend_optimization_level=3 --xla_cpu_use_fusion_emitters=true"
    assert with_fast_compile("") == " ".join(FAST_COMPILE_XLA_FLAGS)
    assert with_fast_compile(defaults) == defaults
    assert with_fast_compile("--xla_force_host_platform_device_count=2  --xla_backend_optimization_level=2") == (
        "--xla_force_host_platform_device_count=2 --xla_backend_optimization_level=2"
        " --xla_cpu_use_fusion_emitters=false"
    )
    assert with_fast_compile(with_fast_compile("")) == with_fast_compile("")  # the xdist workers apply it again
    assert with_fast_compile("") in os.environ["XLA_FLAGS"]  # tests/conftest.py compiled this process with them


def test_compile_flags_benchmark_times_both_sides_in_fresh_processes(tmp_path, capsys):
    out = tmp_path / "flags.json"
    compile_flags_benchmark.main(["envs=[pendulum_swingup]", "horizon=4", "calls=2", f"out={out}"])
    assert "pendulum_swingup   fast/defaults: compile x" in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["xla_flags"] == {"defaults": "", "fast_compile": " ".join(FAST_COMPILE_XLA_FLAGS)}
    for row in record["results"]["pendulum_swingup"].values():
        assert 0 < row["compile_s"] < row["first_call_s"]  # the first call traces, lowers and compiles
        assert row["trace_s"] > 0 and row["lower_s"] > 0 and row["call_ms"] > 0


def test_compile_flags_benchmark_names_an_unknown_env_and_the_registered_ones():
    with pytest.raises(SystemExit, match=r"^envs: pendulum not registered \(available: .*pendulum_swingup"):
        compile_flags_benchmark.main(["envs=[pendulum,hopper]"])
