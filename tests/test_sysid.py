"""System identification on data from MuJoCo's C simulator, identifiability flags, and the CLI."""

import copy
import functools
import json
import re
import shlex
import warnings
from dataclasses import asdict
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

import envs
from envs.physics.parameters import ModelParameter
from launch import cli
from launch.record_trajectory import RecordArgs, controls, simulate, start_state
from shac.sysid import coverage
from shac.sysid import fit as fit_module
from shac.sysid.fit import Problem, fit
from shac.sysid.noise import initial_noise, misfit
from shac.sysid.parameters import LOG_FLOOR, Bounds
from shac.sysid.recording import Trajectory, multisine, random_excitation, record, simulate_mujoco
from shac.sysid.report import analyze, recorded_motion, summary_lines
from shac.sysid.signals import DELAY
from tests.forked_python import run_python

ROOT = Path(__file__).resolve().parents[1]
DAMPING, FRICTION = "joint:hinge:damping", "joint:hinge:frictionloss"
PENDULUM = envs.make("pendulum_swingup")
CARTPOLE = envs.make("cartpole_swingup")


def model_with(**values):
    """The pendulum's MuJoCo model with parameters set, e.g. model_with(damping=0.1)."""
    model = copy.deepcopy(PENDULUM.mj_model)
    for attribute, value in values.items():
        ModelParameter.parse(f"joint:hinge:{attribute}", model).write_mj(model, value)
    return model


def recording(model, seconds, amplitudes, frequencies, qpos_noise, qvel_noise):
    ctrl = multisine(seconds, PENDULUM.ctrl_dt, amplitudes, frequencies)
    return record(model, ctrl, np.array([np.pi]), np.array([0.0]), PENDULUM.ctrl_dt, qpos_noise, qvel_noise)


def random_recording(dt, seed, seconds=10.0, damping=0.137, qpos_noise=1e-3, qvel_noise=1e-2):
    """Smooth random excitation from the hanging position, recorded every `dt` by MuJoCo's C simulator."""
    rng = np.random.default_rng(seed)
    ctrl = random_excitation(seconds, dt, 1, rng)
    return record(
        model_with(damping=damping), ctrl, np.array([np.pi]), np.array([0.0]), dt, qpos_noise, qvel_noise, rng
    )


def test_parameter_names_are_checked_against_the_model():
    with pytest.raises(ValueError, match="no joint named 'hinj' in the model; joints: hinge"):
        ModelParameter.parse("joint:hinj:damping", PENDULUM.mj_model)
    with pytest.raises(
        ValueError, match=re.escape("unsupported parameter 'joint:hinge:margin'; accepted: joint:<name>:damping|")
    ):
        ModelParameter.parse("joint:hinge:margin", PENDULUM.mj_model)
    with pytest.raises(ValueError, match="is not element:name:attribute"):
        ModelParameter.parse("damping", PENDULUM.mj_model)


def test_parameters_write_into_mjx_and_mujoco_models():
    bob = ModelParameter.parse("body:pole:mass", PENDULUM.mj_model)
    mjx_model = bob.write(PENDULUM.mjx_model, 2.0)
    assert bob.read(mjx_model) == pytest.approx(2.0)
    # the inertia scales with the mass (1.0 kg -> 2.0 kg doubles it)
    np.testing.assert_allclose(mjx_model.body_inertia[1], 2.0 * np.asarray(PENDULUM.mjx_model.body_inertia[1]))
    model = model_with(damping=0.3)
    assert ModelParameter.parse(DAMPING, model).read(model) == pytest.approx(0.3)
    assert ModelParameter.parse(DAMPING, PENDULUM.mj_model).read(PENDULUM.mj_model) == pytest.approx(0.05)


# a hinge (qpos 0, dof 0), a ball (qpos 1-4, dofs 1-3) and a slide (qpos 5, dof 4) in a chain without
# contacts, a position servo (kp 10, kv 1), a motor and a velocity servo on the hinge
ARM = mujoco.MjModel.from_xml_string("""
<mujoco>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="arm">
      <joint name="hinge" axis="0 1 0" stiffness="2"/>
      <geom name="rod" type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05" mass="1" friction="0.8 0.01 0.001"/>
      <body name="tip" pos="0 0 -0.5">
        <joint name="ball" type="ball"/>
        <geom name="bob" type="sphere" size="0.05" mass="0.2"/>
        <body name="sled">
          <joint name="slider" type="slide" axis="1 0 0" stiffness="5" springref="0.1"/>
          <geom type="box" size="0.02 0.02 0.02" mass="0.1"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="servo" joint="hinge" kp="10" kv="1"/>
    <motor name="torque" joint="hinge" gear="2"/>
    <velocity name="spin" joint="hinge" kv="3"/>
  </actuator>
</mujoco>
""")
ARM_MJX = mjx.put_model(ARM, impl="jax")


@pytest.mark.parametrize(
    ("key", "value", "entries"),
    [
        # one stiffness per joint: the ball is joint 1, though its dofs are 1-3
        ("joint:ball:stiffness", 3.0, {"jnt_stiffness": {1: 3.0}}),
        # the slider's qpos comes after the hinge's one and the ball's four
        ("joint:slider:springref", 0.2, {"qpos_spring": {5: 0.2}}),
        ("actuator:servo:kp", 7.0, {"actuator_gainprm": {(0, 0): 7.0}, "actuator_biasprm": {(0, 1): -7.0}}),
        ("actuator:servo:kv", 0.5, {"actuator_biasprm": {(0, 2): -0.5}}),
        ("actuator:torque:gain", 4.0, {"actuator_gainprm": {(1, 0): 4.0}}),
        ("geom:rod:friction", 0.6, {"geom_friction": {(0, 0): 0.6}}),
        ("geom:rod:torsional_friction", 0.02, {"geom_friction": {(0, 1): 0.02}}),
        ("geom:rod:rolling_friction", 0.003, {"geom_friction": {(0, 2): 0.003}}),
        # the centre of mass, one axis at a time: the tip is body 2 (after the world and the arm)
        ("body:tip:ipos_x", -0.03, {"body_ipos": {(2, 0): -0.03}}),
        ("body:arm:ipos_z", -0.2, {"body_ipos": {(1, 2): -0.2}}),
    ],
)
def test_parameters_write_the_same_entries_into_mjx_and_mujoco_models(key, value, entries):
    parameter = ModelParameter.parse(key, ARM)
    mjx_model = parameter.write(ARM_MJX, jnp.float32(value))
    mj_model = copy.deepcopy(ARM)
    parameter.write_mj(mj_model, value)
    assert parameter.read(mjx_model) == pytest.approx(value) and parameter.read(mj_model) == pytest.approx(value)
    for field, changed in entries.items():
        expected = np.array(getattr(ARM, field))
        for index, entry in changed.items():
            expected[index] = entry
        np.testing.assert_allclose(np.asarray(getattr(mjx_model, field)), expected, rtol=1e-6)
        np.testing.assert_array_equal(getattr(mj_model, field), expected)


def test_gradient_flows_into_a_position_servos_kp():
    kp = ModelParameter.parse("actuator:servo:kp", ARM)
    data = mjx.make_data(ARM_MJX)
    # hinge at 0.3 rad, servo target 0.1: the servo's force is kp (0.1 - 0.3), through both written entries
    data = data.replace(qpos=data.qpos.at[0].set(0.3), ctrl=jnp.array([0.1, 0.0, 0.0]))

    def hinge_velocity(value):
        return mjx.step(kp.write(ARM_MJX, value), data).qvel[0]

    grad = float(jax.jit(jax.grad(hinge_velocity))(jnp.float32(10.0)))
    # a stiffer servo pulls the hinge back harder; one step is linear in kp
    central = float(hinge_velocity(jnp.float32(11.0)) - hinge_velocity(jnp.float32(9.0))) / 2.0
    assert np.isfinite(grad) and grad < 0.0
    assert grad == pytest.approx(central, rel=1e-3)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "actuator:torque:kp",
            "parameter 'actuator:torque:kp': actuator 'torque' is not a position servo (kp and kv need gaintype "
            "fixed, biastype affine and biasprm[1] == -gainprm[0], as <position> compiles); use actuator:<name>:gain",
        ),
        ("actuator:spin:kv", "parameter 'actuator:spin:kv': actuator 'spin' is not a position servo"),
        ("actuator:servo:gain", "actuator 'servo' is a position servo whose bias is tied to its gain"),
        ("actuator:spin:gain", "actuator 'spin' is a velocity servo whose bias is tied to its gain"),
        ("joint:ball:springref", "a ball joint's spring reference is a pose, not one value; springref is accepted"),
        (
            "body:arm:inertia",
            "parameter 'body:arm:inertia' is three principal moments that must obey the triangle inequality; give "
            "the mass's spread along each axis of the inertial frame instead: body:arm:spread_x, spread_y or spread_z",
        ),
        ("body:arm:ipos", "parameter 'body:arm:ipos' is three values; give one axis at a time: body:arm:ipos_x"),
    ],
)
def test_parameters_an_element_cannot_take_are_refused_in_one_line(key, message):
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        ModelParameter.parse(key, ARM)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("key", "bounds", "message"),
    [
        ("actuator:servo:kp", (0.0, 20.0), r"must be > 0 \(a position gain; 0 disconnects the servo\)"),
        ("actuator:servo:kv", (-1.0, 1.0), r"must be >= 0 \(kv cannot be negative\)"),
        ("joint:hinge:stiffness", (-1.0, 1.0), r"must be >= 0 \(stiffness cannot be negative\)"),
        ("geom:rod:torsional_friction", (-0.1, 0.1), r"must be >= 0 \(torsional_friction cannot be negative\)"),
        ("geom:rod:rolling_friction", (-0.1, 0.1), r"must be >= 0 \(rolling_friction cannot be negative\)"),
        ("actuator:torque:gain", (-1.0, 1.0), r"must be > 0, the sign of the model's gain 1.0 \(0 disconnects it\)"),
    ],
)
def test_ranges_of_servo_spring_and_friction_parameters_are_checked(key, bounds, message):
    with pytest.raises(ValueError, match=message):
        ModelParameter.parse(key, ARM).check_range(*bounds, ARM)


# a 2 kg box of half-sizes 0.3, 0.1 and 0.02 m: spreads a / sqrt(3), moments m (b^2 + c^2) / 3 and permutations
SLAB = mujoco.MjModel.from_xml_string("""
<mujoco><worldbody>
  <body name="slab"><joint axis="0 1 0"/><geom type="box" size="0.3 0.1 0.02" mass="2"/></body>
  <body name="frame"><geom type="box" size="0.1 0.1 0.1" mass="0"/></body>
</worldbody></mujoco>
""")


def test_a_bodys_spreads_set_its_inertia_consistently_and_independently_of_its_mass():
    spreads = {f"body:slab:spread_{axis}": ModelParameter.parse(f"body:slab:spread_{axis}", SLAB) for axis in "xyz"}
    read = {key: parameter.read(SLAB) for key, parameter in spreads.items()}
    assert list(read.values()) == pytest.approx(np.array([0.3, 0.1, 0.02]) / np.sqrt(3))
    # a spread of 0.2 m along x: a second moment of 2 x 0.04 instead of 2 x 0.03, added to I_y and I_z
    expected = 2.0 / 3.0 * np.array([0.1**2 + 0.02**2, 0.3**2 + 0.02**2, 0.3**2 + 0.1**2]) + [0.0, 0.02, 0.02]
    spread_x = spreads["body:slab:spread_x"]
    mjx_model = spread_x.write(mjx.put_model(SLAB, impl="jax"), jnp.float32(0.2))
    mj_model = copy.deepcopy(SLAB)
    spread_x.write_mj(mj_model, 0.2)
    np.testing.assert_allclose(np.asarray(mjx_model.body_inertia[1]), expected, rtol=1e-6)
    np.testing.assert_allclose(mj_model.body_inertia[1], expected, rtol=1e-12)
    for key, parameter in spreads.items():
        assert parameter.read(mj_model) == pytest.approx(0.2 if key.endswith("x") else read[key])
    # the mass and the spreads commute: a new mass scales the moments and keeps the spreads
    mass, then_spread, then_mass = ModelParameter.parse("body:slab:mass", SLAB), copy.deepcopy(SLAB), mj_model
    mass.write_mj(then_spread, 3.0)
    spread_x.write_mj(then_spread, 0.2)
    mass.write_mj(then_mass, 3.0)
    np.testing.assert_allclose(then_mass.body_inertia[1], expected * 1.5, rtol=1e-12)
    np.testing.assert_allclose(then_spread.body_inertia[1], then_mass.body_inertia[1], rtol=1e-12)
    # any positive spreads are a rigid body that exists: the moments obey the triangle inequality
    model = copy.deepcopy(SLAB)
    for values in np.random.default_rng(0).uniform(1e-3, 1.0, (20, 3)):
        for parameter, value in zip(spreads.values(), values, strict=True):
            parameter.write_mj(model, value)
        moments = np.sort(model.body_inertia[1])
        assert moments[0] + moments[1] >= moments[2] * (1 - 1e-12) and moments[0] > 0
    with pytest.raises(ValueError, match=re.escape("[0.0, 0.1] must be > 0 (the mass's extent along an axis")):
        spread_x.check_range(0.0, 0.1, SLAB)
    massless = "'body:frame:spread_z' = 0.1: the body has no mass in the model to spread"
    with pytest.raises(ValueError, match=re.escape(massless)):
        ModelParameter.parse("body:frame:spread_z", SLAB).check_value(0.1, SLAB)


