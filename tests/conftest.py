"""Test session setup: headless rendering, the compilation cache, the trained pendulum run
that several modules examine, and how pytest-xdist shares the tests among its workers.

The command lines the tests run (`run_cli`, forked by tests/forked_python.py) share JAX's persistent
compilation cache (`$SHAC_JAX_CACHE`, see launch/runtime.py), so the runs of one config compile once.
The test process itself keeps it off: jaxlib 0.9.2's cache writer (`executable.serialize()`) has crashed this
long-lived process with a segfault (CI exit 139), never a short CLI run.

The tests compile with less optimisation than a user's runs (`FAST_COMPILE_XLA_FLAGS` in
`$XLA_FLAGS`, which the command lines inherit): they check behaviour, not speed, and most of
their time is compiling.
"""

import os

import pytest

from launch.runtime import FAST_COMPILE_XLA_FLAGS, configure_runtime, with_fast_compile
from tests.forked_python import run_python

# A flag already in $XLA_FLAGS wins, so that the suite can be timed at XLA's defaults:
# XLA_FLAGS="--xla_backend_optimization_level=3 --xla_cpu_use_fusion_emitters=true" pytest
os.environ["XLA_FLAGS"] = with_fast_compile(os.environ.get("XLA_FLAGS", ""))
configure_runtime(compile_cache="off")
OPTIMIZED_ENV = {
    **os.environ,
    "XLA_FLAGS": " ".join(flag for flag in os.environ["XLA_FLAGS"].split() if flag not in FAST_COMPILE_XLA_FLAGS),
}
"""The environment of the CLI runs that run longer than they compile: XLA's optimisations on."""

PENDULUM_ARGS = [
    "env=pendulum_swingup",
    "algo.max_epochs=150",
    "eval.every=50",
    "seed=0",
    "logger=offline",
    "logger.progress=false",
]
"""The end-to-end pendulum run; test_resume interrupts and resumes the same config and compares."""


def run_cli(*args, timeout=600, optimized=False):
    """Runs a launch script (`launch/<name>.py`, args...) and returns its stdout; fails on a non-zero exit.

    `optimized`: with XLA's optimisations (`OPTIMIZED_ENV`), for a run that runs longer than it compiles.
    """
    result = run_python(*args, env=OPTIMIZED_ENV if optimized else None, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


SHARED_WORK = {
    "test_envs": "env_runs",  # the compiled rollouts of tests/env_runs.py
    "test_locomotion": "env_runs",
    "test_resume": "pendulum_run",  # the session fixture below
    "test_train_cli": "pendulum_run",
}
"""Modules that must run in one worker because they share compiled functions or a fixture."""
INDEPENDENT = {"test_gradients"}
"""Modules whose tests share nothing costly: each test may go to any worker."""
FIRST = ["env_runs", "pendulum_run", "test_playground", "test_gradients", "test_smoothing", "test_benchmark"]
"""The longest groups, started first so that no long one is left for the end."""


@pytest.hookimpl(tryfirst=True)  # the groups must be marked before xdist reads them into the node ids
def pytest_collection_modifyitems(items):
    """Groups the tests for `--dist loadgroup` (a module per worker, or the groups above), longest first."""

    def rank(names):
        return min((FIRST.index(name) for name in names if name in FIRST), default=len(FIRST))

    ranks = {}
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        group = item.nodeid if module in INDEPENDENT else SHARED_WORK.get(module, module)
        item.add_marker(pytest.mark.xdist_group(group))
        ranks[item.nodeid] = rank([module, group])
    items.sort(key=lambda item: ranks[item.nodeid])


@pytest.fixture(scope="session")
def pendulum_run(tmp_path_factory):
    """The run directory of 150 epochs of the pendulum through the command line, with videos every 50."""
    run_dir = tmp_path_factory.mktemp("pendulum_run")
    run_cli("launch/train.py", *PENDULUM_ARGS, "logger.video_every=50", f"hydra.run.dir={run_dir}", optimized=True)
    return run_dir
