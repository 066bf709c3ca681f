"""`launch/train.py` and `launch/evaluate.py` fail in one line, before Hydra writes anything, on bad command lines
and damaged files."""

import json
import os
import socket

import jax
import numpy as np
import pytest

from launch.preflight import PreflightError, preflight
from launch.train import CONFIG_DIR
from shac.config import AlgoConfig, ConfigError, EnvConfig, TrainConfig, make_env
from shac.core.algorithm import Shac
from shac.run.hydra_config import check_override_keys
from shac.run.run_dir import LOCK_FILE, RunDirectoryInUseError
from shac.run.serialization import save_config, save_policy
from tests.forked_python import run_python


def last_line_of_failure(*args):
    """Runs a launch script that must fail; its stderr's last line (after checking there is no traceback)."""
    result = run_python(*args, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "HYDRA_FULL_ERROR" not in result.stderr, result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]


def test_an_added_unknown_key_fails_like_a_set_one(tmp_path):
    with pytest.raises(ConfigError) as error:
        check_override_keys(["algo.horizn=8"], groups=["algo"])
    expected = f"config error: {error.value}".replace("'algo.horizn=8'", "'+algo.horizn=8'")
    assert last_line_of_failure("launch/train.py", "+algo.horizn=8", f"hydra.run.dir={tmp_path / 'run'}") == expected
    assert not (tmp_path / "run").exists()


def test_an_unwritable_run_directory_is_one_line():
    message = last_line_of_failure("launch/train.py", "hydra.run.dir=/proc/x")
    assert message == "error: cannot write the run directory '/proc/x': No such file or directory"


def test_resuming_a_run_whose_config_json_is_damaged_is_one_line(tmp_path):
    (tmp_path / "config.json").write_text('{"env": {"name": "pendulum_')  # cut short
    message = last_line_of_failure("launch/train.py", f"resume={tmp_path}")
    assert message.startswith(f"config error: '{tmp_path / 'config.json'}' is damaged: not valid JSON (")


def test_evaluating_a_truncated_policy_is_one_line(tmp_path):
    config = TrainConfig(env=EnvConfig(name="pendulum_swingup"), algo=AlgoConfig(actor_hidden=(8,)))
    save_config(tmp_path, config)
    state = jax.eval_shape(Shac(config.algo, make_env(config.env)).init, jax.random.key(0))
    zeros = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), (state.actor_params, state.normalizer))
    path = save_policy(tmp_path, *zeros)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    message = last_line_of_failure("launch/evaluate.py", f"run_dir={tmp_path}", "episodes=2")
    assert message.startswith(f"error: '{path}' is damaged (")
    assert message.endswith("evaluate a checkpoint instead with checkpoint=<epoch>")


def test_a_mistyped_resume_path_leaves_no_directory_behind(tmp_path):
    typo = tmp_path / "runs" / "cartpole_swingup" / "2026-01-01_00-00-00_seeed0"
    with pytest.raises(PreflightError, match=f"cannot resume: no config.json in run directory '{typo}'"):
        preflight([f"resume={typo}"], CONFIG_DIR)
    assert not (tmp_path / "runs").exists()


def test_a_second_writer_is_refused_before_hydra_writes_into_the_directory(tmp_path):
    (tmp_path / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getppid()}))
    save_config(tmp_path, TrainConfig())
    for argv in ([f"hydra.run.dir={tmp_path}"], [f"resume={tmp_path}"]):
        with pytest.raises(RunDirectoryInUseError, match=f"is in use by pid {os.getppid()}"):
            preflight(argv, CONFIG_DIR)
    assert not (tmp_path / ".hydra").exists()


def test_a_fresh_run_into_another_runs_directory_is_refused(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"epoch": 1}) + "\n")
    with pytest.raises(FileExistsError, match=r"already holds the metrics\.jsonl of another run"):
        preflight([f"hydra.run.dir={tmp_path}"], CONFIG_DIR)
    preflight(["-m", f"hydra.sweep.dir={tmp_path}"], CONFIG_DIR)  # a sweep's runs go to subdirectories