# a 1 kg box that touches the floor only through an explicit contact pair (sliding friction 0.5)
SLIDING_BOX = mujoco.MjModel.from_xml_string("""
<mujoco><option timestep="0.01"/><worldbody>
  <geom name="floor" type="plane" size="1 1 0.1"/>
  <body name="box" pos="0 0 0.05"><freejoint/>
    <geom name="box" type="box" size="0.05 0.05 0.05" mass="1" contype="0" conaffinity="0"/></body>
</worldbody><contact><pair name="sliding" geom1="floor" geom2="box" friction="0.5 0.5 0.005 0.0001 0.0001"/></contact>
</mujoco>
""")


def test_a_contact_pairs_friction_is_written_and_differentiated():
    friction = ModelParameter.parse("pair:sliding:friction", SLIDING_BOX)
    rolling = ModelParameter.parse("pair:sliding:rolling_friction", SLIDING_BOX)
    model = mjx.put_model(SLIDING_BOX, impl="jax")
    written = rolling.write(friction.write(model, jnp.float32(0.3)), jnp.float32(0.002))
    mj_model = copy.deepcopy(SLIDING_BOX)
    friction.write_mj(mj_model, 0.3)
    rolling.write_mj(mj_model, 0.002)
    # both tangent directions, and both rolling directions, take the one value; torsion keeps the model's
    np.testing.assert_allclose(np.asarray(written.pair_friction), [[0.3, 0.3, 0.005, 0.002, 0.002]], rtol=1e-6)
    np.testing.assert_allclose(mj_model.pair_friction, [[0.3, 0.3, 0.005, 0.002, 0.002]], rtol=1e-12)
    assert friction.read(written) == pytest.approx(0.3) and rolling.read(mj_model) == pytest.approx(0.002)
    data = mjx.make_data(model)
    data = data.replace(qvel=data.qvel.at[0].set(1.0))  # sliding along x at 1 m/s

    def velocity_after_10_steps(value):
        def step(data, _):
            return mjx.step(friction.write(model, value), data), None

        return jax.lax.scan(step, data, None, 10)[0].qvel[0]

    # frictionless, it keeps its speed; the pair's friction slows it, and more friction slows it more (the
    # forward-mode derivative a fit takes, against a central difference); one compile for the four values
    velocity = jax.jit(velocity_after_10_steps)
    assert float(velocity(jnp.float32(0.0))) == pytest.approx(1.0, abs=1e-6)
    assert float(velocity(jnp.float32(0.5))) < 0.9
    derivative = jax.jit(lambda mu: jax.jvp(velocity_after_10_steps, (mu,), (jnp.float32(1.0),))[1])
    central = float(velocity(jnp.float32(0.51)) - velocity(jnp.float32(0.49))) / 0.02
    assert float(derivative(jnp.float32(0.5))) < 0.0
    assert float(derivative(jnp.float32(0.5))) == pytest.approx(central, rel=1e-3)
    with pytest.raises(ValueError, match="no pair named 'slide' in the model; pairs: sliding"):
        ModelParameter.parse("pair:slide:friction", SLIDING_BOX)


# a pole pushed against its joint's limit (-0.5 rad) by a constant torque, without gravity
LIMITED_HINGE = mujoco.MjModel.from_xml_string("""
<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.002" gravity="0 0 0"/>
  <worldbody>
    <body name="pole">
      <joint name="hinge" axis="0 1 0" range="-0.5 0.5" damping="0.5"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5" contype="0" conaffinity="0"/>
    </body>
    <body name="free"><freejoint name="root"/><geom size="0.01" mass="0.1" contype="0" conaffinity="0"/></body>
  </worldbody>
  <actuator><motor joint="hinge" gear="1"/></actuator>
</mujoco>
""")


def test_a_joint_limits_time_constant_softens_the_limit_in_mjx_and_mujoco_alike():
    timeconst = ModelParameter.parse("joint:hinge:limit_timeconst", LIMITED_HINGE)
    assert timeconst.read(LIMITED_HINGE) == pytest.approx(0.02)  # MuJoCo's default solref
    nominal = mjx.put_model(LIMITED_HINGE, impl="jax")

    def angle_after_half_a_second(value):
        model = timeconst.write(nominal, value)
        data = mjx.make_data(model).replace(ctrl=jnp.array([-2.0]))
        return jax.lax.fori_loop(0, 250, lambda _, d: mjx.step(model, d), data).qpos[0]

    angle = jax.jit(angle_after_half_a_second)
    for value in (0.02, 0.1):
        model = copy.deepcopy(LIMITED_HINGE)
        timeconst.write_mj(model, value)
        assert model.jnt_solref[0].tolist() == [value, 1.0]  # the damping ratio stays
        data = mujoco.MjData(model)
        data.ctrl[:] = -2.0
        mujoco.mj_step(model, data, nstep=250)
        assert float(angle(jnp.float32(value))) == pytest.approx(data.qpos[0], abs=1e-4)
    # held past the limit by the torque: a few milliradians at 0.02 s, a tenth of a radian at 0.1 s
    assert -0.51 < float(angle(jnp.float32(0.02))) < -0.5
    assert float(angle(jnp.float32(0.1))) < -0.59
    derivative = jax.jit(lambda v: jax.jvp(angle_after_half_a_second, (v,), (jnp.float32(1.0),))[1])
    central = float(angle(jnp.float32(0.051)) - angle(jnp.float32(0.049))) / 0.002
    assert float(derivative(jnp.float32(0.05))) == pytest.approx(central, rel=1e-2)
    assert central < 0.0


def test_a_joint_limits_time_constant_is_refused_without_a_limit_and_below_twice_the_time_step():
    with pytest.raises(ValueError, match=r"^parameter 'joint:root:limit_timeconst': joint 'root' has no limit"):
        ModelParameter.parse("joint:root:limit_timeconst", LIMITED_HINGE)
    timeconst = ModelParameter.parse("joint:hinge:limit_timeconst", LIMITED_HINGE)
    with pytest.raises(ValueError, match=r"\[0.001, 0.1\] must be >= 0.004 s, twice the time step"):
        timeconst.check_range(0.001, 0.1, LIMITED_HINGE)
    timeconst.check_range(0.004, 0.1, LIMITED_HINGE)
    unsafe = copy.deepcopy(LIMITED_HINGE)  # MuJoCo's safety clamp off: any positive time constant is simulated
    unsafe.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_REFSAFE
    timeconst.check_range(0.001, 0.1, unsafe)
    with pytest.raises(ValueError, match=r"= -0.02 must be > 0 \(a time constant"):
        timeconst.check_value(-0.02, unsafe)


def test_physically_valid_ranges_of_servo_spring_and_friction_parameters_are_accepted():
    ranges = {
        "actuator:servo:kp": (1.0, 20.0),
        "actuator:servo:kv": (0.0, 2.0),
        "actuator:torque:gain": (0.5, 2.0),
        "joint:hinge:stiffness": (0.0, 5.0),
        "joint:slider:springref": (-0.5, 0.5),  # a position: either sign
        "body:tip:ipos_y": (-0.05, 0.05),  # and a centre of mass
        "geom:rod:rolling_friction": (0.0, 0.01),
    }
    for key, bounds in ranges.items():
        ModelParameter.parse(key, ARM).check_range(*bounds, ARM)


def test_a_centre_of_mass_and_a_spread_are_identified_together_through_mjx_and_the_c_simulator():
    # the bob 5 cm nearer the hinge than the model has it (0.45 m against 0.5): less gravity torque, less
    # inertia; and its mass spread 10 cm along x (a 35 cm plate, not the model's 5 cm sphere, whose spread is
    # sqrt(2/5 r^2 / 2) = 2.236 cm): 4% more inertia about the hinge and no gravity torque, so the two separate
    keys, truth, initial = ["body:pole:ipos_z", "body:pole:spread_x"], np.array([0.45, 0.1]), np.array([0.5, 0.02236])
    true_model = model_with(damping=0.137)
    for key, value in zip(keys, truth, strict=True):
        ModelParameter.parse(key, true_model).write_mj(true_model, value)
    nominal = [ModelParameter.parse(key, PENDULUM.mj_model).read(PENDULUM.mj_model) for key in keys]
    np.testing.assert_allclose(nominal, initial, rtol=1e-3)
    rng = np.random.default_rng(7)
    ctrl = random_excitation(10.0, 0.05, 1, rng)
    data = record(true_model, ctrl, np.array([np.pi]), np.array([0.0]), 0.05, 1e-3, 1e-2, rng)
    problem = Problem(model_with(damping=0.137), keys, data)
    weights, x0 = 1.0 / np.array([1e-3, 1e-2]), problem.segments.measured[:, 0]
    exact = problem.jacobian(initial, x0, weights, "autodiff")
    finite = problem.jacobian(initial, x0, weights, "finite_difference")
    for a, b in zip(exact, finite, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(a).max())
    result = fit(problem, method="finite_difference")
    entries = analyze(tuple(keys), result.values, result.information, result.converged)["parameters"]
    assert result.converged
    for key, value in zip(keys, truth, strict=True):
        assert entries[key]["ci95"][0] <= value <= entries[key]["ci95"][1] and entries[key]["relative_std"] < 0.01


@pytest.mark.parametrize("dt", [0.01, 0.05])
def test_fit_converges_within_30_steps_and_its_interval_covers_the_truth(dt):
    # 10 s of smooth random torques, damping 0.137, noise 1e-3 rad and 1e-2 rad/s; the fit starts
    # from the model's 0.05 (63% off) with the default segments (about 1 s) and estimated noise
    problem = Problem(PENDULUM.mj_model, [DAMPING], random_recording(dt, seed=1))
    assert problem.segment_seconds == pytest.approx(0.99 if dt == 0.01 else 0.95)
    result = fit(problem, steps=30)
    assert result.converged and result.steps <= 30
    report = analyze((DAMPING,), result.values, result.information, result.converged)
    entry = report["parameters"][DAMPING]
    assert entry["estimate"] == pytest.approx(0.137, rel=0.01)
    assert entry["ci95"][0] <= 0.137 <= entry["ci95"][1]
    assert entry["relative_std"] < 0.01 and report["flags"] == []
    # the estimated noise is the simulated one (within the spread of ~1000 or ~200 samples)
    np.testing.assert_allclose(result.noise, [1e-3, 1e-2], rtol=0.15)


def test_without_velocities_the_positions_alone_identify_the_damping():
    # the recording of the test above, its velocities left out (an encoder alone): weight 0 on them, the start
    # velocities estimated from the positions, and the noise of the positions alone estimated
    data = random_recording(0.05, seed=1)
    blind = Trajectory(time=data.time, qpos=data.qpos, qvel=np.full_like(data.qvel, np.nan), ctrl=data.ctrl)
    problem = Problem(PENDULUM.mj_model, [DAMPING], blind)
    assert problem.velocity_measured.tolist() == [[False]] and np.isinf(problem.noise[0, 1])
    assert problem.describe().endswith("; velocities not measured (hinge): the positions alone are fitted there")
    result = fit(problem, steps=30)
    assert result.converged and result.noise_rounds >= 1
    entry = analyze((DAMPING,), result.values, result.information, result.converged)["parameters"][DAMPING]
    assert entry["estimate"] == pytest.approx(0.137, rel=0.01) and entry["ci95"][0] <= 0.137 <= entry["ci95"][1]
    assert result.noise[0] == pytest.approx(1e-3, rel=0.15) and np.isinf(result.noise[1])
    assert 0.0 < result.misfit < 3.0
    # the fitted start velocities follow the recorded ones (noise 1e-2) more closely than the differences did
    recorded, differenced = data.qvel[problem.segments.start_rows, 0], problem.segments.measured[:, 0, 1]
    fitted_error = np.abs(result.start_states[:, 1] - recorded).max()
    assert fitted_error < 0.05 and fitted_error < np.abs(differenced - recorded).max()
    # a stated position noise needs no velocity noise here, and does where velocities were measured
    stated = fit(Problem(PENDULUM.mj_model, [DAMPING], blind, noise=(1e-3, None)), steps=30)
    assert stated.converged and stated.noise_given and stated.noise.tolist() == [1e-3, np.inf]
    assert stated.values[0] == pytest.approx(result.values[0], rel=1e-3)
    with pytest.raises(ValueError, match=r"^a velocity noise is needed: the recordings measure velocities"):
        Problem(PENDULUM.mj_model, [DAMPING], data, noise=(1e-3, None))


