"""Trajectory files, the one-line checks of bad data, gaps in time, and synthetic recordings."""

import re

import mujoco
import numpy as np
import pytest

from launch import cli
from launch.record_trajectory import RecordArgs, controls, start_state
from shac.sysid.recording import Trajectory, multisine, random_excitation, record, sweep

PENDULUM_SIZES = {"nq": 1, "nv": 1, "nu": 1}


def clean(count=101, dt=0.01):
    t = np.arange(count) * dt
    return Trajectory(time=t, qpos=np.sin(t), qvel=np.cos(t), ctrl=np.zeros(count))


def with_(trajectory, **arrays):
    fields = {name: getattr(trajectory, name) for name in ("time", "qpos", "qvel", "ctrl")}
    return Trajectory(**(fields | arrays))


def test_files_round_trip_and_vectors_become_columns(tmp_path):
    trajectory = clean()
    assert trajectory.qpos.shape == (101, 1)
    trajectory.save(tmp_path / "t.npz")
    np.testing.assert_array_equal(Trajectory.load(tmp_path / "t.npz").qvel, trajectory.qvel)
    table = np.column_stack([trajectory.time, trajectory.qpos, trajectory.qvel, trajectory.ctrl])
    np.savetxt(tmp_path / "t.csv", table, delimiter=",", header="time,qpos_0,qvel_0,ctrl_0", comments="")
    np.testing.assert_allclose(Trajectory.load(tmp_path / "t.csv").qpos, trajectory.qpos)
    (tmp_path / "t.txt").write_text("time qpos\n")
    with pytest.raises(ValueError, match="unsupported trajectory file"):
        Trajectory.load(tmp_path / "t.txt")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda t: with_(t, qpos=np.where(np.isin(np.arange(101), [12, 13]), np.nan, t.qpos[:, 0])),
            r"^qpos has non-finite values \(nan or inf\) in rows 12, 13 of 101; remove or fill them$",
        ),
        (
            lambda t: with_(t, ctrl=np.full(101, np.inf)),
            r"^ctrl has non-finite values \(nan or inf\) in rows 0, 1, 2, 3, 4 \.\.\. \(101 rows\) of 101",
        ),
        (
            lambda t: with_(t, qpos=t.qpos[:99]),
            r"^qpos has 99 rows but time has 101; every array needs one row per time stamp$",
        ),
        (lambda t: with_(t, ctrl=np.zeros(120)), r"^ctrl has 120 rows but time has 101"),
        (
            lambda t: with_(t, qpos=np.zeros((101, 3))),
            r"^qpos has 3 columns but the model has nq=1$",
        ),
        (lambda t: with_(t, qvel=np.zeros((101, 1, 2))), r"^qvel must be \[T, nv\], got shape \(101, 1, 2\)$"),
        (
            lambda t: Trajectory(time=[0.0], qpos=[[0.0]], qvel=[[0.0]], ctrl=[[0.0]]),
            r"^the recording has 1 sample\(s\); system identification needs a trajectory$",
        ),
        (
            lambda t: with_(t, time=np.concatenate([t.time[:50], t.time[50:] - 0.005])),
            r"^time stamps are unevenly spaced: rows 49 and 50 are 0\.005 s apart, the usual spacing is 0\.01 s",
        ),
        (lambda t: with_(t, time=t.time[::-1]), r"^time must increase"),
    ],
    ids=["nan", "inf", "short", "long", "wide", "3d", "one_sample", "uneven", "decreasing"],
)
def test_bad_data_fails_in_one_line(change, message):
    with pytest.raises(ValueError, match=message) as error:
        change(clean()).check(**PENDULUM_SIZES)
    assert "\n" not in str(error.value)


def test_a_velocity_nobody_measured_is_nan_throughout_and_only_so(tmp_path):
    hinge = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><joint name="hinge" axis="0 1 0"/><geom size="0.1" mass="1"/></body></worldbody>'
        '<actuator><motor joint="hinge"/></actuator></mujoco>'
    )
    trajectory = clean()
    np.savez(tmp_path / "positions.npz", time=trajectory.time, qpos=trajectory.qpos, ctrl=trajectory.ctrl)
    table = np.column_stack([trajectory.time, trajectory.qpos, trajectory.ctrl])
    np.savetxt(tmp_path / "positions.csv", table, delimiter=",", header="time,qpos_0,ctrl_0", comments="")
    for name in ("positions.npz", "positions.csv"):
        blind = Trajectory.load(tmp_path / name, hinge)
        assert blind.qvel.shape == (101, 1) and np.isnan(blind.qvel).all()
        assert blind.velocity_measured.tolist() == [False]
        blind.check(**PENDULUM_SIZES)
        with pytest.raises(ValueError, match=r"has no velocities \(qvel\); reading it needs the model"):
            Trajectory.load(tmp_path / name)
    assert clean().velocity_measured.tolist() == [True]
    partly = with_(trajectory, qvel=np.where(np.arange(101) == 7, np.nan, trajectory.qvel[:, 0]))
    with pytest.raises(
        ValueError, match=r"^qvel has non-finite values \(nan or inf\) in rows 7 of 101; remove or fill"
    ):
        partly.check(**PENDULUM_SIZES)


