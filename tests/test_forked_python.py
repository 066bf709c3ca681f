"""tests/forked_python.py: a forked command ends as the same command in a fresh interpreter does."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.forked_python import ROOT, forking, run_python, start_python

SCRIPTS = {
    "prints_and_exits_0": """
        import sys
        print("out", sys.argv[1:], flush=False)
        print("err", file=sys.stderr)
    """,
    "exits_with_a_code": "import sys; print('before'); sys.exit(3)",
    "exits_with_a_message": "import sys; sys.exit('error: a message')",
    "raises": "def f():\n    raise ValueError('boom')\nf()",
    "exits_after_its_threads_and_atexit": """
        import atexit, threading, time
        atexit.register(lambda: print("atexit ran"))
        threading.Thread(target=lambda: (time.sleep(0.2), print("thread done"))).start()
        print("main done")
    """,
    "sees_its_directory_and_environment": """
        import os, sys
        print(os.getcwd(), os.environ.get("FORKED_PYTHON_TEST"), sys.path[0], __name__, sys.argv[0])
    """,
}
"""Scripts whose output and exit code must not tell a forked child from a fresh interpreter."""


def fresh(*args, env=None):
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_forked_script_ends_as_in_a_fresh_interpreter(tmp_path, name):
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(SCRIPTS[name]))
    env = {**os.environ, "FORKED_PYTHON_TEST": "set"}
    forked, expected = run_python(str(script), "a", "b", env=env), fresh(str(script), "a", "b", env=env)
    assert (forked.returncode, forked.stdout) == (expected.returncode, expected.stdout)
    if name == "raises":  # the traceback has the server's frames above the script's
        assert forked.stderr.startswith("Traceback") and forked.stderr.endswith(expected.stderr.split("\n", 1)[1])
    else:
        assert forked.stderr == expected.stderr


def test_a_module_runs_as_with_dash_m(tmp_path):
    (tmp_path / "in.json").write_text('{"b": 1, "a": [2]}')
    forked = run_python("-m", "json.tool", "--sort-keys", str(tmp_path / "in.json"))
    assert forked.returncode == 0 and json.loads(forked.stdout) == {"a": [2], "b": 1}
    assert forked.stdout == fresh("-m", "json.tool", "--sort-keys", str(tmp_path / "in.json")).stdout


@pytest.mark.skipif(not forking(), reason="commands get fresh interpreters here (not Linux, or SHAC_TESTS_FORK=0)")
def test_a_child_is_forked_with_the_libraries_imported_unless_its_environment_changes_an_import(tmp_path):
    script = tmp_path / "imported.py"
    script.write_text("import sys; print('mujoco.mjx' in sys.modules)")
    assert run_python(str(script)).stdout == "True\n"  # forked from the server
    other_flags = {**os.environ, "XLA_FLAGS": "--xla_backend_optimization_level=1"}  # read when the backend starts
    assert run_python(str(script), env=other_flags).stdout == "True\n"
    assert run_python(str(script), env={**os.environ, "JAX_ENABLE_X64": "1"}).stdout == "False\n"  # a fresh one


def test_shac_tests_fork_0_gives_every_command_a_fresh_interpreter(tmp_path, monkeypatch):
    script = tmp_path / "imported.py"
    script.write_text("import sys; print('mujoco.mjx' in sys.modules)")
    monkeypatch.setenv("SHAC_TESTS_FORK", "0")
    assert run_python(str(script)).stdout == "False\n"


def test_the_childs_xla_flags_reach_the_backend_it_starts(tmp_path):
    script = tmp_path / "backend.py"
    script.write_text("import jax; print(jax.numpy.ones(3).sum())")
    assert run_python(str(script)).stdout == "3.0\n"
    bad = run_python(str(script), env={**os.environ, "XLA_FLAGS": "--xla_no_such_flag=1"})
    assert bad.returncode != 0 and "Unknown flag in XLA_FLAGS: --xla_no_such_flag=1" in bad.stderr


def test_a_command_past_its_timeout_is_killed_and_the_next_still_runs(tmp_path):
    script = tmp_path / "sleeps.py"
    script.write_text("import time; time.sleep(60)")
    with pytest.raises(subprocess.TimeoutExpired):
        run_python(str(script), timeout=1)
    script.write_text("print('next')")
    assert run_python(str(script)).stdout == "next\n"


def test_children_run_side_by_side_and_signals_reach_them(tmp_path):
    waits = tmp_path / "waits.py"  # touches its argument once it handles SIGINT, then waits
    waits.write_text(
        "import pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGINT, lambda *_: sys.exit(130))\n"
        "pathlib.Path(sys.argv[1]).touch()\n"
        "time.sleep(60)\n"
    )
    quick = tmp_path / "quick.py"
    quick.write_text("print('quick')")
    waiting, killed = start_python(str(waits), str(tmp_path / "a")), start_python(str(waits), str(tmp_path / "b"))
    assert run_python(str(quick)).stdout == "quick\n"  # while both wait
    deadline = time.monotonic() + 60
    while not ((tmp_path / "a").exists() and (tmp_path / "b").exists()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert waiting.poll() is None and killed.poll() is None
    waiting.send_signal(signal.SIGINT)
    killed.kill()
    assert waiting.wait(timeout=60) == 130 and killed.wait(timeout=60) == -signal.SIGKILL
