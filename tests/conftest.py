"""Test session setup: headless rendering, the compilation cache, and the trained pendulum run
that several modules examine.

The CLI subprocesses share JAX's persistent compilation cache (`$SHAC_JAX_CACHE`, see
launch/runtime.py), so the runs of one config compile once. The test process itself
keeps it off: jaxlib 0.9.2's cache writer (`executable.serialize()`) has crashed this
long-lived process with a segfault (CI exit 139), never a short CLI run.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from launch.runtime import configure_runtime

configure_runtime(compile_cache="off")

ROOT = Path(__file__).resolve().parents[1]
PENDULUM_ARGS = [
    "env=pendulum_swingup",
    "algo.max_epochs=150",
    "eval.every=50",
    "seed=0",
    "logger=offline",
    "logger.progress=false",
]
"""The end-to-end pendulum run; test_resume interrupts and resumes the same config and compares."""


def run_cli(*args, timeout=600):
    """Runs a launch script (`launch/<name>.py`, args...) and returns its stdout; fails on a non-zero exit."""
    result = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="session")
def pendulum_run(tmp_path_factory):
    """The run directory of 150 epochs of the pendulum through the command line, with videos every 50."""
    run_dir = tmp_path_factory.mktemp("pendulum_run")
    run_cli("launch/train.py", *PENDULUM_ARGS, "logger.video_every=50", f"hydra.run.dir={run_dir}")
    return run_dir