def test_between_two_bounds_the_fit_steps_in_the_value_and_leaves_a_bound():
    """A logistic map of [lower, upper] flattens at its ends and holds a parameter that reached one; the
    box the solver enforces does not: a fit that starts at the upper bound comes back to the truth."""
    bounds = Bounds(0.0, 0.4)
    assert bounds.to_theta(0.1) == pytest.approx(0.25) and bounds.theta_limits() == (0.0, 1.0)
    assert bounds.to_value(np.array(0.25)) == pytest.approx(0.1) and bounds.derivative(np.array(0.9)) == 0.4
    with pytest.raises(ValueError, match=r"initial value 0.5 is outside the bounds \[0.0, 0.4\]"):
        bounds.to_theta(0.5)
    assert Bounds().to_value(np.log(0.1)) == pytest.approx(0.1)  # above a lower bound alone: a log
    problem = Problem(model_with(damping=0.4), [DAMPING], random_recording(0.05, seed=1), bounds={DAMPING: bounds})
    result = fit(problem, method="finite_difference")
    assert result.converged and result.values[0] == pytest.approx(0.137, rel=0.01)


def test_above_a_lower_bound_alone_the_log_stops_at_a_floor_where_the_derivative_is_not_0():
    """The log flattens toward the lower bound: a parameter the data pull past it sank to exactly 0, with
    a derivative of 0 and an information of NaN, yet converged (as two of the arm's frictions did in the
    coverage benchmark). Here the data come from a damping of -0.02. The solver stops the damping at
    LOG_FLOOR of its initial value, where the derivative is not 0: converged, with a finite information."""
    bounds = Bounds().with_floor(0.05)
    assert bounds.floor == pytest.approx(0.05 * LOG_FLOOR)
    assert bounds.theta_limits() == (pytest.approx(np.log(0.05 * LOG_FLOOR)), np.inf)
    assert Bounds(0.0, 0.4).with_floor(0.1) == Bounds(0.0, 0.4)  # between two bounds: the box
    pulled_below = Problem(model_with(damping=0.05), [DAMPING], random_recording(0.05, seed=1, damping=-0.02))
    result = fit(pulled_below, method="finite_difference")
    assert result.converged and result.values[0] == pytest.approx(0.05 * LOG_FLOOR)
    assert np.isfinite(result.information).all() and result.information[0, 0] > 0
    assert result.floor_restart == (DAMPING,)  # a second fit from 0.05 found no minimum off the floor either
    # the report judges it in its initial value, 0.05: relative to about 0 its error would have no scale
    units = pulled_below.report_units(result.values)
    entry = analyze((DAMPING,), result.values, result.information, units=units)["parameters"][DAMPING]
    std_error = 1 / np.sqrt(result.information[0, 0])
    assert units == {DAMPING: pytest.approx(0.05)} and entry["std_error"] == pytest.approx(std_error)
    assert entry["ci95"] == [0.0, pytest.approx(result.values[0] + 1.959964 * std_error)]
    assert Problem(model_with(), [DAMPING], random_recording(0.05, seed=1)).report_units(np.array([0.137])) == {}


def test_mjx_jacobian_matches_finite_differences_in_mujoco():
    problem = Problem(PENDULUM.mj_model, [DAMPING], random_recording(0.05, seed=1))
    x0 = problem.segments.measured[:, 0]
    weights = 1.0 / np.array([1e-3, 1e-2])
    autodiff = problem.jacobian(np.array([0.1]), x0, weights, "autodiff")
    finite = problem.jacobian(np.array([0.1]), x0, weights, "finite_difference")
    # both simulate in float64: residuals agree to rounding, derivatives to the differencing error
    np.testing.assert_allclose(autodiff[0], finite[0], atol=1e-6)
    for exact, approximate in zip(autodiff[1:], finite[1:], strict=True):
        np.testing.assert_allclose(exact, approximate, rtol=1e-4, atol=1e-4 * np.abs(exact).max())


def test_a_fit_stopped_at_its_step_limit_is_not_converged():
    problem = Problem(PENDULUM.mj_model, [DAMPING], random_recording(0.05, seed=1))
    result = fit(problem, steps=2, method="finite_difference", spread_fits=0)
    assert not result.converged and result.steps == 2 and result.step_length > 0.1
    assert result.noise_rounds == 0  # the first round did not converge: the noise is still the data's
    np.testing.assert_array_equal(result.noise, problem.data_noise[0])
    report = analyze((DAMPING,), result.values, result.information, result.converged)
    report |= {"converged": False, "stalled": False, "steps": 2, "step_length": result.step_length}
    report["noise"] = {"source": "estimated from the residuals", "qpos": [1e-3], "qvel": [1e-2]}
    lines = summary_lines(report)
    assert lines[0].startswith("NOT CONVERGED after 2 steps: stopped at the step limit, the Gauss-Newton step")
    assert lines[1].endswith("(unreliable: not converged)") and report["parameters"][DAMPING]["reliable"] is False
    assert not any(line.startswith("MISFIT") for line in lines)
    lines = summary_lines(report | {"misfit": 160.4})
    assert lines[1].startswith("MISFIT: the residuals are 160 times the noise the data show: the model does not")


def test_joined_segments_fit_one_start_state_per_recording_from_the_first_fit_and_narrow_the_interval():
    # 10 s every 0.05 s (201 samples): the default cut is 10 segments of 0.95 s; joined, one of 10 s
    problem = Problem(PENDULUM.mj_model, [DAMPING], random_recording(0.05, seed=1))
    first = fit(problem, method="finite_difference")
    joined_problem, result = fit_module.join_segments(problem, first, method="finite_difference")
    assert first.converged and first.joined == "" and result.joined == "kept" and result.converged
    assert len(problem.segments.start_rows) == 10 and len(first.start_states) == 10  # the problem is not changed
    assert joined_problem.segments.start_rows.tolist() == [0] and joined_problem.segment_length == 201
    assert result.start_states.shape == (1, 2) and result.residuals.shape == (1, 201 * 2)
    # weighted by the first fit's noise, still reported as estimated; every fit's steps and Jacobians counted
    np.testing.assert_array_equal(result.noise, first.noise)
    assert not result.noise_given and result.noise_rounds == first.noise_rounds
    assert result.steps > first.steps and result.jacobians > first.jacobians
    # one start state instead of ten: more information, an estimate within its standard error of the first's,
    # and an interval that still covers the truth
    se_first, se = (float(np.sqrt(1 / r.information[0, 0])) for r in (first, result))
    assert se < se_first and abs(result.values[0] - first.values[0]) < se_first
    entry = analyze((DAMPING,), result.values, result.information, result.converged)["parameters"][DAMPING]
    assert entry["ci95"][0] <= 0.137 <= entry["ci95"][1]


def test_joined_segments_keep_the_multiple_shooting_fit_where_single_shooting_is_not_sound_or_not_possible():
    data = random_recording(0.05, seed=1)
    problem = Problem(PENDULUM.mj_model, [DAMPING], data)
    first = fit(problem, method="finite_difference")
    kept_problem, kept = fit_module.join_segments(problem, first, steps=0, method="finite_difference")
    assert kept_problem is problem and kept.joined == "not kept: the single-shooting fit did not converge"
    np.testing.assert_array_equal(kept.values, first.values)
    assert kept.steps == first.steps and kept.jacobians == first.jacobians + 1  # the joined fit's first Jacobian
    unsound = fit(problem, steps=1, method="finite_difference", spread_fits=0)
    _, kept = fit_module.join_segments(problem, unsound, method="finite_difference")
    assert kept.joined == "not tried: the multiple-shooting fit is not sound" and kept.jacobians == unsound.jacobians
    # two recordings of one length: one segment each; of two lengths: not joined, and said why
    two = Problem(PENDULUM.mj_model, [DAMPING], [data, random_recording(0.05, seed=2)])
    joined = two.joined(np.ones((2, 2)))
    assert joined.segments.start_rows.tolist() == [0, 201] and joined.segment_recording.tolist() == [0, 1]
    assert joined.noise_given and len(two.segments.start_rows) == 20 and not two.noise_given
    mixed = Problem(PENDULUM.mj_model, [DAMPING], [data, random_recording(0.05, seed=2, seconds=5.0)])
    with pytest.raises(ValueError, match=r"^the stretches of data are 101 to 201 samples long; one segment per"):
        mixed.joined(np.ones((2, 2)))


def test_problem_rejects_data_that_cannot_hold_one_segment_and_reports_gaps():
    data = random_recording(0.05, seed=2, seconds=2.0)
    with pytest.raises(
        ValueError, match=r"^the recording has 41 samples, fewer than one segment of 61 samples \(3 s\)"
    ):
        Problem(PENDULUM.mj_model, [DAMPING], data, segment_seconds=3.0)
    with pytest.raises(ValueError, match=r"sample spacing 0.005 s is not a multiple of the model time step 0.01 s"):
        Problem(PENDULUM.mj_model, [DAMPING], Trajectory(data.time / 10, data.qpos, data.qvel, data.ctrl))
    time = data.time.copy()
    time[20:] += 1.0
    gapped = Problem(PENDULUM.mj_model, [DAMPING], Trajectory(time, data.qpos, data.qvel, data.ctrl), 0.45)
    # two stretches of 20 and 21 samples, two segments of 10 samples in each, 1 sample left out
    assert gapped.segments.start_rows.tolist() == [0, 10, 20, 30]
    assert gapped.describe() == (
        "4 segments of 0.45 s (10 samples every 0.05 s) from 2 contiguous stretches (gaps in time split the "
        "recording); 1 samples at stretch ends left out"
    )


def test_intervals_cover_the_truth_on_simulated_datasets():
    # 12 datasets (finite differences in MuJoCo: no compilation), rates 0.01 and 0.05 s in turn;
    # honest 95% intervals miss the truth in 0.6 of 12 on average, and 3 or more misses happen
    # with probability 2%; the old fit from exactly measured start states missed most of them.
    true_model, guess_model = coverage.models(PENDULUM.mj_model, {DAMPING: 0.137}, {})
    datasets = [
        coverage.simulate_and_fit(
            true_model,
            guess_model,
            (DAMPING,),
            lambda rng: (np.pi + rng.uniform(-0.2, 0.2, 1), rng.uniform(-0.2, 0.2, 1)),
            np.random.default_rng([7, k]),
            (0.01, 0.05)[k % 2],
            10.0,
            1.0,
            (3e-4, 3e-3),
            (3e-3, 3e-2),
            method="finite_difference",
        )
        for k in range(12)
    ]
    summary = coverage.summarize(datasets, (DAMPING,))["all"]
    assert summary["converged"] == 12
    assert summary[DAMPING]["coverage"] >= 10 / 12
    assert summary[DAMPING]["median_relative_error"] < 0.01
    assert all(d.truth == [pytest.approx(0.137)] and d.delay_error_ms is None for d in datasets)


def delayed_coverage(k, dt, delay, steps=50, spread=0.0):
    """One coverage dataset of 5 s of the pendulum (damping 0.137) with a delay drawn from `delay`, fitted
    with it (finite differences: no compilation)."""
    true_model, guess_model = coverage.models(PENDULUM.mj_model, {DAMPING: 0.137}, {})
    start = lambda rng: (np.pi + rng.uniform(-0.2, 0.2, 1), rng.uniform(-0.2, 0.2, 1))  # noqa: E731
    rng = np.random.default_rng([11, k])
    return coverage.simulate_and_fit(
        true_model, guess_model, (DAMPING, DELAY), start, rng, dt, 5.0, 2.0, (3e-4, 3e-3), (3e-3, 3e-2),
        method="finite_difference", steps=steps, delay=delay, spread=spread,
    )  # fmt: skip


def test_coverage_draws_each_datasets_delay_and_damping_and_fits_the_delay_within_one_step():
    datasets = [delayed_coverage(k, dt, (0.01, 0.03), spread=0.2) for k, dt in enumerate((0.01, 0.05))]
    for d in datasets:
        damping, delay = d.truth
        assert 0.01 <= delay <= 0.03 and 0.137 * np.exp(-0.2) <= damping <= 0.137 * np.exp(0.2)
        assert d.converged and d.covered == [True, True] and d.fit_seconds > 0
        assert d.delay_error_ms == pytest.approx(1000 * abs(d.estimates[1] - delay)) and d.delay_error_ms < 1000 * d.dt
        assert d.delay_within_step is True and d.estimates[0] == pytest.approx(damping, rel=0.02)
        assert d.misfit < 1.5 and d.spread_fits == 0  # sound from the model's values: no spread starts
    assert datasets[0].truth != datasets[1].truth  # each dataset is its own system
    # a fixed delay is that delay; the step limit reaches the fit and each of its spread fits
    fixed = delayed_coverage(2, 0.05, (0.02, 0.02), steps=2)
    assert fixed.truth == [pytest.approx(0.137), 0.02] and not fixed.converged
    assert fixed.steps == 2 * (1 + fit_module.SPREAD_FITS) and fixed.spread_fits == fit_module.SPREAD_FITS
    summary = coverage.summarize([*datasets, fixed], (DAMPING, DELAY))
    assert summary["all"][DELAY]["within_one_step"] == pytest.approx(2 / 3)  # the unconverged fit does not count


