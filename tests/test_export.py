"""Policy export: ONNX and jax.export artifacts that reproduce the JAX policy, and a refusal when they do not."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shac.config import AlgoConfig, EnvConfig, TrainConfig, make_env
from shac.core.algorithm import Shac
from shac.core.normalizer import RunningStatistics
from shac.run import export
from shac.run.serialization import RunPolicy

CONFIG = TrainConfig(
    env=EnvConfig(name="pendulum_swingup"), algo=AlgoConfig(num_envs=4, horizon=4, actor_hidden=(16, 16))
)


@pytest.fixture(scope="module")
def policy():
    """A pendulum policy with a non-trivial normaliser, as after training."""
    env = make_env(CONFIG.env)
    shac = Shac(CONFIG.algo, env)
    actor_params = shac.actor.init(jax.random.key(1), jnp.zeros(env.observation_size))
    normalizer = RunningStatistics(
        count=jnp.array(1000.0), mean=jnp.array([0.5, -0.2, 1.0]), var=jnp.array([0.3, 0.4, 4.0])
    )
    return RunPolicy(
        config=CONFIG, env=env, actor=shac.actor, actor_params=actor_params, normalizer=normalizer, source=Path("test")
    )


@pytest.fixture(scope="module")
def exported(policy, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("export")
    return export.export_policy(policy, out_dir, jax.random.key(0))


def test_export_writes_onnx_jax_export_and_a_spec(exported):
    assert set(exported) == {"onnx", "jax_export", "spec"}
    spec = json.loads(exported["spec"].read_text())
    assert spec["env"] == "pendulum_swingup"
    assert (spec["obs_size"], spec["action_size"]) == (3, 1)
    assert spec["action_low"] == [-1.0] and spec["action_high"] == [1.0]
    assert spec["actuators"] == ["torque"] and spec["actuator_gear"] == [2.0]
    assert spec["inputs"] == {"obs": ["batch", 3]} and spec["outputs"] == {"action": ["batch", 1]}
    assert all(error <= 1e-5 for error in spec["check"]["max_abs_error"].values())


def test_onnxruntime_and_jax_export_match_the_jax_policy(policy, exported):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(exported["onnx"]), providers=["CPUExecutionProvider"])
    assert [(i.name, i.shape) for i in session.get_inputs()] == [("obs", ["batch", 3])]
    assert [o.name for o in session.get_outputs()] == ["action"]
    random_obs = np.random.default_rng(7).normal(0.0, 3.0, (100, 3)).astype(np.float32)
    real_obs = export.check_observations(policy, jax.random.key(11))[export.RANDOM_OBSERVATIONS :]  # rollouts
    assert len(real_obs) == export.CHECK_EPISODES * policy.env.episode_length
    for obs in (random_obs, real_obs, real_obs[:1]):
        # the squashed mean action, computed here from the parameters
        normalized = (obs - policy.normalizer.mean) / jnp.sqrt(policy.normalizer.var + 1e-5)
        mean, _ = policy.actor.apply(policy.actor_params, normalized)
        expected = np.tanh(np.asarray(mean))
        np.testing.assert_allclose(session.run(["action"], {"obs": obs})[0], expected, rtol=0, atol=1e-5)
        artifact = jax.export.deserialize(bytearray(exported["jax_export"].read_bytes()))
        np.testing.assert_allclose(np.asarray(artifact.call(obs)), expected, rtol=0, atol=1e-5)


def test_an_artifact_that_disagrees_fails_the_export_and_writes_nothing(policy, exported, tmp_path, monkeypatch):
    monkeypatch.setattr(export, "to_onnx_bytes", lambda fn, obs_dim: exported["onnx"].read_bytes())  # no reconverting
    real_run_onnx = export.run_onnx
    monkeypatch.setattr(export, "run_onnx", lambda model, obs: real_run_onnx(model, obs) + 1e-3)
    with pytest.raises(export.ExportError, match=r"the onnx policy differs from the JAX policy by 0.001 > 1e-05"):
        export.export_policy(policy, tmp_path, jax.random.key(0))
    assert not list(tmp_path.iterdir())
