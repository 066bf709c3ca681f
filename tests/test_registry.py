"""Environments by name: registered, `package.module:Class`, and installed packages' entry points."""

import json
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import mujoco
import pytest

import envs
from envs.physics.smoothing import Smoothing
from shac.config import AlgoConfig, ConfigError, EnvConfig, TrainConfig, make_env
from tests.forked_python import run_python
from tests.user_envs import ShortPendulum

ROOT = Path(__file__).resolve().parents[1]
USER_ENV = "tests.user_envs:ShortPendulum"


def test_a_class_in_a_users_module_is_built_by_its_path():
    assert envs.resolve(USER_ENV) is ShortPendulum
    env = envs.make(USER_ENV, smoothing=Smoothing(mode="soft"), unroll_substeps=True)
    assert isinstance(env, ShortPendulum) and env.episode_length == 50
    assert (env.smoothing.mode, env.unroll_substeps) == ("soft", True)


def test_a_users_module_is_found_in_the_working_directory_by_any_command_not_only_training(tmp_path, monkeypatch):
    package = tmp_path / "cwd_robots"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "pendulum.py").write_text("from tests.user_envs import ShortPendulum\n\nMine = ShortPendulum\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])  # restored afterwards
    assert envs.resolve("cwd_robots.pendulum:Mine") is ShortPendulum  # as launch/evaluate.py resolves a run's env


def test_an_installed_packages_entry_point_names_an_env(monkeypatch):
    installed = [EntryPoint(name="short_pendulum", value=USER_ENV, group=envs.ENTRY_POINT_GROUP)]

    def entry_points(group, name=None):
        return [ep for ep in installed if ep.group == group and name in (None, ep.name)]

    monkeypatch.setattr(envs, "entry_points", entry_points)
    assert "short_pendulum" in envs.names()
    assert envs.resolve("short_pendulum") is ShortPendulum


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "antt",
            "unknown env 'antt'; available: ant, arm_reach, cartpole_swingup, .*, "
            "playground/<Name> or package.module:Class",
        ),
        ("my_robots.walker:Walker", "env 'my_robots.walker:Walker': cannot import module 'my_robots.walker'"),
        ("tests.user_envs:Walker", "env 'tests.user_envs:Walker': module 'tests.user_envs' has no class 'Walker'"),
    ],
)
def test_a_bad_env_name_says_what_is_available(name, message):
    with pytest.raises(ConfigError, match=message):
        EnvConfig(name=name)


def test_the_horizon_is_checked_against_the_declared_episode_length_without_building_a_model(monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(mujoco.MjModel, "from_xml_path", no_model)
    monkeypatch.setattr(mujoco.MjSpec, "from_file", no_model)
    assert envs.declared_episode_length(USER_ENV) == 50
    TrainConfig(env=EnvConfig(name=USER_ENV), algo=AlgoConfig(horizon=50))
    with pytest.raises(
        ConfigError, match=r"algo.horizon=64 is longer than the episode of '.*ShortPendulum' \(50 steps\)"
    ):
        TrainConfig(env=EnvConfig(name=USER_ENV), algo=AlgoConfig(horizon=64))
    with pytest.raises(ConfigError, match=r"\(20 steps\)"):
        TrainConfig(env=EnvConfig(name=USER_ENV, episode_length=20), algo=AlgoConfig(horizon=32))


def test_the_environment_is_built_once_with_its_options():
    env = make_env(EnvConfig(name="pendulum_swingup", episode_length=30), smoothing=Smoothing(state_grad_clip=1.0))
    assert (env.episode_length, env.smoothing.state_grad_clip, env.randomized) == (30, 1.0, ())
    assert not hasattr(env, "smooth") and not hasattr(env, "randomize")  # nothing changes it afterwards


def test_train_cli_trains_a_users_env_by_its_path_at_the_one_default_setting(tmp_path):
    args = [
        f"env.name={USER_ENV}",
        "algo.num_envs=4",
        "algo.horizon=8",
        "algo.max_epochs=2",
        "algo.critic_minibatches=2",
        "eval.every=0",
        "eval.episodes=2",
        "logger=disabled",
        "logger.progress=false",
        f"hydra.run.dir={tmp_path}",
    ]
    result = run_python("launch/train.py", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "env.name without env=: using env=custom (configs/env/custom.yaml)" in result.stderr
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["env"]["name"] == USER_ENV
    # two critics from the one default setting (the cart-pole's has one), the horizon from the command line
    assert (config["algo"]["num_critics"], config["algo"]["horizon"]) == (2, 8)