def test_summary_judges_each_dataset_against_its_own_truth():
    def dataset(dt, truth, estimates, converged, fit_seconds):
        error = abs(estimates[1] - truth[1])
        return coverage.Dataset(
            dt, 1e-3, 1e-2, truth, estimates, [0.01, 0.001], [converged, converged], converged, 5, fit_seconds,
            1000 * error, error <= dt,
        )  # fmt: skip

    datasets = [
        dataset(0.01, [0.1, 0.02], [0.11, 0.025], True, 2.0),  # 10% off; 5 ms off, within 10 ms
        dataset(0.05, [0.2, 0.01], [0.19, 0.07], True, 4.0),  # 5% off; 60 ms off, more than 50 ms
        dataset(0.05, [0.4, 0.03], [0.5, 0.04], False, 9.0),  # 25% off; 10 ms off but not converged
    ]
    summary = coverage.summarize(datasets, (DAMPING, DELAY))
    every, slow = summary["all"], summary["dt=0.05"]
    assert every[DAMPING]["median_relative_error"] == pytest.approx(0.1)
    assert slow[DAMPING]["median_relative_error"] == pytest.approx((0.05 + 0.25) / 2)
    assert every[DELAY]["median_error_ms"] == pytest.approx(10) and slow[DELAY]["median_error_ms"] == pytest.approx(35)
    assert every[DELAY]["within_one_step"] == pytest.approx(1 / 3) and slow[DELAY]["within_one_step"] == 0.0
    assert every[DELAY]["coverage"] == pytest.approx(2 / 3) and "median_relative_error" not in every[DELAY]
    assert every["median_fit_seconds"] == 4.0 and summary["dt=0.01"]["median_fit_seconds"] == 2.0
    assert every["converged"] == 2 and slow["datasets"] == 2
    assert (every["intervals_covered"], every["intervals"]) == (4, 6)
    # a record whose unbounded interval was counted as covering (before that rule) no longer counts
    unbounded = coverage.Dataset(**{**asdict(datasets[0]), "std_errors": [np.inf, 0.001]})
    assert coverage.summarize([unbounded], (DAMPING, DELAY))["all"]["intervals_covered"] == 1


def test_an_interval_covers_when_the_fit_is_sound_and_the_interval_bounded_around_the_truth():
    lower, upper, truth = np.array([0.9, 0.0, 1.5, 0.0]), np.array([1.1, np.inf, 2.5, 3.0]), np.ones(4)
    assert coverage.interval_covers(True, lower, upper, truth).tolist() == [True, False, False, True]
    assert not coverage.interval_covers(False, lower, upper, truth).any()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["delay=[0.03,0.01]"], "error: delay must be [low,high] seconds with low <= high, e.g. [0.01,0.03], or []; "
         "got [0.03, 0.01]"),
        (["delay=[-0.01,0.02]"], f"error: true delay {DELAY}=-0.01 s must be >= 0 (a command cannot act before it "
         "is sent)"),
        (["delay=[0.01,20]"], f"error: true delay {DELAY}=20 s is longer than each recording (10 s); give it in "
         "seconds, e.g. 0.02 for 20 ms"),
        (["delay=[0.01,2]"], f"error: true delay {DELAY}=2 s is above the fit's upper bound, a tenth of the "
         "recording (1 s); lower it or record longer (seconds=)"),
        (["delay=[0.01,0.03]", f"init=[{DELAY}=3]"], f"error: initial delay {DELAY}=3 s is above the fit's upper "
         "bound, a tenth of the recording (1 s); lower it or record longer (seconds=)"),
        ([f"init=[{DELAY}=0.01]"], f"error: init gives {DELAY} but delay=[] fits no delay; give the true delays, "
         "delay=[low,high]"),
        (["spread=-0.1"], "error: spread must be >= 0 (true values times exp(U(-spread, spread))), got -0.1"),
        (["steps=0"], "error: steps must be >= 1, got 0"),
    ],
)  # fmt: skip
def test_coverage_cli_rejects_bad_delays_and_spreads_in_one_line(args, message):
    from launch import sysid_coverage

    with pytest.raises(SystemExit) as exit_:
        sysid_coverage.parse(args)  # before the runtime is set: nothing imports mujoco or compiles
    assert exit_.value.code == message


def run_coverage(*args):
    command = ["launch/sysid_coverage.py", "seconds=2", "rates=[0.05]", "method=finite_difference"]
    return run_python(*command, *args, timeout=300)


def test_a_coverage_run_extended_keeps_its_datasets_and_continues_at_the_next(tmp_path):
    first, extended, whole = (tmp_path / f"{name}.json" for name in ("first", "extended", "whole"))
    for args in (["datasets=1", f"out={first}"], ["datasets=2", f"out={extended}", f"extend={first}"],
                 ["datasets=2", f"out={whole}"]):  # fmt: skip
        assert run_coverage(*args).returncode == 0
    first, extended, whole = (json.loads(f.read_text()) for f in (first, extended, whole))
    assert extended["datasets"][0] == first["datasets"][0]  # kept as written, its fit time included
    for key in ("truth", "estimates", "std_errors", "covered", "steps"):  # dataset 1 as a run from scratch has it
        assert extended["datasets"][1][key] == whole["datasets"][1][key]
    assert extended["summary"]["all"]["datasets"] == 2 and extended["commands"][0] == first["command"]
    assert extended["command"] == extended["commands"][1] and "extend=" in extended["command"]
    # as many datasets as it has: nothing is fitted, the datasets are summarized again and kept as written
    again = tmp_path / "again.json"
    assert run_coverage("datasets=2", f"out={again}", f"extend={tmp_path / 'extended.json'}").returncode == 0
    again = json.loads(again.read_text())
    assert again["datasets"] == extended["datasets"] and again["summary"] == extended["summary"]
    assert len(again["commands"]) == 3 and again["summary"]["all"]["intervals"] == 2


def test_a_coverage_run_extends_only_a_run_of_the_same_arguments(tmp_path):
    from launch import sysid_coverage

    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"command": "...", "args": {**asdict(sysid_coverage.CoverageArgs()), "seed": 1},
                                   "datasets": [{}, {}]}))  # fmt: skip
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    cases = [
        ([f"extend={earlier}", "seed=0"], f"error: extend={earlier} was made with seed=1, not 0"),
        ([f"extend={earlier}", "seed=1", "datasets=1"],
         f"error: extend={earlier} already has 2 datasets; ask for 2 (summarize) or more"),
    ]  # fmt: skip
    for args, message in cases:
        with pytest.raises(SystemExit) as exit_:
            sysid_coverage.parse(args)
        assert exit_.value.code == message
    with pytest.raises(SystemExit, match=rf"^error: extend={broken} is not the JSON of an earlier coverage run \("):
        sysid_coverage.parse([f"extend={broken}"])
    assert sysid_coverage.parse([f"extend={earlier}", "seed=1", "datasets=3"]).extend == str(earlier)


def test_coverage_takes_the_true_delay_as_a_range_and_the_initial_one_beside_the_model_values():
    from launch import sysid_coverage

    assert sysid_coverage.parse(["delay=[0.01,0.03]", f"init=[{DELAY}=0.02]", "spread=0.2"]).delay == [0.01, 0.03]
    with pytest.raises(ValueError, match=r"^the coverage benchmark draws each dataset's true delay from a range; "):
        coverage.models(PENDULUM.mj_model, {DAMPING: 0.1, DELAY: 0.02}, {})
    true_model, guess_model = coverage.models(PENDULUM.mj_model, {DAMPING: 0.1}, {DAMPING: 0.2, DELAY: 0.02})
    damping = ModelParameter.parse(DAMPING, PENDULUM.mj_model)
    assert damping.read(true_model) == pytest.approx(0.1) and damping.read(guess_model) == pytest.approx(0.2)


def friction_problem(amplitudes, frequencies):
    # true damping 0.1 and Coulomb friction 0.2; the fit starts at half of each.
    data = recording(model_with(damping=0.1, frictionloss=0.2), 20.0, amplitudes, frequencies, 0.002, 0.02)
    return Problem(model_with(damping=0.05, frictionloss=0.1), [DAMPING, FRICTION], data)


def fit_and_analyze(problem):
    result = fit(problem, method="finite_difference")
    return result, analyze((DAMPING, FRICTION), result.values, result.information, result.converged)


def test_low_speed_data_is_flagged_as_unable_to_separate_damping_and_friction():
    problem = friction_problem([0.5, 0.3], [0.3, 0.5])
    assert np.abs(problem.trajectory.qvel).max() < 0.5  # slow: a fraction of a rad/s
    result, report = fit_and_analyze(problem)
    assert len(report["flags"]) == 1
    flag = report["flags"][0]
    assert DAMPING in flag and FRICTION in flag and "cannot separate" in flag
    # with what the joint did, the advice asks for the missing fast motion
    motion = recorded_motion(PENDULUM.mj_model, (DAMPING, FRICTION), problem.trajectory, "pendulum_swingup")
    advice = analyze((DAMPING, FRICTION), result.values, result.information, motion=motion)["advice"][0]
    low, high = advice["speeds"]["recorded"]
    assert advice["rule"] == "damping+frictionloss" and advice["joint"] == "hinge" and high < 0.5
    assert f"record joint hinge at speeds well above the current {low:.2g}-{high:.2g} rad/s" in advice["text"]
    assert advice["speeds"]["advised"][0] > 2 * high


def test_rich_motion_identifies_damping_and_friction_within_their_intervals():
    problem = friction_problem([1.0, 0.6, 0.4], [1.5, 3.7, 6.1])
    result, report = fit_and_analyze(problem)
    assert result.converged and report["flags"] == []
    for key, truth in ((DAMPING, 0.1), (FRICTION, 0.2)):
        entry = report["parameters"][key]
        assert entry["estimate"] == pytest.approx(truth, rel=0.05)
        assert entry["ci95"][0] <= truth <= entry["ci95"][1]


def run_sysid(data, out, *args):
    command = ["launch/sysid.py", f"data={data}", "env=pendulum_swingup", f"params=[{DAMPING}]"]
    command += ["method=finite_difference", "compare_cost=false", f"out={out}", *args]
    return run_python(*command, timeout=300)


def test_sysid_cli_writes_report_and_figure(tmp_path):
    random_recording(0.05, seed=3).save(tmp_path / "pend.npz")
    result = run_sysid(tmp_path / "pend.npz", tmp_path / "out")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = result.stdout[result.stdout.index("converged after") :].splitlines()
    assert summary[1].startswith(f"{DAMPING}: 0.13") and "every direction is resolved" in result.stdout
    assert summary[2].startswith("noise model: independent Gaussian measurement noise per coordinate")
    report = json.loads((tmp_path / "out" / "sysid.json").read_text())
    assert report["converged"] is True and report["parameters"][DAMPING]["reliable"] is True
    assert report["parameters"][DAMPING]["estimate"] == pytest.approx(0.137, rel=0.01)
    assert report["noise"]["qvel"][0] == pytest.approx(1e-2, rel=0.2)
    assert report["seconds_per_jacobian"]["finite_difference"] > 0
    assert 1 <= report["jacobians"] <= report["steps"] + 2  # the start's, one per accepted step, the final noise's
    assert 0 < report["fit_seconds"] <= report["process_seconds"]
    timing = f"fit {report['fit_seconds']:.1f} s of {report['process_seconds']:.1f} s in this process"
    assert f"{timing} (the rest: start-up, reading the data, the report, the figure, writing)\n" in result.stdout
    assert (tmp_path / "out" / "landscape.png").stat().st_size > 1000


def test_sysid_cli_joins_the_segments_when_asked(tmp_path):
    random_recording(0.05, seed=3).save(tmp_path / "pend.npz")
    result = run_sysid(tmp_path / "pend.npz", tmp_path / "out", "join_segments=true")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "single shooting from these estimates (the segments joined): kept\n" in result.stdout
    report = json.loads((tmp_path / "out" / "sysid.json").read_text())
    assert report["joined"] == "kept" and report["segments"] == {"count": 1, "seconds": pytest.approx(10.0)}
    assert report["converged"] is True and report["noise"]["source"] == "estimated from the residuals"
    assert report["parameters"][DAMPING]["estimate"] == pytest.approx(0.137, rel=0.01)
    assert (tmp_path / "out" / "landscape.png").stat().st_size > 1000


def test_sysid_cli_fails_on_an_unconverged_fit_unless_allowed(tmp_path):
    random_recording(0.05, seed=3).save(tmp_path / "pend.npz")
    result = run_sysid(tmp_path / "pend.npz", tmp_path / "out", "steps=2", "spread_fits=0")
    assert result.returncode == 3
    lines = result.stdout.splitlines()
    first = max(i for i, line in enumerate(lines) if line.startswith("  step ")) + 1  # after the progress
    assert lines[first].startswith("NOT CONVERGED after 2 steps: stopped at the step limit")
    assert "allow_unconverged=true" in result.stderr.splitlines()[-1]
    report = json.loads((tmp_path / "out" / "sysid.json").read_text())
    assert report["converged"] is False and report["parameters"][DAMPING]["reliable"] is False
    assert report["noise"]["source"].startswith("estimated from the data's third differences: the fit stopped")
    allowed = run_sysid(tmp_path / "pend.npz", tmp_path / "out", "steps=2", "spread_fits=0", "allow_unconverged=true")
    assert allowed.returncode == 0 and "NOT CONVERGED" in allowed.stdout
    # with spread starts (the default) a start near the truth converges within the 2 steps
    spread = run_sysid(tmp_path / "pend.npz", tmp_path / "out", "steps=2")
    assert spread.returncode == 0 and "1 fit from spread starts (each parameter within 4 times" in spread.stdout
    assert "the least-cost of 64) was run, the one from [" in spread.stdout
    report = json.loads((tmp_path / "out" / "sysid.json").read_text())
    assert report["converged"] is True and report["spread_fits"] >= 1 and report["misfit"] < 1.5
    assert report["noise"]["source"] == "estimated from the residuals"
    assert report["parameters"][DAMPING]["estimate"] == pytest.approx(0.137, rel=0.02)
    assert report["spread_start"][0] == pytest.approx(0.137, rel=1.0)


