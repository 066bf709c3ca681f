"""A robot's own CSV log through a column map (shac/sysid/columns.py), and the identified model written
back as MJCF (shac/sysid/mjcf.py, launch/sysid.py's identified.xml)."""

import json
import math
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest

from envs.physics.parameters import ModelParameter
from shac.sysid.columns import load_csv
from shac.sysid.mjcf import identified_xml
from shac.sysid.recording import Trajectory, random_excitation, record
from tests.forked_python import run_python

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "envs" / "assets"
PENDULUM = mujoco.MjModel.from_xml_path(str(ASSETS / "pendulum.xml"))
ARM = mujoco.MjModel.from_xml_path(str(ASSETS / "arm.xml"))
PENDULUM_MAP = {
    "time": "t_ms",
    "qpos": {"hinge": "hinge_pos_deg"},
    "qvel": {"hinge": "hinge_vel_dps"},
    "ctrl": {"torque": "torque_cmd"},
}
PENDULUM_UNITS = {"time": "ms", "angle": "deg", "angular_velocity": "deg/s"}
# a hinge and a slide, listed in the model's order slide first; a motor and a position servo
MIXED = mujoco.MjModel.from_xml_string("""
<mujoco><option timestep="0.01"/><worldbody>
  <body><joint name="rail" type="slide" axis="1 0 0"/><geom type="box" size="0.1 0.1 0.1" mass="1"/>
    <body><joint name="elbow" type="hinge" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 0.3" size="0.02"/>
    </body></body></worldbody>
  <actuator><motor name="push" joint="rail"/><position name="servo" joint="elbow" kp="10"/></actuator>
</mujoco>""")


def write_csv(path, header, rows):
    path.write_text(",".join(header) + "\n" + "".join(",".join(str(v) for v in row) + "\n" for row in rows))
    return path


def pendulum_log(path, trajectory):
    """`trajectory` as a robot might log it: ms, degrees, degrees per second, own names, an extra column."""
    header = ["temperature_c", "torque_cmd", "t_ms", "hinge_vel_dps", "hinge_pos_deg"]
    rows = zip(
        np.full(len(trajectory.time), 31.5),
        trajectory.ctrl[:, 0],
        trajectory.time * 1e3,
        np.degrees(trajectory.qvel[:, 0]),
        np.degrees(trajectory.qpos[:, 0]),
        strict=True,
    )
    return write_csv(path, header, [[repr(float(v)) for v in row] for row in rows])


def test_a_log_in_degrees_and_ms_reads_as_the_native_trajectory(tmp_path):
    t = np.arange(101) * 0.01
    native = Trajectory(time=t, qpos=np.pi + np.sin(t), qvel=np.cos(t), ctrl=0.5 * np.sin(3 * t))
    table = np.column_stack([native.time, native.qpos, native.qvel, native.ctrl])
    np.savetxt(tmp_path / "native.csv", table, delimiter=",", header="time,qpos_0,qvel_0,ctrl_0", comments="")
    reference = Trajectory.load(tmp_path / "native.csv")
    mapped = Trajectory.load(pendulum_log(tmp_path / "log.csv", native), PENDULUM, PENDULUM_MAP, PENDULUM_UNITS)
    for name in ("time", "qpos", "qvel", "ctrl"):
        np.testing.assert_allclose(getattr(mapped, name), getattr(reference, name), rtol=1e-12, atol=1e-12)
    mapped.check(PENDULUM.nq, PENDULUM.nv, PENDULUM.nu)
    # by hand: 1500 ms -> 1.5 s, 90 deg -> pi/2, 180 deg/s -> pi rad/s, a motor's command as logged
    write_csv(tmp_path / "hand.csv", ["t_ms", "hinge_pos_deg", "hinge_vel_dps", "torque_cmd"], [[1500, 90, 180, 0.25]])
    hand = load_csv(tmp_path / "hand.csv", PENDULUM, PENDULUM_MAP, PENDULUM_UNITS)
    assert (hand.time[0], hand.qpos[0, 0], hand.qvel[0, 0], hand.ctrl[0, 0]) == pytest.approx(
        (1.5, math.pi / 2, math.pi, 0.25)
    )