def test_unmeasured_velocities_are_estimated_from_the_positions_within_each_stretch():
    # x = sin t sampled every 0.01 s, with a gap after row 40: central differences are within dt^2 / 6 of cos t
    # inside a stretch, one-sided ones within dt / 2 at its ends; a measured velocity is kept as it is
    slide = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><joint name="x" type="slide"/><geom size="0.1" mass="1"/></body>'
        '<body><joint name="y" type="slide"/><geom size="0.1" mass="1"/></body></worldbody></mujoco>'
    )
    time = np.arange(101) * 0.01
    time[40:] += 0.5
    recorded = Trajectory(
        time=time,
        qpos=np.column_stack([np.sin(time), np.sin(time)]),
        qvel=np.column_stack([np.full(101, np.nan), np.full(101, 7.0)]),
        ctrl=np.zeros((101, 0)),
    )
    estimated = recorded.with_velocities_estimated(slide)
    inside = np.setdiff1d(np.arange(101), [0, 39, 40, 100])
    np.testing.assert_allclose(estimated.qvel[inside, 0], np.cos(time[inside]), atol=0.01**2 / 6)
    np.testing.assert_allclose(estimated.qvel[[0, 39, 40, 100], 0], np.cos(time[[0, 39, 40, 100]]), atol=0.01 / 2)
    # the ends of a stretch differ from their neighbour's central difference: the gap is not differenced across
    assert abs(estimated.qvel[39, 0] - np.cos(time[39])) > 0.01**2
    np.testing.assert_array_equal(estimated.qvel[:, 1], 7.0)
    measured = Trajectory(time=time, qpos=recorded.qpos, qvel=np.ones((101, 2)), ctrl=recorded.ctrl)
    assert measured.with_velocities_estimated(slide) is measured


def test_gaps_in_time_split_the_recording_into_stretches():
    trajectory = clean()
    clean().check(**PENDULUM_SIZES)
    assert trajectory.stretches() == [slice(0, 101)]
    # rows 40 and 70 start after gaps of 0.5 s and 0.015 s: three stretches of 40, 30 and 31 rows
    time = trajectory.time.copy()
    time[40:] += 0.49
    time[70:] += 0.005
    gapped = with_(trajectory, time=time)
    gapped.check(**PENDULUM_SIZES)
    assert gapped.dt == pytest.approx(0.01)
    assert gapped.stretches() == [slice(0, 40), slice(40, 70), slice(70, 101)]


def test_a_clock_that_rounds_to_milliseconds_keeps_one_stretch_at_its_own_spacing():
    # 60 Hz stamped in whole milliseconds: steps of 16 and 17 ms; one sample dropped after row 300 (a gap)
    time = np.round(np.arange(601) * 1000 / 60) / 1000
    rounded = with_(clean(601), time=time)
    assert rounded.stretches() == [slice(0, 601)]
    assert rounded.dt == pytest.approx(1 / 60, rel=1e-4) and rounded.jitter == pytest.approx(0.04, abs=0.002)
    assert clean().jitter < 1e-12
    dropped = with_(clean(600), time=np.delete(time, 301))
    assert dropped.stretches() == [slice(0, 301), slice(301, 600)]


def test_recordings_concatenate_as_stretches_separated_by_gaps():
    first, second = clean(50), with_(clean(31), time=5.0 + np.arange(31) * 0.01)  # its own clock, from 5 s
    time = second.time.copy()
    time[20:] += 0.3  # a gap of its own
    joined = Trajectory.concatenate([first, with_(second, time=time)])
    joined.check(**PENDULUM_SIZES)
    # recording 2 starts 10 spacings after recording 1 ends; its own gap stays
    assert joined.stretches() == [slice(0, 50), slice(50, 70), slice(70, 81)]
    assert joined.time[50] - joined.time[49] == pytest.approx(0.1) and joined.dt == pytest.approx(0.01)
    np.testing.assert_array_equal(joined.qpos, np.concatenate([first.qpos, second.qpos]))
    assert Trajectory.concatenate([first]) is first