def test_sysid_cli_rejects_bad_data_in_one_line(tmp_path):
    data = random_recording(0.05, seed=3)
    qpos = data.qpos.copy()
    qpos[[7, 9]] = np.nan
    Trajectory(data.time, qpos, data.qvel, data.ctrl).save(tmp_path / "nan.npz")
    result = run_sysid(tmp_path / "nan.npz", tmp_path / "out")
    assert result.returncode == 1 and "fitting" not in result.stdout  # stopped before the fit
    assert result.stderr.strip() == (
        "error: qpos has non-finite values (nan or inf) in rows 7, 9 of 201; remove or fill them"
    )


# --- control delay (shac/sysid/signals.py) ---


@functools.cache
def delayed_recording():
    """8 s of multisine torques every 0.05 s (5 physics steps), damping 0.1, commands acting 20 ms late."""
    ctrl = multisine(8.0, PENDULUM.ctrl_dt, [1.0, 0.6, 0.4], [1.5, 3.7, 6.1])
    start = np.array([np.pi]), np.array([0.0])
    return record(model_with(damping=0.1), ctrl, *start, PENDULUM.ctrl_dt, 0.002, 0.02, seed=1, delay=0.02)


def delay_problem(keys=(DAMPING, DELAY), delay=0.005):
    """The fit of `keys` to `delayed_recording`, from damping 0.05 (50% off) and a delay of `delay`."""
    return Problem(model_with(damping=0.05), list(keys), delayed_recording(), signal_values={DELAY: delay})


def test_fit_recovers_a_control_delay_and_the_damping():
    # 20 ms is 0.4 sample spacings (2 of the 5 physics steps per sample); the fit starts at 5 ms
    problem = delay_problem()
    result = fit(problem)  # autodiff: the delay's derivative comes from MJX
    report = analyze(
        (DAMPING, DELAY), result.values, result.information, result.converged, units=problem.report_units(result.values)
    )
    assert result.converged
    damping, delay = report["parameters"][DAMPING], report["parameters"][DELAY]
    assert damping["estimate"] == pytest.approx(0.1, rel=0.01)
    assert delay["estimate"] == pytest.approx(0.02, abs=0.002)
    assert delay["ci95"][0] <= 0.02 <= delay["ci95"][1] and damping["ci95"][0] <= 0.1 <= damping["ci95"][1]
    assert delay["ms"]["estimate"] == pytest.approx(1000 * delay["estimate"]) and delay["unit"] == pytest.approx(0.05)
    report |= {"converged": True, "stalled": result.stalled, "steps": result.steps, "step_length": 0.0}
    report["noise"] = {"source": "estimated", "qpos": [0.002], "qvel": [0.02], "controls": problem.controls_phrase()}
    lines = summary_lines(report)
    assert re.fullmatch(r"signal:ctrl:delay: \d+\.\d+ ms ± 0\.\d+ ms, 95% CI \[\d+\.\d+, \d+\.\d+\] ms", lines[2])
    assert "controls delayed by the fitted delay, otherwise exact;" in lines[3] and "exact controls" not in lines[3]


def test_a_non_finite_information_matrix_gives_no_interval_and_no_error():
    # an unstable simulation in the last Jacobian leaves NaN in the information; its entries count as none
    information = np.array([[4.0, np.nan], [np.nan, 1e6]])
    report = analyze((DAMPING, "joint:hinge:frictionloss"), np.array([0.1, 0.2]), information)
    damping, friction = report["parameters"][DAMPING], report["parameters"]["joint:hinge:frictionloss"]
    assert not damping["reliable"] and not friction["reliable"]
    # without the NaN pair the two are independent: relative std 1 / sqrt(4 * 0.1^2) = 5 and 1 / sqrt(1e6 * 0.2^2)
    assert damping["relative_std"] == pytest.approx(5.0) and friction["relative_std"] == pytest.approx(0.005)
    # a direction the data do not determine: an infinite error for the parameter along it, and no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = analyze((DAMPING, FRICTION), np.array([0.1, 0.2]), np.array([[4.0, 0.0], [0.0, 0.0]]))
    assert report["parameters"][DAMPING]["relative_std"] == pytest.approx(5.0)
    assert report["parameters"][FRICTION]["relative_std"] == np.inf


def test_a_parameter_estimated_at_zero_is_judged_in_the_models_unit():
    """A fit between two bounds can end on the lower one, 0: its interval is then absolute, cut at 0, not NaN."""
    information = np.array([[1e4, 0.0], [0.0, 1e6]])  # independent: std errors 0.01 and 0.001
    report = analyze((FRICTION, DAMPING), np.array([0.0, 0.1]), information)
    friction, damping = report["parameters"][FRICTION], report["parameters"][DAMPING]
    assert friction["unit"] == 1.0 and friction["std_error"] == pytest.approx(0.01)
    assert friction["ci95"] == pytest.approx([0.0, 1.96 * 0.01], rel=1e-3)
    assert "unit" not in damping and damping["relative_std"] == pytest.approx(0.01)


def test_a_delay_of_several_steps_is_found_by_the_scan_before_the_fit():
    # 120 ms is 2.4 sample spacings; the scan starts the fit at it (the pendulum's fit from 0 gets there too,
    # the arm's from 10 ms did not: docs/sysid.md, coverage benchmark)
    ctrl = multisine(8.0, PENDULUM.ctrl_dt, [1.0, 0.6, 0.4], [1.5, 3.7, 6.1])
    data = record(model_with(damping=0.1), ctrl, np.array([np.pi]), np.array([0.0]), PENDULUM.ctrl_dt, 0.002, 0.02,
                  seed=1, delay=0.12)  # fmt: skip
    bounds = {DELAY: Bounds(upper=0.2)}
    problem = Problem(model_with(damping=0.05), [DAMPING, DELAY], data, bounds=bounds, signal_values={DELAY: 0.0})
    # each physics step (10 ms) up to 8, then 25% apart, rounded to steps: 10, 12.5 -> 12, 15.6 -> 16, 19.5 -> 20
    expected = [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.1, 0.12, 0.16, 0.2]
    np.testing.assert_allclose(problem.delay_candidates(), expected, atol=1e-12)
    result = fit(problem, method="finite_difference")
    assert result.delay_start == pytest.approx(0.12)
    assert result.converged and result.values[1] == pytest.approx(0.12, abs=0.002)
    assert result.values[0] == pytest.approx(0.1, rel=0.01)
    assert fit(problem, method="finite_difference", steps=0, delay_scan=False).delay_start is None


def test_a_delay_next_to_a_physics_step_multiple_is_mirrored_across_it():
    # the pendulum's physics step is 10 ms: within a tenth of it (1 ms) of a multiple, the restart mirrors
    problem = delay_problem()
    restart = {d: fit_module.kink_restart(problem, np.array([0.1, d])) for d in (0.0195, 0.0203, 0.0185, 0.0004)}
    assert restart == {0.0195: pytest.approx(0.0205), 0.0203: pytest.approx(0.0197), 0.0185: None, 0.0004: None}
    assert fit_module.kink_restart(problem, np.array([0.1, 0.02])) == pytest.approx(0.0205)  # on it: half the window
    bounds = {DELAY: Bounds(upper=0.02)}
    bounded = Problem(model_with(damping=0.05), [DAMPING, DELAY], delayed_recording(), bounds=bounds,
                      signal_values={DELAY: 0.005})  # fmt: skip
    assert fit_module.kink_restart(bounded, np.array([0.1, 0.0199])) is None  # the mirror (20.1 ms) is out of bounds
    assert fit_module.kink_restart(delay_problem((DAMPING,), delay=0.02), np.array([0.1])) is None  # no fitted delay


def test_the_restarted_fit_keeps_the_lower_cost_of_the_two_fits():
    # the true delay, 20 ms, is a multiple of the step: the first fit ends next to it and a second one runs
    problem = delay_problem()
    result = fit(problem, method="finite_difference")
    first = fit(problem, method="finite_difference", delay_restart=False)
    assert first.delay_restart is None and result.delay_restart == fit_module.kink_restart(problem, first.values)
    mirrored = delay_problem(delay=result.delay_restart)
    second = fit(mirrored, method="finite_difference", delay_scan=False, delay_restart=False)
    weights = 1.0 / np.atleast_2d(first.noise)
    costs = [fit_module.weighted_cost(problem, r.values, r.start_states, weights, "finite_difference")
             for r in (first, second)]  # fmt: skip
    kept = (first, second)[int(np.argmin(costs))]
    np.testing.assert_array_equal(result.values, kept.values)
    assert result.steps == first.steps + second.steps and result.delay_start == first.delay_start
    assert result.converged and result.values[1] == pytest.approx(0.02, abs=0.002)


def test_parameters_at_their_floor_restart_from_their_initial_values_and_the_lower_cost_is_kept():
    problem = Problem(model_with(damping=0.05, frictionloss=0.02), [DAMPING, FRICTION], random_recording(0.05, seed=1))
    floor = problem.bounds[1].floor
    np.testing.assert_array_equal(fit_module.floor_restart(problem, np.array([0.13, floor])), [0.13, 0.02])
    np.testing.assert_array_equal(fit_module.floor_restart(problem, np.array([0.05e-6, floor])), [0.05, 0.02])
    # a fit that approaches the floor in ever shorter steps stops short of it: within FLOOR_REACH it counts
    np.testing.assert_array_equal(fit_module.floor_restart(problem, np.array([0.13, 5 * floor])), [0.13, 0.02])
    assert fit_module.floor_restart(problem, np.array([0.13, 20 * floor])) is None
    # data without friction: the first fit ends with it at the floor, the second starts it at 0.02 again
    result = fit(problem, method="finite_difference")
    first = fit(problem, method="finite_difference", bound_restart=False)
    assert (
        first.floor_restart == ()
        and result.floor_restart == (FRICTION,)
        and problem.bounds[1].at_floor(first.values[1])
    )
    restarted = Problem(model_with(damping=first.values[0], frictionloss=0.02), [DAMPING, FRICTION], problem.trajectory)
    second = fit(restarted, method="finite_difference", bound_restart=False)
    weights = 1.0 / np.atleast_2d(first.noise)
    costs = [fit_module.weighted_cost(problem, r.values, r.start_states, weights, "finite_difference")
             for r in (first, second)]  # fmt: skip
    np.testing.assert_array_equal(result.values, (first, second)[int(np.argmin(costs))].values)
    assert result.steps == first.steps + second.steps and result.converged
    assert result.values[0] == pytest.approx(0.137, rel=0.02)


def test_misfit_is_the_largest_ratio_of_residual_rms_to_the_datas_noise():
    # two recordings, two coordinates; segment 0 and 2 are recording 0, segment 1 recording 1; L = 2 samples
    residuals = np.array([[1.0, 2.0, -1.0, 2.0], [3.0, 0.0, 3.0, 0.0], [1.0, -2.0, 1.0, 2.0]])  # [S, L * nx]
    noise = np.array([[0.5, 1.0], [2.0, 1.0]])  # [K, nx] the weights' noise
    data_noise = np.array([[0.5, 4.0], [1.0, 1.0]])
    # recording 0: rms 1 * 0.5 / 0.5 = 1 and 2 * 1 / 4 = 0.5; recording 1: rms 3 * 2 / 1 = 6 and 0
    assert misfit(residuals, noise, np.array([0, 1, 0]), data_noise) == pytest.approx(6.0)


def test_misfit_compares_with_the_noise_given_else_with_the_third_differences():
    data = random_recording(0.05, seed=1)
    estimated = Problem(PENDULUM.mj_model, [DAMPING], data)
    np.testing.assert_array_equal(estimated.data_noise, initial_noise(data)[None])
    given = Problem(PENDULUM.mj_model, [DAMPING], data, noise=(2e-3, 3e-2))  # a sensor's stated noise
    np.testing.assert_array_equal(given.data_noise, [[2e-3, 3e-2]])


def heavy_cart_fit(seconds, **kwargs):
    """The cart-pole's cart, pole and hinge friction fitted to `seconds` of a cart 4 times the model's (the
    model's values as the start, the friction's 0.1), by finite differences."""
    real = str(ROOT / "configs/real/cartpole_swingup_heavy_cart.yaml")
    data, _, _ = simulate(RecordArgs(env="cartpole_swingup", out="", real=real, seconds=seconds, excitation="random"),
                          CARTPOLE)  # fmt: skip
    model = copy.deepcopy(CARTPOLE.mj_model)
    ModelParameter.parse(FRICTION, model).write_mj(model, 0.1)
    problem = Problem(model, ["body:cart:mass", "body:pole:mass", FRICTION], data)
    return problem, fit(problem, method="finite_difference", **kwargs)