def test_units_follow_the_joint_type_and_arrays_follow_the_models_order(tmp_path):
    # the model's qpos order is rail (slide), elbow (hinge); the map lists them the other way round
    columns = {
        "time": "t_us",
        "qpos": {"elbow": "elbow_deg", "rail": "rail_mm"},
        "qvel": {"elbow": "elbow_rpm", "rail": "rail_mm_s"},
        "ctrl": {"servo": "servo_deg", "push": "push_n"},
    }
    units = {"time": "us", "angle": "deg", "angular_velocity": "rpm", "linear": "mm", "ctrl": {"servo": "deg"}}
    header = ["t_us", "rail_mm", "rail_mm_s", "elbow_deg", "elbow_rpm", "push_n", "servo_deg"]
    path = write_csv(
        tmp_path / "log.csv", header, [[0, 250, -40, 90, 60, 3.0, -45], [10000, 260, -30, 180, 30, 2.0, 45]]
    )
    log = load_csv(path, MIXED, columns, units)
    np.testing.assert_allclose(log.time, [0.0, 0.01])
    np.testing.assert_allclose(log.qpos, [[0.25, math.pi / 2], [0.26, math.pi]])
    np.testing.assert_allclose(log.qvel, [[-0.04, 2 * math.pi], [-0.03, math.pi]])
    np.testing.assert_allclose(log.ctrl, [[3.0, -math.pi / 4], [2.0, math.pi / 4]])  # push in N, servo in rad


def test_a_six_joint_arm_log_with_servo_commands_in_degrees(tmp_path):
    joints = [ARM.joint(j).name for j in range(ARM.njnt)]
    columns = {
        "time": "t_ms",
        "qpos": {j: f"{j}_pos_deg" for j in reversed(joints)},
        "qvel": {j: f"{j}_vel_dps" for j in joints},
        "ctrl": {j: f"{j}_cmd_deg" for j in joints},  # each actuator is named after its joint
    }
    header = ["t_ms", *(f"{j}_{kind}" for j in joints for kind in ("pos_deg", "vel_dps", "cmd_deg"))]
    rows = [[20 * k, *(v for j in range(6) for v in (10 * j + k, -5 * j, 10 * j - k))] for k in range(3)]
    units = {"time": "ms", "angle": "deg", "angular_velocity": "deg/s", "ctrl": "deg"}
    log = load_csv(write_csv(tmp_path / "arm.csv", header, rows), ARM, columns, units)
    log.check(ARM.nq, ARM.nv, ARM.nu)
    np.testing.assert_allclose(log.time, [0.0, 0.02, 0.04])
    np.testing.assert_allclose(log.qpos[1], np.radians([10 * j + 1 for j in range(6)]))
    np.testing.assert_allclose(log.qvel[0], np.radians([-5 * j for j in range(6)]))
    np.testing.assert_allclose(log.ctrl[2], np.radians([10 * j - 2 for j in range(6)]))


GOOD_ROWS = [[0, 10, 1, 0.1], [10, 11, 2, 0.2], [20, 12, 3, 0.3]]


