"""Domain randomisation: per-episode model parameters that keep gradients, and training from a sysid report."""

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from shac.config import (
    ConfigError,
    EnvConfig,
    EvalConfig,
    LoggerConfig,
    RandomizationConfig,
    TrainConfig,
    to_train_config,
)
from shac.run.train import train
from tests import tiny_configs


def test_reset_samples_parameters_per_env_and_step_uses_them():
    env = envs.make("pendulum_swingup", randomization={"joint:hinge:damping": (0.5, 1.0)})
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), 8))
    damping = np.asarray(states.info["model_params"][:, 0])
    assert ((damping >= 0.5) & (damping <= 1.0)).all() and np.ptp(damping) > 0.05
    # from one shared state (hanging, spinning at 3 rad/s), a more damped pendulum ends slower
    start = jax.jit(env.data_from_qpos_qvel)(jnp.array([jnp.pi]), jnp.array([3.0]))
    same = jax.tree.map(lambda x: jnp.broadcast_to(x, (8, *x.shape)), start)
    stepped = jax.jit(jax.vmap(env.step))(states.replace(pipeline_state=same), jnp.zeros((8, 1)))
    speed = np.abs(np.asarray(stepped.pipeline_state.qvel[:, 0]))
    assert speed[np.argmax(damping)] < speed[np.argmin(damping)]


def test_bad_range_is_named():
    with pytest.raises(ValueError, match=re.escape("range of 'joint:hinge:damping' has low 2.0 > high 1.0")):
        envs.make("pendulum_swingup", randomization={"joint:hinge:damping": (2.0, 1.0)})


@pytest.mark.parametrize(
    ("env", "key", "bounds", "message"),
    [
        ("pendulum_swingup", "body:pole:mass", (-2.0, -1.0), r"\[-2.0, -1.0\] must be > 0 \(a mass;"),
        ("pendulum_swingup", "body:pole:mass", (0.0, 1.0), r"\[0.0, 1.0\] must be > 0 \(a mass;"),
        ("pendulum_swingup", "body:world:mass", (0.5, 1.0), "the body has no mass in the model to scale its inertia"),
        ("pendulum_swingup", "joint:hinge:damping", (-0.1, 0.1), r"must be >= 0 \(damping cannot be negative\)"),
        ("pendulum_swingup", "joint:hinge:armature", (-1.0, 0.0), r"must be >= 0 \(armature cannot be negative\)"),
        ("pendulum_swingup", "joint:hinge:frictionloss", (-1.0, 1.0), r"must be >= 0 \(frictionloss cannot"),
        ("pendulum_swingup", "geom:bob:friction", (-0.5, 0.5), r"must be >= 0 \(friction cannot be negative\)"),
        ("pendulum_swingup", "actuator:torque:gear", (-1.0, 1.0), r"must be > 0, the sign of the model's gear 2.0"),
        ("pendulum_swingup", "actuator:torque:gear", (0.0, 2.0), r"must be > 0, the sign of the model's gear 2.0"),
        ("pendulum_swingup", "joint:hinge:damping", (0.0, float("inf")), r"\[0.0, inf\] must be finite"),
    ],
)
def test_a_physically_impossible_range_fails_before_compiling_in_one_line(env, key, bounds, message):
    with pytest.raises(ValueError, match=re.escape(f"randomization range of '{key}' ") + ".*" + message):
        envs.make(env, randomization={key: bounds})
    config = {"env": {"name": env}, "randomization": {"mode": "uniform", "ranges": {key: list(bounds)}}}
    with pytest.raises(ConfigError) as error:
        to_train_config(config)
    assert "\n" not in str(error.value)


def test_physically_valid_ranges_are_accepted():
    envs.make(
        "pendulum_swingup",
        randomization={
            "body:pole:mass": (0.5, 2.0),
            "joint:hinge:damping": (0.0, 0.1),
            "joint:hinge:armature": (0.0, 0.01),
            "geom:bob:friction": (0.0, 1.0),
            "actuator:torque:gear": (1.0, 3.0),
        },
    )


def test_a_mass_is_written_differentiably_with_its_inertia():
    from envs.physics.parameters import ModelParameter

    env = envs.make("pendulum_swingup")
    mass = ModelParameter.parse("body:pole:mass", env.mj_model)
    pole = mass.rows[0]
    m0, inertia0 = env.mj_model.body_mass[pole], env.mj_model.body_inertia[pole]
    # forward mode, as a sysid fit differentiates: inertia = inertia0 * m / m0, so d inertia / dm = inertia0 / m0
    inertia, tangent = jax.jvp(
        lambda m: mass.write(env.mjx_model, m).body_inertia[pole], (jnp.float32(2 * m0),), (jnp.float32(1.0),)
    )
    np.testing.assert_allclose(inertia, 2 * inertia0, rtol=1e-6)
    np.testing.assert_allclose(tangent, inertia0 / m0, rtol=1e-6)


def test_training_with_randomization_from_a_sysid_report(tmp_path):
    report = tmp_path / "sysid.json"
    report.write_text(json.dumps({"parameters": {"joint:hinge:damping": {"estimate": 0.1, "relative_std": 0.1}}}))
    config = TrainConfig(
        env=EnvConfig(name="pendulum_swingup"),
        algo=dataclasses.replace(tiny_configs.SHAC, max_epochs=2, critic_iterations=1, critic_minibatches=1),
        randomization=RandomizationConfig(mode="from_sysid", report=str(report), num_std=2.0),
        eval=EvalConfig(every=0, episodes=2),
        logger=LoggerConfig(mode="disabled", progress=False),
    )
    state, record = train(config, tmp_path / "run")
    damping = np.asarray(state.env_state.info["model_params"][:, 0])
    assert ((damping >= 0.1 * np.exp(-0.2) - 1e-6) & (damping <= 0.1 * np.exp(0.2) + 1e-6)).all()
    assert record["actor/skipped"] == 0 and np.isfinite(record["actor/grad_norm"])
    assert (tmp_path / "run" / "policy.msgpack").is_file()


def test_a_report_from_an_unconverged_fit_is_refused(tmp_path):
    from shac.config import randomization_ranges

    report = tmp_path / "sysid.json"
    entry = {"estimate": 0.1, "relative_std": 0.1}
    report.write_text(json.dumps({"converged": False, "parameters": {"joint:hinge:damping": entry}}))
    with pytest.raises(ValueError, match="from a sysid fit that did not converge"):
        randomization_ranges(RandomizationConfig(mode="from_sysid", report=str(report)))
    report.write_text(json.dumps({"converged": True, "parameters": {"joint:hinge:damping": entry}}))
    low, high = randomization_ranges(RandomizationConfig(mode="from_sysid", report=str(report), num_std=2.0))[
        "joint:hinge:damping"
    ]
    # estimate * exp(-+2 * 0.1)
    assert low == pytest.approx(0.1 * np.exp(-0.2)) and high == pytest.approx(0.1 * np.exp(0.2))


def test_a_fitted_control_delay_in_a_report_is_not_randomised(tmp_path):
    from shac.config import randomization_ranges

    # the delay belongs to the measurement model (shac/sysid/signals.py), not to the simulated model
    report = tmp_path / "sysid.json"
    entries = {"joint:hinge:damping": {"estimate": 0.1, "relative_std": 0.1}}
    entries["signal:ctrl:delay"] = {"estimate": 0.02, "relative_std": 0.01, "unit": 0.05}
    report.write_text(json.dumps({"converged": True, "parameters": entries}))
    ranges = randomization_ranges(RandomizationConfig(mode="from_sysid", report=str(report)))
    assert list(ranges) == ["joint:hinge:damping"]