@pytest.mark.parametrize("seconds", [5.0, 10.0])
def test_a_fit_that_is_not_sound_restarts_from_spread_starts_and_keeps_the_first_sound_one(seconds):
    problem, alone = heavy_cart_fit(seconds, spread_fits=0)
    # from the model's 1 kg cart the fit ends far from the truth and unconverged: 5 s with the cart at hundreds
    # of tonnes, 10 s with both masses at hundreds of kg and the hinge stuck by a friction of about 1e10 N m,
    # residuals 30 times the noise and more
    assert not alone.converged and alone.values[0] > 100 and alone.values[2] > 1e6 and alone.misfit > 10
    assert alone.spread_fits == 0 and alone.spread_start is None and not fit_module.sound(alone)
    _, result = heavy_cart_fit(seconds)
    starts = fit_module.spread_starts(problem, problem.initial_values, 1.0 / problem.noise, "finite_difference")
    assert result.spread_fits == 1 and np.array_equal(result.spread_start, starts[0])
    assert fit_module.sound(result) and result.misfit < 1.5
    np.testing.assert_allclose(result.values, [4.0, 1.0, 0.2], rtol=0.01)
    assert result.steps > alone.steps and result.jacobians > alone.jacobians


def test_spread_starts_fill_the_box_least_cost_first_and_keep_the_delay():
    problem = Problem(
        model_with(damping=0.1, frictionloss=0.02),
        [DAMPING, FRICTION, DELAY],
        random_recording(0.05, seed=1),
        bounds={FRICTION: Bounds(upper=0.5)},
        signal_values={DELAY: 0.01},
    )
    values, weights = problem.initial_values, 1.0 / problem.noise
    starts = fit_module.spread_starts(problem, values, weights, "finite_difference", count=32, spread=10.0)
    assert starts.shape == (32, 3)
    # damping above 0 alone: within 10 times 0.1 either way, spread over the log range; friction between its
    # two bounds: uniform over [0, 0.5]; the delay as given
    log_ratio = np.log10(starts[:, 0] / 0.1)
    assert log_ratio.min() >= -1 and log_ratio.max() <= 1 and log_ratio.min() < -0.9 and log_ratio.max() > 0.9
    assert starts[:, 1].min() >= 0 and starts[:, 1].max() <= 0.5 and np.ptp(starts[:, 1]) > 0.45
    assert np.all(starts[:, 2] == 0.01)
    costs = [fit_module.weighted_cost(problem, start, problem.segments.measured[:, 0], weights, "finite_difference")
             for start in starts]  # fmt: skip
    assert np.all(np.diff(costs) >= 0)
    again = fit_module.spread_starts(problem, values, weights, "finite_difference", count=32, spread=10.0)
    np.testing.assert_array_equal(again, starts)


def test_a_fit_that_ignores_the_delay_biases_the_damping():
    with_delay = fit(delay_problem(), method="finite_difference")
    without = fit(delay_problem((DAMPING,), delay=0.0), method="finite_difference")
    assert with_delay.converged and without.converged
    error, biased = abs(with_delay.values[0] / 0.1 - 1), abs(without.values[0] / 0.1 - 1)
    # about 0.3% with the delay, about 10% without: the damping absorbs the late torques
    assert error < 0.01 and biased > 0.05 and biased > 5 * error
    report = analyze((DAMPING,), without.values, without.information)
    low, high = report["parameters"][DAMPING]["ci95"]
    assert not low <= 0.1 <= high  # and its interval does not know it
    # the model error is taken for noise: the estimated velocity noise is well above the simulated 0.02
    assert without.noise[1] > 2 * 0.02 and with_delay.noise[1] == pytest.approx(0.02, rel=0.2)


def test_zero_delay_reproduces_the_fit_without_delay():
    problem, plain = delay_problem(delay=0.0), delay_problem((DAMPING,), delay=0.0)
    x0 = problem.segments.measured[:, 0]
    weights = 1.0 / np.array([0.002, 0.02])
    # the path before the delay existed: each recorded command held over its sample's physics steps
    model = model_with(damping=0.1)
    qpos, qvel = simulate_mujoco(model, x0[:, :1], x0[:, 1:], problem.segments.ctrl, problem.n_substeps)
    simulated = np.concatenate([x0[:, None], np.concatenate([qpos, qvel], axis=-1)], axis=1)
    old = ((simulated - problem.segments.measured) * weights).reshape(len(x0), -1)
    at_zero = problem.residuals_mujoco(np.array([0.1, 0.0]), x0, weights)
    np.testing.assert_array_equal(at_zero, old)
    np.testing.assert_array_equal(plain.residuals_mujoco(np.array([0.1]), x0, weights), old)
    residuals = problem.jacobian(np.array([0.1, 0.0]), x0, weights, "autodiff")[0]
    np.testing.assert_allclose(residuals, old, atol=1e-6)  # MJX and MuJoCo's C simulator, both float64
    # the delay's derivative, between two of the physics steps' kinks, is the one MuJoCo's differences see
    values = np.array([0.1, 0.013])
    autodiff = problem.jacobian(values, x0, weights, "autodiff")
    finite = problem.jacobian(values, x0, weights, "finite_difference")
    for exact, approximate in zip(autodiff, finite, strict=True):
        np.testing.assert_allclose(exact, approximate, rtol=1e-4, atol=1e-4 * np.abs(exact).max())
    assert np.abs(autodiff[1][..., 1]).max() > 0


def test_finite_difference_jacobian_is_central_differences_of_the_residuals(monkeypatch):
    """Every perturbed simulation in one multithreaded rollout, or in chunks of one, gives the plain loop's
    differences of `residuals_mujoco` exactly; the delay at its lower bound takes a forward difference."""
    problem = delay_problem()
    x0 = problem.segments.measured[:, 0]
    weights = 1.0 / np.array([0.002, 0.02])
    values = np.array([0.1, 0.0])

    def residuals(v=values, x=x0):
        return problem.residuals_mujoco(v, x, weights)

    r = residuals()
    h = fit_module.FINITE_DIFFERENCE_STEP * 0.1
    up, down = values + np.array([h, 0.0]), values - np.array([h, 0.0])
    d_damping = (residuals(up) - residuals(down)) / (up[0] - down[0])
    h = fit_module.FINITE_DIFFERENCE_STEP * problem.trajectory.dt
    d_delay = (residuals(values + np.array([0.0, h])) - r) / h
    d_x0 = []
    for j in range(x0.shape[1]):
        step = np.zeros_like(x0)
        step[:, j] = h = fit_module.FINITE_DIFFERENCE_STEP * max(np.abs(x0[:, j]).max(), 1.0)
        d_x0.append((residuals(x=x0 + step) - residuals(x=x0 - step)) / (2 * h))
    expected = (r, np.stack([d_damping, d_delay], axis=-1), np.stack(d_x0, axis=-1))
    for chunk_bytes in (fit_module.ROLLOUT_BYTES, 1):
        monkeypatch.setattr(fit_module, "ROLLOUT_BYTES", chunk_bytes)
        for got, want in zip(problem.jacobian(values, x0, weights, "finite_difference"), expected, strict=True):
            np.testing.assert_array_equal(got, want)


def test_forward_difference_jacobian_steps_each_variable_once_and_down_at_its_upper_bound():
    """`forward_difference` takes one step per variable from the same centre simulation: up, or down where
    an up step would leave the bounds (the delay at its upper bound)."""
    problem = delay_problem()
    x0 = problem.segments.measured[:, 0]
    weights = 1.0 / np.array([0.002, 0.02])
    top = problem.bounds[1].upper
    values = np.array([0.1, top])

    def residuals(v=values, x=x0):
        return problem.residuals_mujoco(v, x, weights)

    r = residuals()
    h = fit_module.FINITE_DIFFERENCE_STEP * 0.1
    d_damping = (residuals(values + np.array([h, 0.0])) - r) / h
    h = fit_module.FINITE_DIFFERENCE_STEP * problem.trajectory.dt
    d_delay = (residuals(values - np.array([0.0, h])) - r) / -h
    d_x0 = []
    for j in range(x0.shape[1]):
        step = np.zeros_like(x0)
        step[:, j] = h = fit_module.FINITE_DIFFERENCE_STEP * max(np.abs(x0[:, j]).max(), 1.0)
        d_x0.append((residuals(x=x0 + step) - r) / h)
    expected = (r, np.stack([d_damping, d_delay], axis=-1), np.stack(d_x0, axis=-1))
    got = problem.jacobian(values, x0, weights, "forward_difference")
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    central = problem.jacobian(values, x0, weights, "finite_difference")
    np.testing.assert_allclose(got[1][..., 0], central[1][..., 0], rtol=1e-3, atol=1e-3 * np.abs(d_damping).max())


@pytest.mark.parametrize("method", ["autodiff", "forward_difference"])
def test_reweighting_a_jacobian_equals_taking_it_under_the_new_weights(method):
    """Two recordings with their own weights, as a new round of noise estimation changes them. Differences
    of residuals weighted before or after subtracting agree to their rounding over the step (1e-7)."""
    data = [random_recording(PENDULUM.ctrl_dt, seed, seconds=2.0, damping=0.1) for seed in (1, 2)]
    problem = Problem(PENDULUM.mj_model, [DAMPING], data)
    x0 = problem.segments.measured[:, 0]
    old, new = 1.0 / np.array([[0.002, 0.02], [0.004, 0.01]]), 1.0 / np.array([[0.003, 0.01], [0.001, 0.05]])
    values = np.array([0.08])
    fresh = problem.jacobian(values, x0, new, method)
    reweighted = problem.reweight(problem.jacobian(values, x0, old, method), old, new)
    rounding = 1e-12 if method == "autodiff" else 1e-6
    for a, b in zip(reweighted, fresh, strict=True):
        np.testing.assert_allclose(a, b, rtol=rounding, atol=rounding * np.abs(b).max())


def test_the_launchers_accept_the_fits_jacobian_methods():
    from launch import sysid as sysid_launch
    from shac.tools.benchmarks.config import SYSID_METHODS

    assert sysid_launch.METHODS == SYSID_METHODS == fit_module.METHODS


def test_the_launchers_noise_options_take_both_or_the_positions_alone():
    from launch import sysid as sysid_launch

    base = ["data=log.npz", "env=pendulum_swingup", f"params=[{DAMPING}]"]
    assert sysid_launch.parse([*base, "qpos_noise=0.001"]).qvel_noise == 0.0  # for a log without velocities
    assert sysid_launch.parse([*base, "qpos_noise=0.001", "qvel_noise=0.01"]).qvel_noise == 0.01
    for bad in (["qvel_noise=0.01"], ["qpos_noise=-0.001"]):
        with pytest.raises(SystemExit, match=r"^give both qpos_noise and qvel_noise > 0, qpos_noise alone"):
            sysid_launch.parse([*base, *bad])


def test_delayed_controls_take_earlier_commands_from_the_whole_recording():
    data = delayed_recording()
    time = data.time.copy()
    time[80:] += 1.0  # a gap: rows 80 on are a second stretch
    problem = Problem(PENDULUM.mj_model, [DAMPING, DELAY], Trajectory(time, data.qpos, data.qvel, data.ctrl), 0.95)
    assert problem.segments.start_rows.tolist() == [0, 20, 40, 60, 80, 100, 120, 140]
    controls = problem.step_controls(np.array([0.1, 0.03]))  # [S, 19, 5, 1]: 3 of the 5 physics steps late
    ctrl = data.ctrl[:, 0]
    # segment 1 starts at row 20: its first 3 physics steps get command 19, from before the segment
    np.testing.assert_array_equal(controls[1, 0, :, 0], [ctrl[19]] * 3 + [ctrl[20]] * 2)
    # the recording's and each stretch's first command is held until it arrives
    np.testing.assert_array_equal(controls[0, 0, :, 0], [ctrl[0]] * 5)
    np.testing.assert_array_equal(controls[4, 0, :, 0], [ctrl[80]] * 5)
    # between steps: the mean of the delayed command over the step, linear in the delay
    halfway = problem.step_controls(np.array([0.1, 0.025]))
    np.testing.assert_allclose(halfway[1, 0, 2, 0], 0.5 * (ctrl[19] + ctrl[20]))


@pytest.mark.parametrize(
    ("keys", "signal_values", "bounds", "message"),
    [
        ([DAMPING, DELAY], {DELAY: -0.01}, {}, r"^initial delay signal:ctrl:delay=-0.01 s must be >= 0"),
        (
            [DAMPING, DELAY],
            {DELAY: 9.0},
            {},
            r"^initial delay signal:ctrl:delay=9 s is longer than the recording \(8 s\); give it in seconds",
        ),
        (
            [DAMPING, DELAY],
            {DELAY: 2.0},
            {},
            r"^initial delay signal:ctrl:delay=2 s is above its upper bound 0.8 s \(a tenth of the recording\)",
        ),
        ([DAMPING], {DELAY: -0.02}, {}, r"^delay signal:ctrl:delay=-0.02 s must be >= 0"),
        (
            [DAMPING, "signal:ctrl:gain"],
            {},
            {},
            r"^parameter 'signal:ctrl:gain' names an unknown attribute 'gain' of signal 'ctrl'; accepted: "
            r"signal:ctrl:delay \(seconds",
        ),
        ([DAMPING, "signal:qpos:delay"], {}, {}, r"^parameter 'signal:qpos:delay' names an unknown signal 'qpos'"),
    ],
)
def test_bad_delays_and_signal_names_fail_in_one_line(keys, signal_values, bounds, message):
    with pytest.raises(ValueError, match=message) as error:
        Problem(PENDULUM.mj_model, keys, delayed_recording(), bounds=bounds, signal_values=signal_values)
    assert "\n" not in str(error.value)