@pytest.mark.parametrize(
    ("columns", "units", "rows", "message"),
    [
        (
            {},
            {},
            [[0, 10, 1, 0.1], [10, 11, 2, 0.2], [10, 12, 3, 0.3]],
            r"^time column 't_ms' of '.*log\.csv' does not increase: row 2 \(line 4, 10\) follows row 1 \(10\)",
        ),
        (
            {"qvel": {"hinge": "hinge_vel"}, "ctrl": {"torque": "cmd"}},
            {},
            GOOD_ROWS,
            r"^'.*log\.csv' has no column 'hinge_vel', 'cmd' \(named in the column map\); "
            r"its header: t_ms, hinge_pos_deg, hinge_vel_dps, torque_cmd$",
        ),
        (
            {"qpos": {"hinge": "hinge_pos_deg", "knee": "knee_pos"}},
            {},
            GOOD_ROWS,
            r"^columns\.qpos names joints not in the model: knee; the model's joints: hinge$",
        ),
        (
            {"ctrl": {"motor": "torque_cmd"}},
            {},
            GOOD_ROWS,
            r"^columns\.ctrl names actuators not in the model: motor; the model's actuators: torque$",
        ),
        (
            {"qpos": {"hinj": "hinge_pos_deg"}},
            {},
            GOOD_ROWS,
            r"^columns\.qpos names joints not in the model: hinj; the model's joints: hinge$",
        ),
        (
            {"qvel": {"knee": "hinge_vel_dps"}},
            {},
            GOOD_ROWS,
            r"^columns\.qvel names joints not in the model: knee; the model's joints: hinge$",
        ),
        ({"time": None}, {}, GOOD_ROWS, r"^columns\.time must name the time column, e\.g\. time: t_ms; got None$"),
        (
            {"qpos": {"hinge:hinge_pos_deg": None}},
            {},
            GOOD_ROWS,
            r"^columns\.qpos\.hinge:hinge_pos_deg has no column name; write name: column, with a space after ':'$",
        ),
        ({}, {"angle": "degrees"}, GOOD_ROWS, r"^units\.angle is 'degrees'; accepted: rad \| deg$"),
        ({}, {"speed": "rpm"}, GOOD_ROWS, r"^units has unknown quantity 'speed'; accepted: time, angle, "),
        (
            {"time:t_ms": None},
            {},
            GOOD_ROWS,
            r"^columns has unknown key 'time:t_ms'; accepted: time, qpos, qvel, ctrl \(write key: value, with a space",
        ),
        (
            {},
            {"ctrl": "deg"},
            GOOD_ROWS,
            r"^units\.ctrl deg applies to position servos on hinge joints; actuator 'torque' is not one",
        ),
        (
            {},
            {},
            [[0, 10, 1, 0.1], [10, "n/a", 2, 0.2]],
            r"^row 1 \(line 3\) of '.*log\.csv', column 'hinge_pos_deg', holds 'n/a', not a number$",
        ),
        (
            {},
            {},
            [[0, 10, 1, 0.1], [10, 11, 2]],
            r"^row 1 \(line 3\) of '.*log\.csv' has 3 fields but the header has 4$",
        ),
    ],
    ids=[
        "time_back",
        "no_column",
        "joint_not_in_model",
        "actuator_not_in_model",
        "joint_unmapped",
        "velocity_of_a_joint_not_in_model",
        "no_time",
        "yaml_without_space",
        "unit",
        "quantity",
        "flow_yaml_without_space",
        "ctrl_deg_on_a_motor",
        "not_a_number",
        "short_row",
    ],
)
def test_bad_column_maps_and_logs_fail_in_one_line(tmp_path, columns, units, rows, message):
    path = write_csv(tmp_path / "log.csv", ["t_ms", "hinge_pos_deg", "hinge_vel_dps", "torque_cmd"], rows)
    with pytest.raises(ValueError, match=message) as error:
        load_csv(path, PENDULUM, PENDULUM_MAP | columns, PENDULUM_UNITS | units)
    assert "\n" not in str(error.value)


def test_a_joint_left_out_of_the_map_or_a_free_joint_fails_in_one_line(tmp_path):
    path = write_csv(tmp_path / "log.csv", ["t", "q", "v", "u"], [[0, 0, 0, 0]])
    partial = {"time": "t", "qpos": {"elbow": "q"}, "qvel": {"elbow": "v", "rail": "v"}, "ctrl": {"push": "u"}}
    with pytest.raises(ValueError, match=r"^joints of the model without a position column \(columns\.qpos\): rail$"):
        load_csv(path, MIXED, partial)
    partial |= {"qpos": {"elbow": "q", "rail": "q"}}
    with pytest.raises(ValueError, match=r"^actuators of the model without a control column \(columns\.ctrl\): servo$"):
        load_csv(path, MIXED, partial)
    free = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><freejoint name="root"/><geom size="0.1"/></body></worldbody></mujoco>'
    )
    columns = {"time": "t", "qpos": {"root": "q"}, "qvel": {"root": "v"}}  # no actuators, no ctrl
    with pytest.raises(ValueError, match=r"^joint 'root' is a free joint; a column map takes hinge and slide joints"):
        load_csv(path, free, columns)
    with pytest.raises(ValueError, match=r"^units are given but no column map"):
        Trajectory.load(path, PENDULUM, None, {"time": "ms"})


