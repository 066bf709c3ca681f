"""The run directory's lock and the refusal to overwrite another run's results."""

import json
import logging
import os
import socket
import subprocess
import time

import pytest

from shac.run import run_dir
from shac.run.run_dir import LOCK_FILE, STALE_AFTER_S, RunDirectoryInUseError, RunLock, check_fresh


def write_lock(run_dir, host, pid):
    (run_dir / LOCK_FILE).write_text(json.dumps({"host": host, "pid": pid}))


def dead_pid():
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_the_lock_names_its_holder_and_goes_with_it(tmp_path):
    with RunLock(tmp_path):
        assert json.loads((tmp_path / LOCK_FILE).read_text()) == {"host": socket.gethostname(), "pid": os.getpid()}
        with pytest.raises(RunDirectoryInUseError):  # a second writer, even in the same process
            RunLock(tmp_path).__enter__()
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_live_holder_refuses_a_second_writer_in_one_line(tmp_path):
    holder = os.getppid()  # alive while this test runs
    write_lock(tmp_path, socket.gethostname(), holder)
    with pytest.raises(RunDirectoryInUseError) as error:
        RunLock(tmp_path).__enter__()
    assert str(error.value) == (
        f"run directory '{tmp_path}' is in use by pid {holder} on host {socket.gethostname()} "
        f"(lock file '{tmp_path / LOCK_FILE}', touched 0 s ago); wait for that run to end, or delete the lock file "
        "if it no longer runs"
    )
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == holder  # left alone


def test_a_stale_lock_of_a_dead_process_on_this_host_is_taken_over(tmp_path, caplog):
    pid = dead_pid()
    write_lock(tmp_path, socket.gethostname(), pid)
    with caplog.at_level(logging.WARNING), RunLock(tmp_path):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert f"taking over the lock '{tmp_path / LOCK_FILE}' of pid {pid} on host {socket.gethostname()}" in caplog.text


def test_a_lock_from_another_host_is_taken_over_only_once_its_holder_stopped_touching_it(tmp_path):
    write_lock(tmp_path, "another-host", dead_pid())  # this host cannot tell whether that pid runs there
    with pytest.raises(RunDirectoryInUseError, match="on host another-host"):
        RunLock(tmp_path).__enter__()
    untouched = time.time() - STALE_AFTER_S - 1
    os.utime(tmp_path / LOCK_FILE, (untouched, untouched))  # e.g. killed at a SLURM time limit
    with RunLock(tmp_path):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["host"] == socket.gethostname()


def test_the_holder_keeps_its_lock_fresh(tmp_path, monkeypatch):
    monkeypatch.setattr(run_dir, "HEARTBEAT_S", 0.01)
    with RunLock(tmp_path) as lock:
        old = time.time() - STALE_AFTER_S - 1
        os.utime(lock.path, (old, old))
        deadline = time.monotonic() + 10
        while lock.age() > STALE_AFTER_S and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lock.age() < 5


def test_a_fresh_run_refuses_another_runs_metrics_but_not_an_empty_file(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")  # a run that stopped before its first epoch
    check_fresh(tmp_path)
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "env_steps": 16}) + "\n")
    with pytest.raises(FileExistsError, match=f"run directory '{tmp_path}' already holds the metrics.jsonl"):
        check_fresh(tmp_path)