def test_record_and_sysid_clis_simulate_and_fit_a_delay(tmp_path):
    data = tmp_path / "delayed.npz"
    command = ["launch/record_trajectory.py", "env=pendulum_swingup", f"out={data}", "seconds=8"]
    command += ["amplitudes=[1.0,0.6,0.4]", "frequencies=[1.5,3.7,6.1]", "qpos_noise=0.002", "qvel_noise=0.02"]
    too_long = run_python(*command, f"true_params=[{DELAY}=9]", timeout=300)
    assert too_long.returncode == 1 and not data.exists()
    assert too_long.stderr.strip() == (
        "error: true delay signal:ctrl:delay=9 s is longer than the recording (8 s); give it in "
        "seconds, e.g. 0.02 for 20 ms"
    )
    recorded = run_python(*command, f"true_params=[{DAMPING}=0.1,{DELAY}=0.02]", timeout=300)
    assert recorded.returncode == 0, recorded.stderr[-2000:]
    assert "commands acting 20 ms after they are sent" in recorded.stdout
    np.testing.assert_array_equal(
        Trajectory.load(data).ctrl[:, 0], multisine(8.0, 0.05, [1.0, 0.6, 0.4], [1.5, 3.7, 6.1])[:, 0]
    )
    result = run_sysid(data, tmp_path / "out", f"params=[{DAMPING},{DELAY}]", f"init=[{DELAY}=0.005]")
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith(f"{DELAY}: "))
    assert re.fullmatch(r"signal:ctrl:delay: \d+\.\d+ ms ± 0\.\d+ ms, 95% CI \[.*\] ms", line)
    assert "controls delayed by the fitted delay, otherwise exact" in result.stdout
    report = json.loads((tmp_path / "out" / "sysid.json").read_text())
    assert report["parameters"][DELAY]["estimate"] == pytest.approx(0.02, abs=0.002)
    assert report["noise"]["controls"] == "controls delayed by the fitted delay, otherwise exact"


# --- several recordings in one fit (shac/sysid/fit.py, launch/sysid.py data=[...]) ---

FRICTION_TRUTH = {DAMPING: 0.1, FRICTION: 0.2}


def friction_recording(amplitudes, frequencies, qpos_noise, qvel_noise, seed):
    """20 s of multisine torques every 0.05 s from the hanging pendulum with damping 0.1 and friction 0.2."""
    ctrl = multisine(20.0, PENDULUM.ctrl_dt, amplitudes, frequencies)
    model = model_with(damping=0.1, frictionloss=0.2)
    return record(model, ctrl, np.array([np.pi]), np.array([0.0]), PENDULUM.ctrl_dt, qpos_noise, qvel_noise, seed)


def spin_recording():
    """20 s of a steady push that keeps the pendulum spinning over the top at 14 to 18 rad/s."""
    t = np.arange(401) * PENDULUM.ctrl_dt
    ctrl = (0.9 + 0.1 * np.sin(1.3 * t))[:, None]
    model = model_with(damping=0.1, frictionloss=0.2)
    return record(model, ctrl, np.array([np.pi]), np.array([17.0]), PENDULUM.ctrl_dt, 0.002, 0.02, seed=4)


def friction_fit(data, steps=50):
    """Damping and friction fitted to `data` (one recording or a list) from half their true values."""
    problem = Problem(model_with(damping=0.05, frictionloss=0.1), [DAMPING, FRICTION], data)
    result = fit(problem, steps=steps, method="finite_difference")
    return problem, result, analyze((DAMPING, FRICTION), result.values, result.information, result.converged)


def correlation(information):
    covariance = np.linalg.inv(information)
    return covariance[0, 1] / np.sqrt(covariance[0, 0] * covariance[1, 1])


def test_two_recordings_share_the_parameters_and_keep_their_own_noise():
    # the same pendulum under two excitations, the second with twice the noise
    rich = friction_recording([1.0, 0.6, 0.4], [1.5, 3.7, 6.1], 0.002, 0.02, seed=0)
    other = friction_recording([0.9, 0.7], [2.3, 5.3], 0.004, 0.04, seed=4)
    singles = [friction_fit(rich)[1:], friction_fit(other)[1:]]
    problem, joint, report = friction_fit([rich, other])
    assert problem.describe().startswith("38 segments of 1 s (21 samples every 0.05 s) from 2 recordings")
    # segments stay within their recording (rows 0-400 and 401-801)
    assert (problem.segments.start_rows[problem.segment_recording == 1] >= 401).all()
    assert problem.recording_segments.tolist() == [19, 19]
    assert joint.converged and all(result.converged for result, _ in singles)
    for key, truth in FRICTION_TRUTH.items():
        entry = report["parameters"][key]
        assert entry["ci95"][0] <= truth <= entry["ci95"][1]
        errors = [single["parameters"][key]["std_error"] for _, single in singles]
        for _, single in singles:
            low, high = single["parameters"][key]["ci95"]
            assert low <= entry["estimate"] <= high
        assert entry["std_error"] < min(errors)
        # the information of the two experiments adds up, each weighted by its own noise
        assert entry["std_error"] == pytest.approx(1 / np.sqrt(sum(1 / e**2 for e in errors)), rel=0.15)
    # each recording's noise, estimated from its own residuals: [K, nx] for a list
    assert joint.noise.shape == (2, 2)
    np.testing.assert_allclose(joint.noise, [[0.002, 0.02], [0.004, 0.04]], rtol=0.2)


def test_a_list_of_one_recording_fits_as_the_recording_alone():
    data = random_recording(0.05, seed=1)
    alone, listed = (fit(Problem(PENDULUM.mj_model, [DAMPING], d), method="finite_difference") for d in (data, [data]))
    for name in ("values", "information", "start_states", "residuals", "losses"):
        np.testing.assert_array_equal(getattr(listed, name), getattr(alone, name))
    assert alone.noise.shape == (2,) and listed.noise.shape == (1, 2)
    np.testing.assert_array_equal(listed.noise[0], alone.noise)


def test_recordings_are_weighted_by_their_own_noise_and_never_joined():
    # two halves of one recording, 5 s each: 5 segments of 20 samples each (the shapes compiled above)
    data = random_recording(0.05, seed=1)
    halves = [Trajectory(*(getattr(data, n)[rows] for n in ("time", "qpos", "qvel", "ctrl"))) for rows in
              (slice(0, 100), slice(100, 201))]  # fmt: skip
    problem = Problem(PENDULUM.mj_model, [DAMPING], halves)
    second = Problem(PENDULUM.mj_model, [DAMPING], halves[1])
    assert problem.segment_recording.tolist() == [0] * 5 + [1] * 5 and second.segment_length == 20
    weights = 1.0 / np.array([[1e-3, 1e-2], [4e-3, 4e-2]])  # [K, nx]
    x0 = problem.segments.measured[:, 0]
    values = np.array([0.1])
    autodiff = problem.jacobian(values, x0, weights, "autodiff")
    finite = problem.jacobian(values, x0, weights, "finite_difference")
    for exact, approximate in zip(autodiff, finite, strict=True):
        np.testing.assert_allclose(exact, approximate, rtol=1e-4, atol=1e-4 * np.abs(exact).max())
    # the second recording's segments are those of the recording alone, weighted by its own noise
    np.testing.assert_array_equal(finite[0][5:], second.residuals_mujoco(values, x0[5:], weights[1]))
    # a delayed control never reaches back into the recording before: its first command is held
    delayed = Problem(PENDULUM.mj_model, [DAMPING, DELAY], halves).step_controls(np.array([0.1, 0.03]))
    np.testing.assert_array_equal(delayed[5, 0, :, 0], [halves[1].ctrl[0, 0]] * 5)


@pytest.mark.parametrize(
    ("change", "names", "message"),
    [
        (lambda a, b: [], None, r"^no recordings given; pass a Trajectory or a non-empty sequence of them$"),
        (
            lambda a, b: [a, Trajectory(b.time, np.repeat(b.qpos, 2, axis=1), b.qvel, b.ctrl)],
            None,
            r"^recording 2 of 2: qpos has 2 columns but the model has nq=1$",
        ),
        (
            lambda a, b: [a, Trajectory(b.time, b.qpos, b.qvel, np.repeat(b.ctrl, 3, axis=1))],
            ["'a.npz'", "'b.npz'"],
            r"^'b.npz': ctrl has 3 columns but the model has nu=1$",
        ),
        (
            lambda a, b: [a, Trajectory(2 * b.time, b.qpos, b.qvel, b.ctrl)],
            ["'a.npz'", "'b.npz'"],
            r"^'b.npz' is sampled every 0.1 s but 'a.npz' every 0.05 s; the recordings of one fit need one sample "
            r"spacing \(resample them\)$",
        ),
        (
            lambda a, b: [a, Trajectory(b.time[:10], b.qpos[:10], b.qvel[:10], b.ctrl[:10])],
            None,
            r"^recording 2 of 2 has 10 samples in its longest stretch, fewer than one segment of 20 samples "
            r"\(0.95 s\); leave it out or set a shorter segment_seconds$",
        ),
    ],
)
def test_bad_recordings_among_several_fail_in_one_line_naming_the_recording(change, names, message):
    data = random_recording(0.05, seed=1)
    with pytest.raises(ValueError, match=message):
        Problem(PENDULUM.mj_model, [DAMPING], change(data, data), names=names)


HEAVY = {"body:pole:mass": 2.0}


def heavy_and_light(damping=0.137):
    """10 s of random excitation of the pendulum as it is (bob 1 kg) and 10 s with a 2 kg bob, every 0.05 s."""
    light = random_recording(0.05, seed=1, damping=damping)
    rng = np.random.default_rng(2)
    model = model_with(damping=damping)
    ModelParameter.parse("body:pole:mass", model).write_mj(model, HEAVY["body:pole:mass"])
    ctrl = random_excitation(10.0, 0.05, 1, rng)
    return light, record(model, ctrl, np.array([np.pi]), np.array([0.0]), 0.05, 1e-3, 1e-2, rng)


def test_recordings_of_model_variants_share_the_fitted_parameters():
    light, heavy = heavy_and_light()
    problem = Problem(PENDULUM.mj_model, [DAMPING], [light, heavy], variants=[{}, HEAVY])
    assert problem.variants == ({}, HEAVY) and problem.fixed_values.tolist() == [[1.0], [2.0]]
    # the heavy recording's segments are those of a problem on the heavy model alone
    heavy_model = copy.deepcopy(PENDULUM.mj_model)
    ModelParameter.parse("body:pole:mass", heavy_model).write_mj(heavy_model, 2.0)
    alone = Problem(heavy_model, [DAMPING], heavy)
    weights, values = 1.0 / np.array([1e-3, 1e-2]), np.array([0.1])
    x0 = problem.segments.measured[:, 0]
    finite = problem.jacobian(values, x0, weights, "finite_difference")
    np.testing.assert_array_equal(finite[0][10:], alone.residuals_mujoco(values, x0[10:], weights))
    # MJX writes the variant as the C simulator does: its Jacobians match the differences
    for exact, approximate in zip(problem.jacobian(values, x0, weights, "autodiff"), finite, strict=True):
        np.testing.assert_allclose(exact, approximate, rtol=1e-4, atol=1e-4 * np.abs(exact).max())
    result = fit(problem, method="finite_difference")
    entry = analyze((DAMPING,), result.values, result.information, result.converged)["parameters"][DAMPING]
    assert result.converged and result.misfit < 1.5 and entry["ci95"][0] <= 0.137 <= entry["ci95"][1]
    # the same recordings taken as of one model: the residuals are many times the noise
    assert fit(Problem(PENDULUM.mj_model, [DAMPING], [light, heavy]), method="finite_difference").misfit > 10


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ([HEAVY], r"^1 variants for 2 recordings; give one per recording \(\{\}: none\)$"),
        (
            [{}, {DAMPING: 0.2}],
            r"^recording 2 of 2: 'joint:hinge:damping' is fitted and also set by the recording's variant; a "
            r"parameter is either shared and fitted, or known for each recording$",
        ),
        ([{}, {DELAY: 0.01}], r"^recording 2 of 2: variant value 'signal:ctrl:delay' is a signal; a variant holds "
         r"model values$"),
        ([{}, {"body:pole:mass": -1.0}], r"^recording 2 of 2, variant: 'body:pole:mass' = -1.0 must be > 0 "),
        ([{"body:hand:mass": 1.0}, {}], r"^recording 1 of 2, variant: no body named 'hand' in the model; bodies: "
         r"world, pole$"),
    ],
)  # fmt: skip
def test_bad_variants_fail_in_one_line_naming_the_recording(variants, message):
    light, heavy = heavy_and_light()
    with pytest.raises(ValueError, match=message):
        Problem(PENDULUM.mj_model, [DAMPING], [light, heavy], variants=variants)