def test_recordings_follow_the_c_simulator_and_add_the_requested_noise():
    import mujoco

    xml = """<mujoco><option timestep="0.01"/><worldbody><body><joint name="slide" type="slide" axis="1 0 0"/>
             <geom type="sphere" size="0.1" mass="2"/></body></worldbody>
             <actuator><motor joint="slide" gear="1"/></actuator></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    ctrl = np.full((11, 1), 4.0)  # a 2 kg free mass pushed by 4 N: a = 2 m/s^2
    exact = record(model, ctrl, np.zeros(1), np.zeros(1), dt=0.02)
    # semi-implicit Euler: v_k = a * 0.01 k; after 10 samples of 2 steps (k = 20) v = 0.4 m/s
    assert exact.qvel[-1, 0] == pytest.approx(0.4)
    # x_k = sum_{j<=k} v_j * 0.01 = a * 0.01^2 * k (k + 1) / 2 = 0.0002 * 20 * 21 / 2 = 0.042 m
    assert exact.qpos[-1, 0] == pytest.approx(0.042)
    noisy = record(model, np.zeros((20001, 1)), np.zeros(1), np.zeros(1), 0.01, 0.1, 0.5, seed=3)
    assert noisy.qpos.std() == pytest.approx(0.1, rel=0.03) and noisy.qvel.std() == pytest.approx(0.5, rel=0.03)


def test_excitation_signals_are_bounded_and_smooth():
    signal = multisine(2.0, 0.01, [0.8, 0.4], [2.0, 5.3])
    assert signal.shape == (201, 1) and np.abs(signal).max() <= 1.0
    controls = random_excitation(10.0, 0.01, 2, np.random.default_rng(0), max_hz=1.0)
    assert controls.shape == (1001, 2) and np.abs(controls).max() <= 1.0
    assert 0.3 < controls.std() < 0.8
    # at most 1 Hz with amplitudes <= ~1: a step of 0.01 s changes a control by well under 0.1
    assert np.abs(np.diff(controls, axis=0)).max() < 0.1


def test_a_recorded_delay_shifts_the_commands_and_records_them_as_sent():
    import mujoco

    xml = """<mujoco><option timestep="0.01"/><worldbody><body><joint name="slide" type="slide" axis="1 0 0"/>
             <geom type="sphere" size="0.1" mass="2"/></body></worldbody>
             <actuator><motor joint="slide" gear="1"/></actuator></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    ctrl = np.sin(np.arange(21) * 0.3)[:, None]
    # a delay of one sample (2 physics steps of 0.01 s): the commands one row later, the first held until then
    late = record(model, ctrl, np.zeros(1), np.zeros(1), dt=0.02, delay=0.02)
    shifted = record(model, np.concatenate([ctrl[:1], ctrl[:-1]]), np.zeros(1), np.zeros(1), dt=0.02)
    np.testing.assert_array_equal(late.qvel, shifted.qvel)
    np.testing.assert_array_equal(late.ctrl, ctrl)  # the column holds the commands as sent
    # half a sample late: for one physics step (0.01 s) of each sample the previous command still acts
    half = record(model, ctrl, np.zeros(1), np.zeros(1), dt=0.02, delay=0.01)
    velocity = 0.01 * np.cumsum(np.concatenate([ctrl[:1], np.repeat(ctrl[:-1], 2, axis=0)[:-1]]) / 2.0)
    np.testing.assert_allclose(half.qvel[1:, 0], velocity[1::2], atol=1e-12)
    with pytest.raises(ValueError, match=r"^true delay signal:ctrl:delay=-0.01 s must be >= 0"):
        record(model, ctrl, np.zeros(1), np.zeros(1), dt=0.02, delay=-0.01)


def test_a_sweep_passes_from_its_start_to_its_end_frequency_exponentially():
    # 0.05 to 0.5 Hz over 20 s: a tenfold rise, the frequency at t is 0.05 * 10 ** (t / 20) Hz
    signal = sweep(20.0, 0.01, 0.5, 0.05, 0.5)[:, 0]
    assert signal.shape == (2001,) and np.abs(signal).max() == pytest.approx(0.5, abs=1e-3)
    t = np.arange(2001) * 0.01
    crossings = t[1:][np.diff(np.sign(signal)) != 0]  # every half period
    middles, halves = (crossings[1:] + crossings[:-1]) / 2, np.diff(crossings)
    np.testing.assert_allclose(1 / (2 * halves), 0.05 * 10 ** (middles / 20), rtol=0.05)
    # equal frequencies: a plain sine; an offset shifts it before the clip to [-1, 1]
    np.testing.assert_allclose(sweep(2.0, 0.01, 0.3, 1.0, 1.0)[:, 0], 0.3 * np.sin(2 * np.pi * t[:201]), atol=1e-12)
    pushed = sweep(10.0, 0.01, 1.0, 0.5, 0.5, offset=0.5)
    assert pushed.max() == 1.0 and pushed.min() == pytest.approx(-0.5, abs=1e-3)