# --- identified.xml ---


ARM_VALUES = {
    "joint:elbow_pitch:damping": 0.4321234,
    "joint:elbow_pitch:frictionloss": 0.0777,
    "joint:wrist_roll:armature": 0.031,
    "joint:wrist_roll:stiffness": 1.5,
    "joint:wrist_roll:springref": 0.2,
    "joint:wrist_roll:limit_timeconst": 0.03,
    "body:forearm:mass": 1.3,
    "body:hand:ipos_z": 0.045,
    "body:upper_arm:spread_x": 0.05,
    "geom:forearm:friction": 0.9,
    "actuator:elbow_pitch:kp": 123.456789,
    "actuator:wrist_pitch:kv": 2.5,
    "actuator:base_yaw:gear": 1.25,
}


def test_identified_mjcf_compiles_to_the_fitted_values(tmp_path):
    text = identified_xml(mujoco.MjSpec.from_file(str(ASSETS / "arm.xml")), ARM, ARM_VALUES, comment="fit -- 1")
    assert text.startswith("<!--\nfit - - 1\n-->\n<mujoco")
    (tmp_path / "identified.xml").write_text(text)
    model = mujoco.MjModel.from_xml_path(str(tmp_path / "identified.xml"))
    elbow, wrist_roll = model.joint("elbow_pitch"), model.joint("wrist_roll")
    servo, forearm = model.actuator("elbow_pitch").id, model.body("forearm").id
    close = {"rel": 1e-5}  # MuJoCo's XML writer keeps 6 significant digits
    assert model.dof_damping[elbow.dofadr[0]] == pytest.approx(0.4321234, **close)
    assert model.dof_frictionloss[elbow.dofadr[0]] == pytest.approx(0.0777, **close)
    assert model.actuator_gainprm[servo, 0] == pytest.approx(123.456789, **close)
    assert model.actuator_biasprm[servo, 1] == pytest.approx(-123.456789, **close)
    assert model.actuator_biasprm[servo, 2] == pytest.approx(-10.0)  # its kv, unchanged
    assert model.actuator_biasprm[model.actuator("wrist_pitch").id, 2] == pytest.approx(-2.5, **close)
    assert model.actuator_gear[model.actuator("base_yaw").id, 0] == pytest.approx(1.25, **close)
    assert model.dof_armature[wrist_roll.dofadr[0]] == pytest.approx(0.031, **close)
    assert model.jnt_stiffness[wrist_roll.id] == pytest.approx(1.5, **close)
    assert model.qpos_spring[wrist_roll.qposadr[0]] == pytest.approx(0.2, **close)
    assert model.jnt_solref[wrist_roll.id].tolist() == pytest.approx([0.03, 1.0], **close)
    assert model.geom_friction[model.geom("forearm").id, 0] == pytest.approx(0.9, **close)
    # the mass comes with the inertia scaled by the same ratio, as the fit wrote it
    assert model.body_mass[forearm] == pytest.approx(1.3, **close)
    np.testing.assert_allclose(model.body_inertia[forearm], ARM.body_inertia[forearm] * 1.3, rtol=1e-5)
    # a centre of mass moves alone: the hand's mass and inertia stay the model's
    hand = model.body("hand").id
    np.testing.assert_allclose(model.body_ipos[hand], [*ARM.body_ipos[hand][:2], 0.045], rtol=1e-5, atol=1e-9)
    assert model.body_mass[hand] == pytest.approx(ARM.body_mass[hand], **close)
    np.testing.assert_allclose(model.body_inertia[hand], ARM.body_inertia[hand], rtol=1e-5)
    # a spread takes its inertia with it (the moments about the other two axes), the mass stays
    upper_arm = model.body("upper_arm").id
    assert ModelParameter.parse("body:upper_arm:spread_x", model).read(model) == pytest.approx(0.05, **close)
    assert model.body_mass[upper_arm] == pytest.approx(ARM.body_mass[upper_arm], **close)
    # everything else is the model as it was
    assert model.dof_damping[model.joint("base_yaw").dofadr[0]] == ARM.dof_damping[0]
    assert model.opt.timestep == ARM.opt.timestep and model.nq == ARM.nq