@functools.cache
def spin_alone():
    """The fit of damping and friction to `spin_recording` alone (66 finite-difference steps; shared by two tests)."""
    return friction_fit(spin_recording(), steps=100)


def test_a_slower_recording_separates_the_friction_that_fast_spinning_confounds():
    # spinning at 14-18 rad/s, damping 0.1 x speed and friction 0.2 brake alike: the pair is a long valley
    spin, rich = spin_recording(), friction_recording([1.0, 0.6, 0.4], [1.5, 3.7, 6.1], 0.002, 0.02, seed=0)
    _, alone, alone_report = spin_alone()
    assert alone.converged and len(alone_report["flags"]) == 1
    assert DAMPING in alone_report["flags"][0] and "cannot separate" in alone_report["flags"][0]
    assert abs(correlation(alone.information)) > 0.99 and alone_report["condition_number"] > 1e4
    # the multisine's slower swings through zero speed tell the two apart
    _, joint, joint_report = friction_fit([spin, rich])
    assert joint.converged and joint_report["flags"] == []
    assert abs(correlation(joint.information)) < 0.95
    assert joint_report["condition_number"] < alone_report["condition_number"] / 100
    for key, truth in FRICTION_TRUTH.items():
        low, high = joint_report["parameters"][key]["ci95"]
        assert low <= truth <= high


def test_the_advice_on_fast_spinning_records_slow_sweeps_that_resolve_the_pair():
    spin = spin_recording()
    _, alone, alone_report = spin_alone()
    motion = recorded_motion(PENDULUM.mj_model, (DAMPING, FRICTION), spin, "pendulum_swingup")
    report = analyze((DAMPING, FRICTION), alone.values, alone.information, alone.converged, motion=motion)
    # the flag names the hinge and speeds well below the 14-17 rad/s it spun at
    (flag,), (advice,) = report["flags"], report["advice"]
    assert (
        "record joint hinge at speeds well below the current 14-17 rad/s (e.g. slow sweeps around 0.1-1 rad/s)" in flag
    )
    assert (
        advice["rule"] == "damping+frictionloss" and advice["joint"] == "hinge" and flag.endswith(advice["text"] + ".")
    )
    recorded, advised = advice["speeds"]["recorded"], advice["speeds"]["advised"]
    assert advised[1] <= recorded[0] / 10
    # ... and the record_trajectory command that records them, printed under the flag
    assert advice["command"] == (
        "python launch/record_trajectory.py env=pendulum_swingup out=speeds_hinge.npz excitation=sweep "
        '"sweep_hz=[0.05,0.5]" sweep_amplitude=0.5 "actuators=[torque]" seconds=20 dt=0.05 "qvel0=[0]"'
    )
    report |= {"converged": True, "stalled": False, "steps": 66, "step_length": 0.06}
    report["noise"] = {"source": "given", "qpos": [0.002], "qvel": [0.02]}
    lines = summary_lines(report)
    assert lines[lines.index(f"FLAG: {flag}") + 1] == f"  record it: {advice['command']}"
    # that command (the simulated system's true values and noise added), run as record_trajectory runs it
    argv = shlex.split(advice["command"])
    assert argv[:2] == ["python", "launch/record_trajectory.py"]
    argv += [f"true_params=[{DAMPING}=0.1,{FRICTION}=0.2]", "qpos_noise=0.002", "qvel_noise=0.02"]
    slow, _, _ = simulate(cli.parse(RecordArgs, argv[2:], "usage"), PENDULUM)
    assert np.percentile(np.abs(slow.qvel), 95) < recorded[0] / 10  # well below the spinning speeds
    # as a second recording it resolves the pair. (Finite differences of the C simulator stop here by the stall
    # rule, about 1 standard error from the end: the cost is rugged at their scale while the joint sticks at each
    # slow reversal. Nearly all of that step is in start states, so the fit counts as converged: it would move
    # neither parameter by 0.1 of its standard error. Autodiff converges in 25 steps, docs/sysid.md.)
    _, joint, joint_report = friction_fit([spin, slow], steps=80)
    assert joint.converged and joint.parameter_step_errors < 0.1 and joint_report["flags"] == []
    assert joint_report["condition_number"] < alone_report["condition_number"] / 10
    for key, truth in FRICTION_TRUTH.items():
        entry = joint_report["parameters"][key]
        assert entry["estimate"] == pytest.approx(truth, rel=0.01) and entry["relative_std"] < 0.01
        assert entry["ci95"][0] <= truth <= entry["ci95"][1]


def weak_pair():
    """The information about two parameters of value 1 whose weakest direction, (1, -1) / sqrt 2 with a standard
    deviation of 100%, holds both alike, the other direction pinned down to 0.1%."""
    weak, strong = np.array([1.0, -1.0]) / np.sqrt(2), np.array([1.0, 1.0]) / np.sqrt(2)
    return np.outer(weak, weak) + 1e6 * np.outer(strong, strong)


@functools.cache
def arm_recording():
    """3 s of random servo targets and torques on the ARM model (a position servo, a motor and a velocity servo
    on its hinge), from rest."""
    ctrl = 0.5 * random_excitation(3.0, 0.02, ARM.nu, np.random.default_rng(0), max_hz=2.0)
    return record(ARM, ctrl, np.array([0.0, 1.0, 0.0, 0.0, 0.0, 0.0]), np.zeros(ARM.nv), 0.02)


@pytest.mark.parametrize(
    ("model_name", "keys", "rule", "phrase"),
    [
        (
            "pendulum",
            ("joint:hinge:armature", DAMPING),
            "armature+damping",
            "vary the acceleration: record joint hinge",
        ),
        ("pendulum", ("body:pole:mass", DAMPING), "damping+mass", "vary the frequency: sweep joint hinge from about"),
        ("pendulum", ("actuator:torque:gear", DAMPING), "damping+gear", "vary the frequency: sweep joint hinge"),
        ("pendulum", ("actuator:torque:gear", "actuator:torque:gain"), "gain+gear", "no excitation separates them"),
        ("pendulum", ("body:pole:mass", "joint:hinge:stiffness"), "generic", "add faster and larger motions"),
        ("pendulum", ("geom:bob:friction", DAMPING), "contact friction", "record that contact slipping"),
        ("still", (DAMPING, FRICTION), "excite joint", "excite joint hinge: it moved only 0.01"),
        ("arm", ("actuator:servo:kp", "joint:hinge:stiffness"), "kp+stiffness", "vary the target of actuator servo"),
        ("arm", ("actuator:servo:kp", "joint:hinge:damping"), "damping+kp", "vary the frequency: sweep joint hinge"),
        ("arm", ("actuator:servo:kv", "joint:hinge:damping"), "damping+kv", "no excitation separates them"),
    ],
)
def test_advice_follows_the_physics_of_the_pair_and_record_trajectory_accepts_its_command(
    model_name, keys, rule, phrase
):
    if model_name == "arm":
        model, data = ARM, arm_recording()
    else:
        amplitudes = [0.01] if model_name == "still" else [1.0, 0.6]  # "still": the hinge barely moves
        model, data = PENDULUM.mj_model, recording(PENDULUM.mj_model, 5.0, amplitudes, [1.5, 3.7][: len(amplitudes)],
                                                   0.0, 0.0)  # fmt: skip
    motion = recorded_motion(model, keys, data, "pendulum_swingup")
    report = analyze(keys, np.ones(2), weak_pair(), motion=motion)
    (flag,), (advice,) = report["flags"], report["advice"]
    assert advice["rule"] == rule and phrase in advice["text"] and flag.endswith(advice["text"] + ".")
    if rule in ("generic", "gain+gear", "damping+kv", "contact friction"):
        assert advice["command"] is None
        return
    assert advice["joint"] == "hinge"
    args = cli.parse(RecordArgs, shlex.split(advice["command"])[2:], "usage")
    assert args.excitation == "sweep" and 0 < args.sweep_hz[0] <= args.sweep_hz[1] <= 0.25 / data.dt + 1e-9
    ctrl = controls(args, model, args.dt, np.random.default_rng(0))
    assert ctrl.shape == (round(args.seconds / args.dt) + 1, model.nu) and np.abs(ctrl).max() > 0
    excited = [i for i in range(model.nu) if np.abs(ctrl[:, i]).max() > 0]
    assert [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in excited] == motion["joints"]["hinge"][
        "actuators"
    ]
    start_state(args, model, np.zeros(model.nq), np.zeros(model.nv))


def test_sysid_cli_fits_two_recordings(tmp_path):
    random_recording(0.05, seed=3).save(tmp_path / "quiet.npz")
    random_recording(0.05, seed=4, qpos_noise=3e-3, qvel_noise=3e-2).save(tmp_path / "noisy.npz")
    files = f"[{tmp_path / 'quiet.npz'},{tmp_path / 'noisy.npz'}]"
    result = run_sysid(files, tmp_path / "out")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "segments of 0.95 s (20 samples every 0.05 s) from 2 recordings" in result.stdout.splitlines()[0]
    lines = result.stdout[result.stdout.index("converged after") :].splitlines()
    assert lines[2].endswith("standard deviations (estimated from the residuals) per recording:")
    assert re.fullmatch(r"  .*quiet\.npz: 10 s, 201 samples, 10 segments; qpos \[0\.00.*\], qvel \[.*\]", lines[3])
    assert lines[4].startswith(f"  {tmp_path / 'noisy.npz'}: 10 s, 201 samples, 10 segments; ")
    report = json.loads((tmp_path / "out" / "sysid.json").read_text())
    assert report["parameters"][DAMPING]["estimate"] == pytest.approx(0.137, rel=0.01)
    assert (
        [r["file"] for r in report["recordings"]]
        == report["data"]
        == [
            str(tmp_path / "quiet.npz"),
            str(tmp_path / "noisy.npz"),
        ]
    )
    quiet, noisy = report["recordings"]
    assert (quiet["seconds"], quiet["samples"], quiet["segments"]) == (10.0, 201, 10)
    assert quiet["noise"]["qvel"][0] == pytest.approx(1e-2, rel=0.2)
    assert noisy["noise"]["qvel"][0] == pytest.approx(3e-2, rel=0.2) and "qpos" not in report["noise"]
    assert "quiet.npz, " in (tmp_path / "out" / "identified.xml").read_text()


def test_sysid_cli_fits_recordings_of_model_variants_and_names_them(tmp_path):
    for name, trajectory in zip(("light", "heavy"), heavy_and_light(), strict=True):
        trajectory.save(tmp_path / f"{name}.npz")
    files = f"[{tmp_path / 'light.npz'},{tmp_path / 'heavy.npz'}]"
    result = run_sysid(files, tmp_path / "out", "variants=[[],[body:pole:mass=2.0]]")
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"  .*heavy\.npz: 10 s, 201 samples, 10 segments; .*; with body:pole:mass=2\n", result.stdout)
    report = json.loads((tmp_path / "out" / "sysid.json").read_text())
    assert [r["variant"] for r in report["recordings"]] == [{}, HEAVY]
    low, high = report["parameters"][DAMPING]["ci95"]
    assert low <= 0.137 <= high
    # the identified model is the robot's: its pole keeps the model's mass, and the comment names the variant
    xml = (tmp_path / "out" / "identified.xml").read_text()
    assert f"whose values are not written here: {tmp_path / 'heavy.npz'}: body:pole:mass = 2." in xml
    assert mujoco.MjModel.from_xml_string(xml).body("pole").mass[0] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ("[[]]", r"error: variants has 1 entries for 2 recordings; give one list per recording in data's order, "
         r"\[\] for one of the model as given"),
        ("[[],body:pole:mass]", r"error: variants must hold one list of element:name:attribute=value per "
         r"recording; got \[\[\], 'body:pole:mass'\]"),
        ("[[],[body:pole:mass]]", r"error: 'body:pole:mass' is not element:name:attribute=value"),
    ],
)  # fmt: skip
def test_sysid_cli_rejects_bad_variants_in_one_line(tmp_path, variants, message):
    a = random_recording(0.05, seed=3)
    a.save(tmp_path / "a.npz")
    a.save(tmp_path / "b.npz")
    result = run_sysid(f"[{tmp_path / 'a.npz'},{tmp_path / 'b.npz'}]", tmp_path / "out", f"variants={variants}")
    assert result.returncode == 1 and not (tmp_path / "out").exists()
    assert re.fullmatch(message, result.stderr.strip())


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[]", r"error: data=\[\] names no recording; give data=<file> or data=\[<file>,<file>,...\]"),
        ("[{a},{a}]", r"error: data names the file '.*a\.npz' twice; give each recording once"),
        ("[{a},{b}]", r"error: '.*b\.npz': qpos has 2 columns but the model has nq=1"),
    ],
)
def test_sysid_cli_rejects_bad_lists_of_recordings_in_one_line(tmp_path, data, message):
    a = random_recording(0.05, seed=3)
    a.save(tmp_path / "a.npz")
    Trajectory(a.time, np.repeat(a.qpos, 2, axis=1), a.qvel, a.ctrl).save(tmp_path / "b.npz")
    result = run_sysid(data.format(a=tmp_path / "a.npz", b=tmp_path / "b.npz"), tmp_path / "out")
    assert result.returncode == 1 and not (tmp_path / "out").exists()
    assert re.fullmatch(message, result.stderr.strip())