# a slide pushed by `push` and a hinge turned by `twist`
TWO = mujoco.MjModel.from_xml_string("""
<mujoco><option timestep="0.01"/><worldbody>
  <body><joint name="x" type="slide" axis="1 0 0"/><geom type="sphere" size="0.1" mass="1"/></body>
  <body pos="1 0 0"><joint name="turn" axis="0 0 1"/><geom type="box" size="0.3 0.05 0.05" mass="1"/></body>
</worldbody><actuator><motor name="push" joint="x"/><motor name="twist" joint="turn"/></actuator></mujoco>
""")


def record_args(*argv):
    return cli.parse(RecordArgs, ["env=none", "out=none.npz", *argv], "usage")


def test_record_trajectory_options_excite_chosen_actuators_from_a_chosen_state():
    rng = np.random.default_rng(0)
    args = record_args("excitation=sweep", "sweep_hz=[0.1,1]", "sweep_amplitude=0.4", "actuators=[twist]", "seconds=5")
    ctrl = controls(args, TWO, 0.02, rng)
    assert ctrl.shape == (251, 2) and not ctrl[:, 0].any()
    np.testing.assert_array_equal(ctrl[:, 1], sweep(5.0, 0.02, 0.4, 0.1, 1.0)[:, 0])
    # a steady push with a small multisine on it, on every actuator
    steady = controls(record_args("offset=0.9", "amplitudes=[0.1]", "frequencies=[1.3]", "seconds=5"), TWO, 0.02, rng)
    np.testing.assert_array_equal(steady, np.repeat(multisine(5.0, 0.02, [0.1], [1.3], 0.9), 2, axis=1))
    assert steady.min() >= 0.8 - 1e-12
    reset = (np.array([0.1, 0.2]), np.array([0.3, 0.4]))
    qpos0, qvel0 = start_state(record_args("qvel0=[0,0]"), TWO, *reset)
    np.testing.assert_array_equal(qpos0, reset[0])
    np.testing.assert_array_equal(qvel0, [0.0, 0.0])
    qpos0, _ = start_state(record_args("qpos0=[1,3.14]"), TWO, *reset)
    np.testing.assert_array_equal(qpos0, [1.0, 3.14])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["excitation=chirp"], "unknown excitation 'chirp'; available: multisine, sweep, random"),
        (["amplitudes=[0.5]", "frequencies=[1,2]"], "amplitudes (1) and frequencies (2) differ in length"),
        (
            ["excitation=sweep", "sweep_hz=[0.05]"],
            "sweep_hz must be [start,end], two frequencies in Hz > 0 and at most 25 Hz (half the sampling rate of "
            "dt=0.02 s); got [0.05]",
        ),
        (["excitation=sweep", "sweep_hz=[0,1]"], "sweep_hz must be [start,end], two frequencies in Hz > 0"),
        (["excitation=sweep", "sweep_hz=[1,30]"], "and at most 25 Hz (half the sampling rate of dt=0.02 s); got [1.0"),
        (
            ["excitation=sweep", "sweep_amplitude=2"],
            "sweep_amplitude must be in (0, 1] (controls are clipped to [-1, 1]); got 2.0",
        ),
        (["offset=-1.5"], "offset must be within [-1, 1] (controls are clipped to [-1, 1]); got -1.5"),
        (["actuators=[pull]"], "actuators names 'pull', not an actuator of the model; its actuators: push, twist"),
        (["qpos0=[0]"], "qpos0 has 1 values but the model has nq=2"),
        (["qvel0=[0,nan]"], "qvel0 has a non-finite value: [0.0, nan]"),
    ],
)
def test_bad_record_trajectory_options_fail_in_one_line(argv, message):
    args = record_args(*argv)
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        controls(args, TWO, 0.02, np.random.default_rng(0))
        start_state(args, TWO, np.zeros(2), np.zeros(2))
    assert "\n" not in str(error.value)