def test_identified_mjcf_writes_a_contact_pairs_frictions():
    xml = """<mujoco><worldbody><geom name="floor" type="plane" size="1 1 0.1"/><body name="box" pos="0 0 0.05">
             <freejoint/><geom name="box" type="box" size="0.05 0.05 0.05" mass="1"/></body></worldbody>
             <contact><pair name="sliding" geom1="floor" geom2="box" friction="0.5 0.5 0.005 0.0001 0.0001"/>
             </contact></mujoco>"""
    spec = mujoco.MjSpec.from_string(xml)
    values = {"pair:sliding:friction": 0.321, "pair:sliding:torsional_friction": 0.004}
    written = mujoco.MjModel.from_xml_string(identified_xml(spec, spec.compile(), values))
    np.testing.assert_allclose(written.pair_friction, [[0.321, 0.321, 0.004, 0.0001, 0.0001]], rtol=1e-5)


def test_identified_mjcf_writes_angles_in_the_mjcfs_units_and_refuses_what_it_cannot_express():
    xml = """<mujoco><compiler angle="degree" {inertia}/><worldbody><body name="link">
             <joint name="hinge" axis="0 1 0" stiffness="1" springref="10"/>
             <geom type="capsule" fromto="0 0 0 0 0 0.5" size="0.02" mass="1"/></body></worldbody></mujoco>"""
    spec = mujoco.MjSpec.from_string(xml.format(inertia=""))
    text = identified_xml(spec, spec.compile(), {"joint:hinge:springref": 0.3})
    written = mujoco.MjModel.from_xml_string(text)
    assert written.qpos_spring[0] == pytest.approx(0.3, rel=1e-5)  # radians, though the MJCF speaks degrees
    spec = mujoco.MjSpec.from_string(xml.format(inertia='inertiafromgeom="true"'))
    with pytest.raises(ValueError, match=r'^cannot write body:link:mass as MJCF: .*inertiafromgeom="true"'):
        identified_xml(spec, spec.compile(), {"body:link:mass": 2.0})
    # an MJCF that does not compile to the fit's model (here: another time step) writes nothing
    model = mujoco.MjModel.from_xml_path(str(ASSETS / "pendulum.xml"))
    model.opt.timestep = 0.005
    with pytest.raises(ValueError, match=r"^the MJCF written back has opt\.timestep 0\.01, the fitted model 0\.005$"):
        identified_xml(mujoco.MjSpec.from_file(str(ASSETS / "pendulum.xml")), model, {"joint:hinge:damping": 0.1})


def test_an_envs_spec_carries_its_physics_options_and_time_step():
    import envs

    env = envs.make("pendulum_swingup", physics={"joint:hinge:frictionloss": 0.3}, substeps=10)
    model = env.mjcf_spec().compile()
    assert model.opt.timestep == pytest.approx(0.005) == env.mj_model.opt.timestep
    assert model.dof_frictionloss[0] == pytest.approx(0.3)
    written = mujoco.MjModel.from_xml_string(
        identified_xml(env.mjcf_spec(), env.mj_model, {"joint:hinge:damping": 0.2})
    )
    assert (written.dof_damping[0], written.dof_frictionloss[0], written.opt.timestep) == pytest.approx(
        (0.2, 0.3, 0.005)
    )


