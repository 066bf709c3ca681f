"""Recorded trajectories: the file format, the checks against a model, and synthetic recordings.

Data format (NPZ with these arrays, or CSV with a header naming these columns,
vector columns as `qpos_0, qpos_1, ...`):
    time: float [T], seconds, evenly spaced by a multiple of the model's time
        step (a logging clock's rounding and jitter, within `JITTER_RTOL` of
        the spacing, are taken for even spacing); a larger step between two
        rows is a gap that splits the recording into contiguous stretches.
    qpos: float [T, nq]; qvel: float [T, nv]; ctrl: float [T, nu], the control
    command sent at each sample and held to the next (applied at once, or
    after a delay `signal:ctrl:delay`: `shac.sysid.signals`).
    A velocity nobody measured is a column of nan in qvel (a file without qvel
    has every column so): the fit then weighs the positions alone there
    (`velocity_measured`, `with_velocities_estimated`).
A robot's own CSV log, with its own column names and units, reads through a
column map (`shac.sysid.columns`) into the same arrays.

`Trajectory.check` turns every way such a file can be unusable into one
`ValueError` line naming the array, the rows or the sizes, before any fitting.
`record` makes synthetic recordings with MuJoCo's C simulator (float64) and
Gaussian measurement noise, optionally with a control delay, for trying and
testing system identification; `multisine`, `sweep` (a slow or fast chirp, as
the identifiability report's advice asks for) and `random_excitation` make its
controls. `record_closed_loop` records under a feedback controller (a trained
policy) with such an excitation added, for a robot that falls without one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
from mujoco import rollout as mj_rollout

from shac.sysid import signals

ARRAYS = ("time", "qpos", "qvel", "ctrl")
SPACING_RTOL = 1e-3
"""Two sample spacings (of two recordings, or of a recording and the model's step multiple) are one when they
differ by at most this fraction."""
JITTER_RTOL = 0.25
"""Two time stamps are one sample apart when their difference is within this fraction of the spacing: a logging
clock rounds and jitters (integer milliseconds at 60 Hz step by 16 and 17 ms). A longer step is a gap, a
shorter one uneven sampling."""
JOIN_GAP_SPACINGS = 10.0
"""`Trajectory.concatenate` puts this many sample spacings between two recordings (any gap splits them)."""


@dataclass(frozen=True)
class Trajectory:
    """A recorded trajectory (see the module docstring for the format); vectors given as [T] become [T, 1]."""

    time: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    ctrl: np.ndarray

    def __post_init__(self):
        for name in ARRAYS:
            array = np.asarray(getattr(self, name), np.float64)
            if name != "time" and array.ndim == 1:
                array = array[:, None]
            object.__setattr__(self, name, array)

    @classmethod
    def load(
        cls,
        path: str | Path,
        model: mujoco.MjModel | None = None,
        columns: Mapping[str, Any] | None = None,
        units: Mapping[str, Any] | None = None,
    ) -> Trajectory:
        """Reads an NPZ or CSV file (unchecked: see `check`).

        With `columns` (and `model`), a CSV with its own column names and units:
        `shac.sysid.columns.load_csv`, which documents the column map and `units`.
        Without qvel (an NPZ without the array, a CSV without qvel_ columns) no velocity
        was measured: qvel is nan [T, model.nv], which needs `model`.
        """
        if columns:
            if model is None:
                raise ValueError("a column map needs the model whose joint and actuator names it uses")
            from shac.sysid.columns import load_csv

            return load_csv(path, model, columns, units)
        if units:
            raise ValueError(
                "units are given but no column map; the native format is in the model's units (s, rad, rad/s, m)"
            )
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no trajectory file at '{path}'")
        if path.suffix == ".npz":
            with np.load(path) as data:
                missing = {"time", "qpos", "ctrl"} - set(data.files)
                if missing:
                    raise ValueError(
                        f"'{path}' lacks arrays {sorted(missing)}; needs time, qpos, ctrl and, where measured, qvel"
                    )
                arrays = {name: data[name] for name in ARRAYS if name in data.files}
            if "qvel" not in arrays:
                arrays["qvel"] = _unmeasured(path, arrays["time"], model)
            return cls(**arrays)
        if path.suffix == ".csv":
            table = np.genfromtxt(path, delimiter=",", names=True)
            columns = table.dtype.names or ()

            def block(prefix: str) -> np.ndarray:
                names = sorted((c for c in columns if c.startswith(prefix + "_")), key=lambda c: int(c.split("_")[-1]))
                if not names:
                    raise ValueError(f"'{path}' has no {prefix}_0, {prefix}_1, ... columns")
                return np.stack([np.atleast_1d(table[c]) for c in names], axis=-1)

            if "time" not in columns:
                raise ValueError(f"'{path}' has no time column")
            time = np.atleast_1d(table["time"])
            measured = any(c.startswith("qvel_") for c in columns)
            qvel = block("qvel") if measured else _unmeasured(path, time, model)
            return cls(time=time, qpos=block("qpos"), qvel=qvel, ctrl=block("ctrl"))
        raise ValueError(f"unsupported trajectory file '{path}'; accepted: .npz, .csv")

    @classmethod
    def concatenate(cls, trajectories: Sequence[Trajectory], gap_spacings: float = JOIN_GAP_SPACINGS) -> Trajectory:
        """The recordings one after another, as the stretches of one trajectory (unchecked: `check` each first).

        Each recording is shifted in time to start `gap_spacings` sample
        spacings (of the first recording) after the previous one ends. That gap
        splits them like a gap within a recording (`stretches`): segments never
        cross from one recording to the next, and a delayed control never takes
        a command from the recording before. One recording is returned as it is.

        Args:
            trajectories: K >= 1 recordings, [T_k] time and [T_k, n] arrays each.

        Returns:
            A trajectory with T = sum T_k rows, recording k in rows sum_{j<k} T_j onwards.
        """
        if len(trajectories) == 1:
            return trajectories[0]
        gap = gap_spacings * trajectories[0].dt
        times, end = [], None
        for trajectory in trajectories:
            start = 0.0 if end is None else end + gap
            times.append(trajectory.time - trajectory.time[0] + start)
            end = times[-1][-1]
        return cls(
            time=np.concatenate(times),
            **{name: np.concatenate([getattr(t, name) for t in trajectories]) for name in ARRAYS[1:]},
        )

    def select(self, rows: np.ndarray) -> Trajectory:
        """The samples where `rows` ([T] bool) is True, at their recorded times: dropped samples leave gaps."""
        return Trajectory(**{name: getattr(self, name)[rows] for name in ARRAYS})

    def save(self, path: str | Path) -> None:
        """Writes an NPZ file."""
        np.savez(path, time=self.time, qpos=self.qpos, qvel=self.qvel, ctrl=self.ctrl)

    def check(self, nq: int, nv: int, nu: int) -> None:
        """Raises a one-line ValueError if the arrays cannot describe a model with these sizes.

        Checks, in order: `time` is one-dimensional with at least two samples,
        every array has one row per time stamp and the model's width, every
        value is finite, and time increases by one spacing or by a gap.
        """
        if self.time.ndim != 1:
            raise ValueError(f"time must be one-dimensional [T], got shape {self.time.shape}")
        count = len(self.time)
        if count < 2:
            raise ValueError(f"the recording has {count} sample(s); system identification needs a trajectory")
        widths = {"qpos": ("nq", nq), "qvel": ("nv", nv), "ctrl": ("nu", nu)}
        for name, (size_name, size) in widths.items():
            array = getattr(self, name)
            if array.ndim != 2:
                raise ValueError(f"{name} must be [T, {size_name}], got shape {array.shape}")
            if len(array) != count:
                raise ValueError(
                    f"{name} has {len(array)} rows but time has {count}; every array needs one row per time stamp"
                )
            if array.shape[1] != size:
                raise ValueError(f"{name} has {array.shape[1]} columns but the model has {size_name}={size}")
        for name in ARRAYS:
            array = getattr(self, name).reshape(count, -1)
            if name == "qvel":  # a velocity nobody measured is nan throughout
                array = array[:, self.velocity_measured]
            bad = ~np.isfinite(array).all(axis=1)
            if bad.any():
                raise ValueError(
                    f"{name} has non-finite values (nan or inf) in rows {_rows(np.flatnonzero(bad))} "
                    f"of {count}; remove or fill them"
                    + ("" if name != "qvel" else " (a velocity nobody measured is nan in every row)")
                )
        self.stretches()

    @property
    def velocity_measured(self) -> np.ndarray:
        """bool [nv]: which velocity coordinates were measured (a column of qvel that is nan throughout was not)."""
        return ~np.isnan(self.qvel).all(axis=0)

    def with_velocities_estimated(self, model: mujoco.MjModel) -> Trajectory:
        """This trajectory with every unmeasured velocity (`velocity_measured`) estimated from the positions:
        central differences of qpos within each contiguous stretch (`mj_differentiatePos`, so quaternions too),
        one-sided at a stretch's ends, and zero in a stretch of one sample. Measured velocities stay."""
        missing = ~self.velocity_measured
        if not missing.any():
            return self
        estimate = np.zeros_like(self.qvel)
        velocity = np.zeros(model.nv)
        for stretch in self.stretches():
            rows = np.arange(stretch.start, stretch.stop)
            if len(rows) < 2:
                continue
            for i in rows:
                before, after = max(i - 1, rows[0]), min(i + 1, rows[-1])
                interval = self.time[after] - self.time[before]
                mujoco.mj_differentiatePos(model, velocity, interval, self.qpos[before], self.qpos[after])
                estimate[i] = velocity
        qvel = np.where(missing, estimate, self.qvel)
        return Trajectory(time=self.time, qpos=self.qpos, qvel=qvel, ctrl=self.ctrl)

    @property
    def dt(self) -> float:
        """The sample spacing: the mean step between consecutive time stamps one sample apart (within
        `JITTER_RTOL` of the median step), so that rounded or jittered time stamps give their clock's spacing."""
        steps = np.diff(self.time)
        median = float(np.median(steps))
        one = steps[np.abs(steps - median) <= JITTER_RTOL * abs(median)]
        return float(one.mean()) if median > 0 and one.size else median

    @property
    def jitter(self) -> float:
        """The largest difference between a one-sample step and `dt`, as a fraction of `dt` (0 for even time
        stamps); the samples are taken as evenly spaced."""
        steps = np.diff(self.time)
        dt = self.dt
        one = steps[np.abs(steps - dt) <= JITTER_RTOL * dt]
        return float(np.abs(one - dt).max() / dt) if dt > 0 and one.size else 0.0

    def stretches(self) -> list[slice]:
        """The contiguous, evenly spaced stretches between gaps in `time`, in order.

        Raises:
            ValueError: time stamps that do not increase, or that are closer than
                the usual spacing (uneven sampling), naming the first such row.
        """
        steps = np.diff(self.time)
        dt = self.dt
        if dt <= 0:
            raise ValueError(f"time must increase; the median spacing is {dt:.6g} s")
        close = np.flatnonzero(steps < dt * (1 - JITTER_RTOL))
        if close.size:
            i = int(close[0])
            raise ValueError(
                f"time stamps are unevenly spaced: rows {i} and {i + 1} are {steps[i]:.6g} s apart, the usual spacing "
                f"is {dt:.6g} s ({close.size} such step(s)); resample the data evenly"
            )
        gaps = np.flatnonzero(steps > dt * (1 + JITTER_RTOL)) + 1
        bounds = [0, *gaps.tolist(), len(self.time)]
        return [slice(a, b) for a, b in itertools.pairwise(bounds)]


def _unmeasured(path: Path, time: np.ndarray, model: mujoco.MjModel | None) -> np.ndarray:
    """nan [T, nv]: the velocities of a file that has none."""
    if model is None:
        raise ValueError(f"'{path}' has no velocities (qvel); reading it needs the model, whose nv they would have")
    return np.full((len(np.atleast_1d(time)), model.nv), np.nan)


def _rows(rows: np.ndarray, shown: int = 5) -> str:
    text = ", ".join(str(r) for r in rows[:shown])
    return text + (f" ... ({len(rows)} rows)" if len(rows) > shown else "")


def simulate_mujoco(
    model: mujoco.MjModel | Sequence[mujoco.MjModel],
    qpos0: np.ndarray,
    qvel0: np.ndarray,
    ctrl: np.ndarray,
    n_substeps: int,
    threads: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Segments simulated by MuJoCo's C `rollout` (float64).

    Args:
        model: the model, or one per segment (S of them, of one size signature).
        qpos0: [S, nq], qvel0: [S, nv] start states.
        ctrl: [S, K, nu], each held for `n_substeps` steps, or [S, K, n_substeps, nu], one per physics step.
        threads: the segments are simulated on this many threads.

    Returns:
        qpos [S, K, nq] and qvel [S, K, nv] after each control.
    """
    first = model if isinstance(model, mujoco.MjModel) else model[0]
    data = mujoco.MjData(first)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    initial = np.zeros((len(qpos0), mujoco.mj_stateSize(first, spec)))
    mujoco.mj_resetData(first, data)
    for i, (q, v) in enumerate(zip(qpos0, qvel0, strict=True)):
        data.qpos[:], data.qvel[:] = q, v
        mujoco.mj_getState(first, data, initial[i], spec)
    ctrl = np.asarray(ctrl, np.float64)
    if ctrl.ndim == 4:
        controls = ctrl.reshape(ctrl.shape[0], -1, ctrl.shape[-1])
    else:
        controls = np.repeat(ctrl, n_substeps, axis=1)
    datas = [data] + [mujoco.MjData(first) for _ in range(min(threads, len(initial)) - 1)]
    states, _ = mj_rollout.rollout(model, datas if len(datas) > 1 else data, initial, controls)
    states = states[:, n_substeps - 1 :: n_substeps]
    return states[..., 1 : 1 + first.nq], states[..., 1 + first.nq : 1 + first.nq + first.nv]


def multisine(
    seconds: float, dt: float, amplitudes: list[float], frequencies: list[float], offset: float = 0.0
) -> np.ndarray:
    """An excitation signal float [T, 1] (T = seconds / dt + 1): `offset` plus a sum of sines (frequencies in
    rad/s, sine i with phase i), clipped to [-1, 1]."""
    t = np.arange(round(seconds / dt) + 1) * dt
    signal = sum(a * np.sin(f * t + i) for i, (a, f) in enumerate(zip(amplitudes, frequencies, strict=True)))
    return np.clip(offset + signal, -1.0, 1.0)[:, None]


def sweep(
    seconds: float, dt: float, amplitude: float, start_hz: float, end_hz: float, offset: float = 0.0
) -> np.ndarray:
    """A logarithmic sine sweep (chirp) float [T, 1] (T = seconds / dt + 1), clipped to [-1, 1].

    `offset + amplitude * sin(phase(t))`, the frequency rising (or falling)
    exponentially from `start_hz` at t = 0 to `end_hz` at t = `seconds`, so that
    every octave gets the same time; equal frequencies give a plain sine.
    A slow sweep moves a joint slowly (speed ~ 2 pi f x its amplitude) through
    zero speed at every reversal; a fast one moves it with large accelerations.
    """
    t = np.arange(round(seconds / dt) + 1) * dt
    rate = np.log(end_hz / start_hz) / seconds
    # phase(t) = 2 pi * integral of start_hz * exp(rate t) dt; a plain sine when the frequencies are equal
    phase = 2 * np.pi * start_hz * (np.expm1(rate * t) / rate if abs(rate) > 1e-12 else t)
    return np.clip(offset + amplitude * np.sin(phase), -1.0, 1.0)[:, None]


def random_excitation(
    seconds: float,
    dt: float,
    nu: int,
    rng: np.random.Generator,
    max_hz: float = 1.0,
    components: int = 8,
    offset: float = 0.0,
) -> np.ndarray:
    """Smooth random controls float [T, nu]: per actuator `offset` plus a sum of `components` sines.

    Frequencies are uniform in (0.05, max_hz) Hz with random phases and
    amplitudes, scaled to a standard deviation of about 0.6 and clipped to
    [-1, 1]. The signal is a function of time only, so every sampling rate sees
    the same kind of motion.
    """
    t = np.arange(round(seconds / dt) + 1) * dt
    frequencies = rng.uniform(0.05, max_hz, size=(components, nu)) * 2 * np.pi
    phases = rng.uniform(0, 2 * np.pi, size=(components, nu))
    amplitudes = rng.uniform(0.5, 1.0, size=(components, nu))
    signal = (amplitudes[None] * np.sin(frequencies[None] * t[:, None, None] + phases[None])).sum(axis=1)
    signal *= 0.6 / np.sqrt(0.5 * (amplitudes**2).sum(axis=0))[None]
    return np.clip(offset + signal, -1.0, 1.0)


Controller = Callable[[np.ndarray, np.ndarray, float, np.ndarray], np.ndarray]
"""A feedback controller: (measured qpos [nq], measured qvel [nv], time, last command [nu]) -> commands [nu]."""


def record_closed_loop(
    model: mujoco.MjModel,
    controller: Controller,
    excitation: np.ndarray,
    qpos0: np.ndarray,
    qvel0: np.ndarray,
    dt: float,
    qpos_noise: float = 0.0,
    qvel_noise: float = 0.0,
    seed: int | np.random.Generator = 0,
) -> Trajectory:
    """A trajectory from MuJoCo's C simulator under a feedback controller, with Gaussian measurement noise.

    At each sample the controller sees the measured (noisy) state, as a robot's controller does; the
    command held until the next sample is its output plus the excitation, clipped to [-1, 1], and is
    recorded as applied, so the recording is fitted as any open-loop one (its commands replayed).

    Args:
        controller: the commands for each measured state (`Controller`); the first sees zero as its last.
        excitation: float [T, nu] added to the controller's commands (a dither: the controller alone keeps
            the robot up, the dither excites what it alone would not); T samples in all, the last not applied.
        qpos0: [nq], qvel0: [nv] the initial state. dt: sample spacing (a multiple of the time step).
        qpos_noise, qvel_noise: standard deviations of the noise added to every recorded value.
        seed: seed or generator of the noise.
    """
    n_substeps = round(dt / model.opt.timestep)
    rng = np.random.default_rng(seed)
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = qpos0, qvel0
    steps = len(excitation)
    qpos, qvel = np.zeros((steps, model.nq)), np.zeros((steps, model.nv))
    ctrl = np.zeros((steps, model.nu))
    last = np.zeros(model.nu)
    for k in range(steps):
        qpos[k] = data.qpos + rng.normal(scale=qpos_noise, size=model.nq)
        qvel[k] = data.qvel + rng.normal(scale=qvel_noise, size=model.nv)
        ctrl[k] = last = np.clip(controller(qpos[k], qvel[k], k * dt, last) + excitation[k], -1.0, 1.0)
        if k < steps - 1:
            data.ctrl[:] = ctrl[k]
            mujoco.mj_step(model, data, n_substeps)
    return Trajectory(time=np.arange(steps) * dt, qpos=qpos, qvel=qvel, ctrl=ctrl)


def record(
    model: mujoco.MjModel,
    ctrl: np.ndarray,
    qpos0: np.ndarray,
    qvel0: np.ndarray,
    dt: float,
    qpos_noise: float = 0.0,
    qvel_noise: float = 0.0,
    seed: int | np.random.Generator = 0,
    delay: float = 0.0,
) -> Trajectory:
    """A trajectory from MuJoCo's C simulator with Gaussian measurement noise.

    Args:
        ctrl: float [T, nu] the commands, recorded as given; the last row is not applied.
        qpos0: [nq], qvel0: [nv] the initial state. dt: sample spacing (a multiple of the time step).
        qpos_noise, qvel_noise: standard deviations of the noise added to every recorded value.
        seed: seed or generator of the noise.
        delay: seconds from each command to its taking effect, simulated as
            `shac.sysid.signals` defines (the first command is held until then).
    """
    n_substeps = round(dt / model.opt.timestep)
    ctrl = np.asarray(ctrl, np.float64)
    signals.check_delay(delay, (len(ctrl) - 1) * dt, "true delay")
    controls = signals.step_controls(ctrl, 0, 0, len(ctrl) - 1, n_substeps, delay, model.opt.timestep)
    qpos, qvel = simulate_mujoco(model, qpos0[None], qvel0[None], controls[None], n_substeps)
    rng = np.random.default_rng(seed)
    qpos = np.concatenate([qpos0[None], qpos[0]])
    qvel = np.concatenate([qvel0[None], qvel[0]])
    return Trajectory(
        time=np.arange(len(ctrl)) * dt,
        qpos=qpos + rng.normal(scale=qpos_noise, size=qpos.shape),
        qvel=qvel + rng.normal(scale=qvel_noise, size=qvel.shape),
        ctrl=ctrl,
    )
