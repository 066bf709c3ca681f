"""Every algorithm through the real training loop: on the toy env, a resumed run ends exactly as
the uninterrupted one (AHAC's horizon and SAPO's temperature included); on the pendulum, AHAC and
SAPO learn to swing up (slow); the registry by name."""

import dataclasses
import json
import shutil

import jax
import numpy as np
import pytest

import envs
from shac.config import (
    CheckpointConfig,
    EnvConfig,
    EvalConfig,
    LoggerConfig,
    TrainConfig,
)
from shac.core.algorithms import ALGORITHMS, make_algorithm
from shac.run.checkpoint import state_arrays
from shac.run.train import train
from tests import tiny_configs
from tests.conftest import run_cli
from tests.toy_env import LineEnv, RegisteredLineEnv

PENDULUM_THRESHOLD = -550.0
"""The final evaluation return the pendulum must beat (SHAC's end-to-end test uses the same)."""
LEARNING_ARGS = {
    # the window grows from 16 to 32 steps in the first epochs (no contacts: stiffness 0)
    "ahac": ["algo=ahac", "algo.horizon=32", "algo.ahac.min_horizon=16", "algo.ahac.horizon_lr=5e-3"],
    "sapo": ["algo=sapo"],
}

BASE = dataclasses.replace(tiny_configs.SHAC, max_epochs=4, critic_iterations=8)
ALGO_CONFIGS = {
    "shac": BASE,
    "ahac": dataclasses.replace(tiny_configs.AHAC, max_epochs=4, critic_iterations=8),
    "sapo": dataclasses.replace(tiny_configs.SAPO, max_epochs=4, critic_iterations=8),
}


@pytest.fixture(scope="module", autouse=True)
def line_env():
    """The toy env registered as `line` while this module runs (the others see only the real tasks)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(envs._REGISTRY, "line", RegisteredLineEnv)
        yield


@pytest.mark.parametrize("name", ["ahac", "sapo"])  # SHAC's: test_resume, through the command line
def test_a_resumed_run_ends_exactly_as_the_uninterrupted_one(tmp_path, name):
    config = TrainConfig(
        env=EnvConfig(name="line", episode_length=5),
        algo=ALGO_CONFIGS[name],
        eval=EvalConfig(every=0, episodes=2),
        logger=LoggerConfig(mode="disabled", progress=False),
        checkpoint=CheckpointConfig(every=2, max_to_keep=5),
    )
    straight, _ = train(config, tmp_path / "straight")
    shutil.copytree(tmp_path / "straight", tmp_path / "resumed")
    shutil.rmtree(tmp_path / "resumed" / "checkpoints" / "4")  # as if killed after epoch 3
    resumed, _ = train(config, tmp_path / "resumed", resume=True)
    expected, actual = jax.device_get(state_arrays(straight)), jax.device_get(state_arrays(resumed))
    assert expected.keys() == actual.keys()
    assert any(key.startswith("algo_state/") for key in expected)
    for key in expected:
        np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)
    if name == "ahac":
        assert float(straight.algo_state["horizon"]) > 2.0  # the horizon moved, and resumed where it was


def test_make_algorithm_by_name_and_a_clear_error_otherwise():
    assert {name: type(make_algorithm(config, LineEnv())) for name, config in ALGO_CONFIGS.items()} == ALGORITHMS
    with pytest.raises(ValueError, match=r"unknown algo\.name 'ppo'; available: shac, ahac, sapo"):
        make_algorithm(dataclasses.replace(BASE, name="ppo"), LineEnv())


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LEARNING_ARGS))
def test_pendulum_learns_to_swing_up(tmp_path, name):
    run_cli(
        "launch/train.py",
        "env=pendulum_swingup",
        *LEARNING_ARGS[name],
        "algo.max_epochs=150",
        "eval.every=50",
        "seed=0",
        "logger=disabled",
        "logger.progress=false",
        f"hydra.run.dir={tmp_path}",
    )
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    evals = [r["eval/mean_return"] for r in records if "eval/mean_return" in r]
    assert len(evals) == 3
    assert evals[-1] > PENDULUM_THRESHOLD, evals  # measured (docs/algorithms.md): AHAC -318, SAPO -378
    assert evals[-1] > evals[0], evals
    signals = {"ahac": ("ahac/horizon", "ahac/stiffness"), "sapo": ("sapo/temperature", "sapo/entropy")}[name]
    assert all(key in records[-1] for key in signals)