def test_sysid_cli_fits_a_robot_log_and_writes_identified_xml(tmp_path):
    # 10 s of smooth random torques every 0.05 s, damping 0.137, logged in ms, degrees and deg/s by a clock
    # that stamps each sample up to 2 ms (4% of the spacing) late or early
    rng = np.random.default_rng(3)
    truth = mujoco.MjModel.from_xml_path(str(ASSETS / "pendulum.xml"))
    truth.dof_damping[0] = 0.137
    ctrl = random_excitation(10.0, 0.05, 1, rng)
    trajectory = record(truth, ctrl, np.array([np.pi]), np.array([0.0]), 0.05, 1e-3, 1e-2, rng)
    stamps = trajectory.time + rng.uniform(-0.002, 0.002, len(trajectory.time))
    pendulum_log(tmp_path / "log.csv", Trajectory(stamps, trajectory.qpos, trajectory.qvel, trajectory.ctrl))
    columns = "\n".join(f"  {k}: {json.dumps(v)}" for k, v in PENDULUM_MAP.items())
    (tmp_path / "map.yaml").write_text(f"columns:\n{columns}\nunits:\n  time: ms\n  angle: deg\n")
    command = ["launch/sysid.py", f"data={tmp_path / 'log.csv'}", "env=pendulum_swingup"]
    command += ["params=[joint:hinge:damping]", "method=finite_difference", "compare_cost=false"]
    command += [f"column_map={tmp_path / 'map.yaml'}", "units.angular_velocity=deg/s", f"out={tmp_path / 'out'}"]
    bad = run_python(*command, "columns.qvel.hinge=hinge_vel")
    assert bad.returncode == 1 and not (tmp_path / "out").exists()
    assert re.fullmatch(
        r"error: '.*log\.csv' has no column 'hinge_vel' \(named in the column map\); its header: "
        r"temperature_c, torque_cmd, t_ms, hinge_vel_dps, hinge_pos_deg",
        bad.stderr.strip(),
    )
    result = run_python(*command, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    jitter = re.search(
        r"its time stamps are up to (\S+)% off even spacing .* evenly spaced every (\S+) s", result.stdout
    )
    assert 7.0 < float(jitter[1]) <= 8.0 and float(jitter[2]) == pytest.approx(0.05, rel=1e-3)  # 2 ms at each end
    report = json.loads((tmp_path / "out" / "sysid.json").read_text())
    assert report["recordings"][0]["jitter"] == pytest.approx(float(jitter[1]) / 100, abs=5e-4)
    estimate = report["parameters"]["joint:hinge:damping"]["estimate"]
    assert estimate == pytest.approx(0.137, rel=0.01)
    assert report["units"]["angular_velocity"] == "deg/s" and report["identified_xml"]["written"] is True
    model_line, time_line = result.stdout.splitlines()[-2:]
    assert model_line == f"model: {tmp_path / 'out' / 'identified.xml'}" and time_line.startswith("fit ")
    text = (tmp_path / "out" / "identified.xml").read_text()
    assert "converged." in text and "signal:ctrl:delay: none" in text
    model = mujoco.MjModel.from_xml_path(str(tmp_path / "out" / "identified.xml"))
    assert model.dof_damping[0] == pytest.approx(estimate, rel=1e-5)
    # the same log as a robot with an encoder alone would give it: the map without velocities
    columns = "\n".join(f"  {k}: {json.dumps(v)}" for k, v in PENDULUM_MAP.items() if k != "qvel")
    (tmp_path / "positions.yaml").write_text(f"columns:\n{columns}\nunits:\n  time: ms\n  angle: deg\n")
    command = [*command[:-3], f"column_map={tmp_path / 'positions.yaml'}", f"out={tmp_path / 'positions'}"]
    result = run_python(*command, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "; velocities not measured (hinge): the positions alone are fitted there" in result.stdout
    assert re.search(r"standard deviations \(estimated[^)]*\): qpos \[0\.00\d+\], qvel \[not measured\]", result.stdout)
    report = json.loads((tmp_path / "positions" / "sysid.json").read_text())
    assert report["converged"] and report["noise"]["qvel"] == [None]
    entry = report["parameters"]["joint:hinge:damping"]
    assert entry["estimate"] == pytest.approx(0.137, rel=0.01) and entry["ci95"][0] <= 0.137 <= entry["ci95"][1]
