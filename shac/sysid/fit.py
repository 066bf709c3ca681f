"""System identification by multiple shooting through MJX, fitted by Levenberg-Marquardt.

A recorded trajectory (`shac.sysid.recording`), or several recordings of the
same system, is cut into segments of equal duration. Each segment starts from
its own start state, a decision variable initialised from the measurement
there, and is simulated under the measured controls. The residuals are, per
segment, the start state minus its measurement and each simulated state minus
the next measurement, every coordinate divided by its noise standard deviation;
each measurement enters exactly once. The named model parameters
(`envs.physics.parameters`, bounded as in `shac.sysid.parameters`) and all
start states are fitted together by Levenberg-Marquardt
(`shac.sysid.least_squares`), so noise in the measured start states does not
bias the parameters and the intervals account for the start states being
estimated too. The noise standard deviations are given, or
estimated as `shac.sysid.noise` describes.

Several recordings (different experiments: excitations, speeds) share the
parameters and the control delay (the same hardware) in one fit. They are
joined as the stretches of one trajectory, separated by gaps
(`Trajectory.concatenate`), so segments, and the delayed controls near a
segment's start, never cross from one recording to the next, as within a
recording with gaps in time. Each recording has its own noise standard
deviations (sensors and conditions differ between experiments), estimated from
its own residuals; given ones apply to every recording. A recording may also be
of a variant of the model (`variants`): values that hold for that experiment
alone, like a known payload in the hand or a rig that holds a joint, written
into the model before the shared parameters, so one fit learns the robot from
experiments that change its load.

The controls are the recorded commands, delayed by `signal:ctrl:delay` when
that is given or fitted (`shac.sysid.signals`; without it they act at once). A
segment's delayed controls near its start come from the samples before it, in
the full recording. The delay is fitted in absolute units (seconds divided by
the sample spacing, a variable of order one like the logs of the model
parameters), held by the solver within [0, upper] (default upper: a tenth of
the longest contiguous stretch), so a delay of exactly 0 is a value the fit can
reach; a log scale could not represent it, and would stop short of 0 for a
system without delay.

Jacobians come from MJX's forward mode (`method="autodiff"`) or from central
differences with MuJoCo's C simulator (`"finite_difference"`, for models MJX
cannot differentiate; one-sided at a lower bound).
"""

from __future__ import annotations

import copy
import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx
from scipy.stats import qmc

from envs.physics.parameters import ModelParameter, parse_all, write_all
from shac.sysid import least_squares, signals
from shac.sysid.noise import NOISE_RTOL, initial_noise, misfit, reestimate_noise, sound_fit
from shac.sysid.parameters import Bounds
from shac.sysid.recording import SPACING_RTOL, Trajectory, simulate_mujoco

METHODS = ("autodiff", "finite_difference", "forward_difference")
"""Jacobian sources: MJX forward mode, or central or forward differences over MuJoCo's C simulator."""
DIFFERENCE_METHODS = METHODS[1:]
DELAY_SCAN_LINEAR = 8
DELAY_SCAN_GROWTH = 1.25
"""The delay scan before a fit (`Problem.delay_candidates`): every physics step up to 8, then 25% apart."""
DELAY_KINK_WINDOW = 0.1
"""A fitted delay within this fraction of a physics step of a multiple of the step is fitted again from
the other side of that multiple (`kink_restart`), the lower cost kept."""
MIN_SEGMENT_SAMPLES = 5
SECANT_BELOW = 1.0
"""`fit`'s default `secant_below`: the last steps of a fit, under one standard error, update the Jacobian
instead of simulating it; wider (10) let one of five arm fits stop unconverged (docs/sysid.md)."""
FINITE_DIFFERENCE_STEP = 1e-7
"""The relative step of the finite-difference Jacobian. A simulation with constraints jumps by tiny amounts
where a constraint switches; a difference whose step crosses a jump divides it by the step. At 1e-5 the
arm's Jacobian had columns up to 16 times their size at 1e-7 and 1e-6, where they agree (docs/sysid.md,
"Which Jacobian"); in float64 the rounding error of a 1e-7 step is still far below the noise."""
SPREAD = 4.0
SPREAD_STARTS = 64
SPREAD_FITS = 3
"""`fit`'s defaults when the fit from the initial values is not `sound`: `SPREAD_STARTS` starts with
every model parameter within `SPREAD` times its initial value (`spread_starts`), and fits from the
`SPREAD_FITS` of least cost until one is. On a cart-pole whose cart was 4 times the model's, fits from
the model's values ended unconverged with the cart at hundreds of kilograms or more; the best spread start
converged to the truth (docs/sysid.md, "Spread starts")."""
ROLLOUT_BYTES = 2**28
"""The most memory one C rollout's states may take (the finite-difference Jacobian simulates in chunks)."""


def default_segment_seconds(trajectory: Trajectory) -> float:
    """The segment duration used when none is given: about 1 s, or a fifth of the longest stretch if shorter.

    A segment must be long enough for slow effects (damping, friction) to build
    up beyond the noise, and short enough that its simulation stays near the
    data from any reasonable initial guess; a second of motion does both for
    joints that move on time scales of a second. A fifth of the stretch keeps
    at least five segments, so the start states stay a small part of the
    problem. The duration is then adjusted so that whole segments fill the
    longest stretch, with at least `MIN_SEGMENT_SAMPLES` samples each.
    """
    dt = trajectory.dt
    samples = max(s.stop - s.start for s in trajectory.stretches())
    target = max(round(min(1.0, (samples - 1) * dt / 5) / dt), MIN_SEGMENT_SAMPLES - 1) + 1
    length = max(samples // max(round(samples / target), 1), MIN_SEGMENT_SAMPLES)
    return (length - 1) * dt


@dataclass(frozen=True)
class Segments:
    """Multiple-shooting segments, S of them, each L samples long (numpy, float64).

    Attributes:
        start_rows: int [S] the row of each segment's first sample in the trajectory.
        first_rows: int [S] the first row of the contiguous stretch holding each segment
            (a delayed control before it holds that row's command).
        measured: [S, L, nx] measured states (qpos then qvel); row 0 is the start.
        ctrl: [S, L - 1, nu] the commands recorded from each sample to the next
            (the controls applied without a delay; `signals.step_controls` delays them).
    """

    start_rows: np.ndarray
    first_rows: np.ndarray
    measured: np.ndarray
    ctrl: np.ndarray

    @classmethod
    def cut(cls, trajectory: Trajectory, length: int) -> tuple[Segments, int]:
        """Non-overlapping segments of `length` samples within each contiguous stretch, and the samples left out.

        Raises:
            ValueError: no stretch holds one segment.
        """
        stretches = trajectory.stretches()
        starts = [np.arange(s.start, s.stop - length + 1, length) for s in stretches]
        firsts = np.concatenate([np.full(len(a), s.start) for a, s in zip(starts, stretches, strict=True)])
        starts = np.concatenate(starts).astype(int)
        if starts.size == 0:
            longest = max(s.stop - s.start for s in stretches)
            where = "the recording has" if len(stretches) == 1 else f"the longest of {len(stretches)} stretches has"
            raise ValueError(
                f"{where} {longest} samples, fewer than one segment of {length} samples "
                f"({(length - 1) * trajectory.dt:.4g} s); record longer or set a shorter segment_seconds"
            )
        rows = starts[:, None] + np.arange(length)[None]
        states = np.concatenate([trajectory.qpos, trajectory.qvel], axis=1)
        segments = cls(
            start_rows=starts,
            first_rows=firsts.astype(int),
            measured=states[rows],
            ctrl=trajectory.ctrl[rows[:, :-1]],
        )
        return segments, len(trajectory.time) - rows.size


class Problem:
    """The fitting problem: a model, the parameters to estimate, and segments of data from K recordings.

    Args:
        mj_model: the MuJoCo model (its current parameter values are the
            initial guess; it is copied, not changed).
        keys: parameters as `element:name:attribute`: model parameters, and
            `signal:ctrl:delay` (`shac.sysid.signals`).
        trajectory: the recorded data, or a sequence of K >= 1 recordings of the
            same system (one sample spacing) that share the parameters and the
            delay, each with its own noise; checked against the model here,
            before anything compiles.
        segment_seconds: duration of each segment (default: `default_segment_seconds`
            of the recordings joined, so set by the longest stretch of any).
        bounds: per-key bounds (default: positive, unbounded above, at least `LOG_FLOOR` of the initial value; for the
            delay [0, a tenth of the longest stretch], where only its upper bound is taken from here).
        noise: (qpos, qvel) noise standard deviations, each a scalar or one per
            coordinate, for every recording; None estimates them per recording. qvel may be None where no
            recording measured a velocity (`Trajectory.velocity_measured`).
        signal_values: values of signal parameters, e.g. {"signal:ctrl:delay": 0.02}:
            the initial guess of those in `keys`, fixed for the others (default 0).
        names: how messages name the recordings (e.g. their files; default
            "recording k of K"); a message about one of several recordings starts with its name.
        variants: per recording (K of them), model values `{element:name:attribute: value}` that hold for that
            recording alone (a payload, a rig), written before the fitted parameters; none of them fitted
            (default: every recording of the model as given).

    Attributes:
        trajectories: the K recordings as given, unmeasured velocities estimated from the positions
            (`Trajectory.with_velocities_estimated`). trajectory: them joined (`Trajectory.concatenate`; the one
            recording itself when K = 1).
        velocity_measured: bool [K, nv] which velocities each recording measured (`Trajectory.velocity_measured`).
            An unmeasured one has noise inf, so weight 0: the fit weighs the positions alone there, and its
            estimate from the positions only starts the segments.
        single: a Trajectory was given rather than a sequence (`FitResult.noise` follows it).
        segment_recording: int [S] the recording of each segment.
        variants: K dicts, each recording's own model values (empty: the model as given).
        fixed_parameters: the F parameters any variant sets. fixed_values: [K, F] their values per recording (the
            model's where a recording's variant leaves one alone).
        noise: [K, nx] the initial (or given) noise standard deviations per recording, qpos then qvel (inf for a
            velocity not measured).
        data_noise: [K, nx] the noise the data show, which `FitResult.misfit` compares the residuals with: the
            given noise, else the third-difference estimate (`shac.sysid.noise.initial_noise`).

    Raises:
        ValueError: unusable data or settings, in one line.
    """

    def __init__(
        self,
        mj_model: mujoco.MjModel,
        keys: list[str] | tuple[str, ...],
        trajectory: Trajectory | Sequence[Trajectory],
        segment_seconds: float | None = None,
        bounds: dict[str, Bounds] | None = None,
        noise: tuple[float | np.ndarray, float | np.ndarray] | None = None,
        signal_values: dict[str, float] | None = None,
        names: Sequence[str] | None = None,
        variants: Sequence[Mapping[str, float]] | None = None,
    ):
        self.mj_model = copy.deepcopy(mj_model)
        if len(set(keys)) != len(keys):
            raise ValueError(f"duplicate parameters in {list(keys)}")
        model_keys, signal_keys = signals.split(list(keys))
        _, given = signals.split_values(dict(signal_values or {}))
        self.parameters: tuple[ModelParameter, ...] = parse_all(model_keys, mj_model)
        self.keys = tuple(keys)
        self.model_indices = tuple(i for i, key in enumerate(keys) if not signals.is_signal(key))
        self.delay_index = self.keys.index(signals.DELAY) if signals.DELAY in signal_keys else None
        self.delay = float(given.get(signals.DELAY, 0.0))
        self.single = isinstance(trajectory, Trajectory)
        if not self.single and (isinstance(trajectory, str | bytes) or not isinstance(trajectory, Sequence)):
            raise ValueError(f"expected a Trajectory or a sequence of them, got a {type(trajectory).__name__}")
        self.trajectories: tuple[Trajectory, ...] = (trajectory,) if self.single else tuple(trajectory)
        self.names = self._check_recordings(mj_model, names)
        self.velocity_measured = np.stack([t.velocity_measured for t in self.trajectories])  # [K, nv]
        self.trajectories = tuple(t.with_velocities_estimated(mj_model) for t in self.trajectories)
        trajectory = Trajectory.concatenate(self.trajectories)
        dt = trajectory.dt
        longest = max((s.stop - s.start - 1) * dt for s in trajectory.stretches())
        where = "the recording" if len(trajectory.stretches()) == 1 else "the longest contiguous stretch"
        what = "initial delay" if self.delay_index is not None else "delay"
        signals.check_delay(self.delay, longest, what, where)
        bounds = bounds or {}
        self.bounds = tuple(
            self._delay_bounds(bounds.get(key), longest, dt)
            if signals.is_signal(key)
            else bounds.get(key, Bounds()).with_floor(initial)
            for key, initial in zip(keys, self.initial_values, strict=True)
        )
        self.n_substeps = round(dt / mj_model.opt.timestep)
        if self.n_substeps < 1 or abs(self.n_substeps * mj_model.opt.timestep - dt) > SPACING_RTOL * dt:
            raise ValueError(
                f"sample spacing {dt:.6g} s is not a multiple of the model time step {mj_model.opt.timestep} s"
            )
        if segment_seconds is None:
            segment_seconds = default_segment_seconds(trajectory)
        elif segment_seconds < dt:
            raise ValueError(f"segment_seconds={segment_seconds} is shorter than the sample spacing {dt:.6g} s")
        self.trajectory = trajectory
        self.stretches = trajectory.stretches()
        self._cut(round(segment_seconds / dt) + 1)
        self._set_variants(mj_model, variants, model_keys)
        self.nq, self.nv = mj_model.nq, mj_model.nv
        if noise is None:
            self.data_noise = np.stack([initial_noise(t) for t in self.trajectories])  # [K, nx]
            self.noise, self.noise_given = self.data_noise.copy(), False
        else:
            qpos_noise = np.broadcast_to(np.asarray(noise[0], np.float64), (self.nq,))
            if noise[1] is None and self.velocity_measured.any():
                raise ValueError(
                    "a velocity noise is needed: the recordings measure velocities (give the qpos and the qvel "
                    "noise, or neither)"
                )
            qvel_noise = np.broadcast_to(np.asarray(np.inf if noise[1] is None else noise[1], np.float64), (self.nv,))
            given_noise = np.concatenate([qpos_noise, qvel_noise])
            if not (given_noise > 0).all():
                raise ValueError(f"noise standard deviations must be > 0, got {given_noise.tolist()}")
            self.noise, self.noise_given = np.tile(given_noise, (len(self.trajectories), 1)), True
            # a sensor's stated noise, where third differences would not see it (filtered or quantized signals)
            self.data_noise = self.noise.copy()
        unmeasured = np.concatenate([np.zeros((len(self.trajectories), self.nq), bool), ~self.velocity_measured], 1)
        self.noise[unmeasured] = self.data_noise[unmeasured] = np.inf  # weight 0: the positions alone count there
        with jax.enable_x64(True):
            self.mjx_model = mjx.put_model(mj_model, impl="jax")

    def _cut(self, length: int) -> None:
        """Cuts the recordings into segments of `length` samples: sets `segment_length`, `segment_seconds`,
        `segments`, `samples_left_out`, `segment_recording` and `recording_segments`.

        Raises:
            ValueError: a recording that holds no segment.
        """
        self.segment_length = length
        self.segment_seconds = (length - 1) * self.trajectory.dt
        self.segments, self.samples_left_out = Segments.cut(self.trajectory, length)
        first_rows = np.cumsum([0] + [len(t.time) for t in self.trajectories])  # [K + 1]
        self.segment_recording = np.searchsorted(first_rows, self.segments.start_rows, side="right") - 1
        self.recording_segments = np.bincount(self.segment_recording, minlength=len(self.trajectories))  # [K]
        empty = np.flatnonzero(self.recording_segments == 0)
        if empty.size:
            k = int(empty[0])
            longest = max(s.stop - s.start for s in self.trajectories[k].stretches())
            raise ValueError(
                f"{self.names[k]} has {longest} samples in its longest stretch, fewer than one segment of "
                f"{self.segment_length} samples ({self.segment_seconds:.4g} s); leave it out or set a shorter "
                "segment_seconds"
            )

    def joined(self, noise: np.ndarray) -> Problem:
        """This problem with every contiguous stretch one segment (single shooting: one start state per stretch),
        weighted by `noise` [K, nx] (a fit's estimate) as if given.

        Raises:
            ValueError: stretches of different lengths (one segment length for all would leave samples out).
        """
        lengths = sorted({s.stop - s.start for s in self.stretches})
        if len(lengths) > 1:
            raise ValueError(
                f"the stretches of data are {lengths[0]} to {lengths[-1]} samples long; one segment per stretch "
                "needs them equally long"
            )
        problem = copy.copy(self)
        problem._cut(lengths[0])
        problem.noise, problem.noise_given = np.array(noise, np.float64).reshape(self.noise.shape), True
        return problem

    def _check_recordings(self, mj_model: mujoco.MjModel, names: Sequence[str] | None) -> tuple[str, ...]:
        """The recordings' names for messages; raises a one-line ValueError naming a recording that cannot be used.

        Each is checked against the model (`Trajectory.check`); all need one sample spacing.
        """
        count = len(self.trajectories)
        if count == 0:
            raise ValueError("no recordings given; pass a Trajectory or a non-empty sequence of them")
        if names is None:
            names = [f"recording {k + 1} of {count}" for k in range(count)]
        elif len(names) != count:
            raise ValueError(f"{len(names)} names for {count} recordings")
        for name, trajectory in zip(names, self.trajectories, strict=True):
            if not isinstance(trajectory, Trajectory):
                raise ValueError(f"{name} is a {type(trajectory).__name__}, not a Trajectory")
            try:
                trajectory.check(mj_model.nq, mj_model.nv, mj_model.nu)
            except ValueError as e:
                if count == 1:
                    raise
                raise ValueError(f"{name}: {e}") from None
        spacings = [t.dt for t in self.trajectories]
        for name, spacing in zip(names[1:], spacings[1:], strict=True):
            if abs(spacing - spacings[0]) > SPACING_RTOL * spacings[0]:
                raise ValueError(
                    f"{name} is sampled every {spacing:.6g} s but {names[0]} every {spacings[0]:.6g} s; "
                    "the recordings of one fit need one sample spacing (resample them)"
                )
        return tuple(names)

    def _set_variants(
        self, mj_model: mujoco.MjModel, variants: Sequence[Mapping[str, float]] | None, fitted: list[str]
    ) -> None:
        """Checks each recording's own model values and sets `variants`, `fixed_parameters`, `fixed_values` and
        the C models of the distinct variants, `_variant_models`, with each segment's index into them.

        Raises:
            ValueError: one line naming the recording and the value: a list of the wrong length, a fitted or
                signal parameter, a name the model lacks, a value that is not physical.
        """
        count = len(self.trajectories)
        variants = [{} for _ in range(count)] if variants is None else [dict(v) for v in variants]
        if len(variants) != count:
            raise ValueError(f"{len(variants)} variants for {count} recordings; give one per recording ({{}}: none)")
        for name, variant in zip(self.names, variants, strict=True):
            for key, value in variant.items():
                if signals.is_signal(key):
                    raise ValueError(f"{name}: variant value '{key}' is a signal; a variant holds model values")
                if key in fitted:
                    raise ValueError(
                        f"{name}: '{key}' is fitted and also set by the recording's variant; a parameter is either "
                        "shared and fitted, or known for each recording"
                    )
                try:
                    ModelParameter.parse(key, mj_model).check_value(float(value), mj_model)
                except ValueError as e:
                    raise ValueError(f"{name}, variant: {e}") from None
        self.variants = tuple(variants)
        self.fixed_parameters = parse_all(sorted(set().union(*variants)), mj_model)
        model_values = [p.read(mj_model) for p in self.fixed_parameters]
        self.fixed_values = np.array(
            [[v.get(p.key, m) for p, m in zip(self.fixed_parameters, model_values, strict=True)] for v in variants],
            np.float64,
        ).reshape(count, len(self.fixed_parameters))  # [K, F]
        rows, recording_variant = np.unique(self.fixed_values, axis=0, return_inverse=True)  # one row when F = 0
        self._recording_variant = recording_variant.reshape(-1)  # int [K]
        self._variant_models = []  # the C model of each distinct variant, indexed by `_segment_variant`
        for row in rows:
            self._variant_models.append(copy.deepcopy(mj_model))
            for parameter, value in zip(self.fixed_parameters, row, strict=True):
                parameter.write_mj(self._variant_models[-1], float(value))

    @property
    def _segment_variant(self) -> np.ndarray:
        """int [S] each segment's index into `_variant_models`."""
        return self._recording_variant[self.segment_recording]

    def _delay_bounds(self, given: Bounds | None, longest: float, dt: float) -> Bounds:
        """[0, upper] in units of the sample spacing; upper is given or a tenth of the longest stretch."""
        upper = signals.DEFAULT_UPPER_FRACTION * longest
        if given is not None and np.isfinite(given.upper):
            upper = float(given.upper)
            if not 0 < upper <= longest:
                raise ValueError(
                    f"upper bound {signals.DELAY}={upper:g} s must be > 0 and at most the longest "
                    f"contiguous stretch of the recording ({longest:g} s)"
                )
        if self.delay > upper:
            raise ValueError(
                f"initial delay {signals.DELAY}={self.delay:g} s is above its upper bound {upper:g} s "
                f"({'given' if given is not None and np.isfinite(given.upper) else 'a tenth of the recording'}); "
                f"raise it with upper=[{signals.DELAY}=...]"
            )
        return Bounds(lower=0.0, upper=upper, unit=dt)

    @property
    def initial_values(self) -> np.ndarray:
        model = iter(p.read(self.mj_model) for p in self.parameters)
        return np.array([self.delay if i == self.delay_index else next(model) for i in range(len(self.keys))])

    def delay_candidates(self) -> np.ndarray:
        """[C] delays (s) a fit may start from: the initial one, every physics step up to
        `DELAY_SCAN_LINEAR` of them, then steps growing by `DELAY_SCAN_GROWTH` (rounded to physics
        steps) up to the delay's upper bound."""
        bounds, h = self.bounds[self.delay_index], self.mj_model.opt.timestep
        steps, k = list(range(DELAY_SCAN_LINEAR + 1)), float(DELAY_SCAN_LINEAR)
        while (k := k * DELAY_SCAN_GROWTH) * h <= bounds.upper:
            steps.append(round(k))
        candidates = bounds.lower + h * np.unique(steps)
        return np.unique(np.append(candidates[candidates <= bounds.upper], self.delay))

    def theta_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """[P] lower and upper bounds of the fit's variables (-inf, inf where the parametrisation keeps the bounds)."""
        lower, upper = zip(*(b.theta_limits() for b in self.bounds), strict=True)
        return np.array(lower, np.float64), np.array(upper, np.float64)

    def report_units(self, values: np.ndarray) -> dict[str, float]:
        """Parameters judged in absolute units (`shac.sysid.report.analyze`) at `values` [P]: the delay, in
        sample spacings, and a parameter at its floor (`Bounds`), in its initial distance to the bound:
        relative to a value of about 0, its uncertainty would have no scale."""
        units = {} if self.delay_index is None else {signals.DELAY: self.trajectory.dt}
        for key, bounds, value, initial in zip(self.keys, self.bounds, values, self.initial_values, strict=True):
            if bounds.at_floor(value):
                units[key] = initial - bounds.lower
        return units

    def controls_phrase(self) -> str:
        """How the fit treats the controls, for the noise-model line."""
        return signals.controls_phrase(self.delay_index is not None, self.delay)

    def step_controls(self, values: np.ndarray) -> np.ndarray:
        """[S, L - 1, n_substeps, nu] the controls of every physics step of every segment at `values` (numpy)."""
        return signals.step_controls(
            self.trajectory.ctrl,
            self.segments.start_rows,
            self.segments.first_rows,
            self.segment_length - 1,
            self.n_substeps,
            self._delay_of(values),
            self.mj_model.opt.timestep,
        )

    def _delay_of(self, values: np.ndarray) -> float:
        return float(values[self.delay_index]) if self.delay_index is not None else self.delay

    def to_values(self, theta: np.ndarray) -> np.ndarray:
        return np.array([b.to_value(theta[i]) for i, b in enumerate(self.bounds)])

    def to_theta(self, values: np.ndarray) -> np.ndarray:
        return np.array([b.to_theta(float(v)) for b, v in zip(self.bounds, values, strict=True)])

    def describe(self) -> str:
        """One line: how the data was cut into segments."""
        line = (
            f"{len(self.segments.start_rows)} segments of {self.segment_seconds:.4g} s "
            f"({self.segment_length} samples every {self.trajectory.dt:.4g} s)"
        )
        count = len(self.trajectories)
        if count > 1:
            line += f" from {count} recordings"
            if len(self.stretches) > count:
                line += f" ({len(self.stretches)} contiguous stretches: gaps in time split a recording)"
        elif len(self.stretches) > 1:
            line += f" from {len(self.stretches)} contiguous stretches (gaps in time split the recording)"
        if self.samples_left_out:
            line += f"; {self.samples_left_out} samples at stretch ends left out"
        unmeasured = np.flatnonzero(~self.velocity_measured.all(axis=0))
        if unmeasured.size:
            joints = dict.fromkeys(self.mj_model.joint(int(self.mj_model.dof_jntid[d])).name for d in unmeasured)
            line += f"; velocities not measured ({', '.join(joints)}): the positions alone are fitted there"
        return line

    def recordings(self) -> list[dict]:
        """Per recording: `samples`, `seconds` (first to last time stamp), `segments`, `samples_left_out` and `jitter`
        (`Trajectory.jitter`)."""
        used = self.recording_segments * self.segment_length
        return [
            {
                "samples": len(t.time),
                "seconds": float(t.time[-1] - t.time[0]),
                "segments": int(self.recording_segments[k]),
                "samples_left_out": int(len(t.time) - used[k]),
                "jitter": t.jitter,
            }
            for k, t in enumerate(self.trajectories)
        ]

    def segment_weights(self, weights: np.ndarray) -> np.ndarray:
        """[S, nx] the weights of every segment's residuals (1 / noise).

        Args:
            weights: [nx] for every recording, or [K, nx] one row per recording.
        """
        weights = np.asarray(weights, np.float64)
        shape = (len(self.trajectories), self.nq + self.nv)
        if weights.ndim == 1:
            weights = np.broadcast_to(weights, shape)
        if weights.shape != shape:
            raise ValueError(f"weights of shape {weights.shape}; expected [nx] or [K, nx] = {list(shape)}")
        return weights[self.segment_recording]

    # --- residuals [S, L, nx]: (simulated - measured) / noise, start states x0 [S, nx] ---
    # `weights` are 1 / noise: [nx] for every recording or [K, nx] per recording (`segment_weights`).

    def residuals(self, values: np.ndarray, x0: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """float64 [S, L * nx] weighted residuals simulated by MJX in float64."""
        with jax.enable_x64(True):
            r = _residuals(self.mjx_model, *self._static(), *self._jax_args(values, x0, weights))
        return np.asarray(r, np.float64).reshape(len(x0), -1)

    def jacobian(
        self, values: np.ndarray, x0: np.ndarray, weights: np.ndarray, method: str = "autodiff"
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Residuals [S, R] and their Jacobians d/d values [S, R, P] and d/d x0_s [S, R, nx] (R = L nx)."""
        if method in DIFFERENCE_METHODS:
            return self._jacobian_mujoco(values, x0, weights, central=method == "finite_difference")
        with jax.enable_x64(True):
            args = self._jax_args(values, x0, weights)
            r, d_values, d_x0 = _jacobian(self.mjx_model, *self._static(), *args)
        s = len(x0)
        return (
            np.asarray(r, np.float64).reshape(s, -1),
            np.asarray(d_values, np.float64).reshape(s, -1, len(values)),
            np.asarray(d_x0, np.float64).reshape(s, -1, x0.shape[1]),
        )

    def reweight(self, jacobian: tuple[np.ndarray, ...], weights: np.ndarray, new_weights: np.ndarray) -> tuple:
        """`jacobian`'s residuals [S, R] and derivatives [S, R, ...] (R = L nx) under `weights`, as they are
        under `new_weights`: the residuals are linear in the weights, so no simulation is needed."""
        old, new = self.segment_weights(weights), self.segment_weights(new_weights)
        scale = np.divide(new, old, out=np.zeros_like(new), where=old > 0)  # [S, nx]; 0 where unmeasured
        scale = np.tile(scale, (1, self.segment_length))  # [S, L * nx], as the residuals' rows
        r, *derivatives = jacobian
        return (r * scale, *(d * scale[..., None] for d in derivatives))

    def residuals_mujoco(self, values: np.ndarray, x0: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """`residuals` simulated by MuJoCo's C simulator in float64."""
        return self._residuals_mujoco([values], x0[None], weights)[0]

    def _residuals_mujoco(self, values: list[np.ndarray], x0: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """[V, S, L * nx] the residuals of V variants (values: V of [P]; x0: [V, S, nx]), every segment of
        every variant simulated by one multithreaded C `rollout` (in chunks of at most `ROLLOUT_BYTES`)."""
        models: dict[tuple[float, ...], list[mujoco.MjModel]] = {}  # one per distinct recording variant
        controls: dict[float, np.ndarray] = {}
        variant_models, variant_controls = [], []  # [V] each variant's models [S] and controls, shared where equal
        for v in values:
            key = tuple(float(v[i]) for i in self.model_indices)
            if key not in models:
                models[key] = [copy.deepcopy(base) for base in self._variant_models]
                for model in models[key]:
                    for parameter, value in zip(self.parameters, key, strict=True):
                        parameter.write_mj(model, value)
            delay = self._delay_of(v)
            if delay not in controls:
                controls[delay] = self.step_controls(v)
            variant_models.append([models[key][k] for k in self._segment_variant])
            variant_controls.append(controls[delay])
        count, length = x0.shape[1], self.segment_length
        state_bytes = (
            8 * (length - 1) * self.n_substeps * mujoco.mj_stateSize(self.mj_model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        )
        chunk = max(1, ROLLOUT_BYTES // (state_bytes * count))
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        simulated = []
        for first in range(0, len(values), chunk):
            part = slice(first, first + chunk)
            segment_models = [model for segment_models in variant_models[part] for model in segment_models]
            ctrl = np.concatenate(variant_controls[part])
            starts = x0[part].reshape(-1, x0.shape[-1])
            qpos, qvel = simulate_mujoco(
                segment_models, starts[:, : self.nq], starts[:, self.nq :], ctrl, self.n_substeps, threads
            )
            simulated.append(np.concatenate([starts[:, None], np.concatenate([qpos, qvel], axis=-1)], axis=1))
        simulated = np.concatenate(simulated).reshape(len(values), count, length, -1)
        residuals = (simulated - self.segments.measured) * self.segment_weights(weights)[:, None]
        return residuals.reshape(len(values), count, -1)

    def _jacobian_mujoco(self, values, x0, weights, central=True, rel_step=FINITE_DIFFERENCE_STEP):
        """Central (or forward) differences of `residuals_mujoco`: 2 (P + nx) + 1 (or P + nx + 1) simulations
        of all segments, in one multithreaded rollout (`_residuals_mujoco`).

        The step is `rel_step` of the value (of the unit, for a parameter fitted in given units: the
        delay; at least a thousandth of the interval, between two bounds); within a step of a bound
        the difference is one-sided, away from it, like the autodiff derivative of the delay at 0.
        """
        variants, starts, spans = [values], [x0], []  # spans: each column's change of its variable
        for i, bounds in enumerate(self.bounds):
            floor = 1e-3 * bounds.scale if bounds.scale is not None else 1e-8
            h = rel_step * (bounds.unit if bounds.unit is not None else max(abs(values[i]), floor))
            if central:
                up, down = np.array(values, np.float64), np.array(values, np.float64)
                if values[i] + h <= bounds.upper:
                    up[i] += h
                if values[i] - h >= bounds.lower:
                    down[i] -= h
                variants += [up, down]
                starts += [x0, x0]
                spans.append(up[i] - down[i])
            else:  # down only where a step up would leave the bounds
                step = h if values[i] + h <= bounds.upper else -h
                variants.append(np.array(values, np.float64))
                variants[-1][i] += step
                starts.append(x0)
                spans.append(step)
        for j in range(x0.shape[1]):
            h = rel_step * max(np.abs(x0[:, j]).max(), 1.0)
            for sign in (1, -1) if central else (1,):
                starts.append(np.array(x0))
                starts[-1][:, j] += sign * h
                variants.append(values)
            spans.append(2 * h if central else h)
        r = self._residuals_mujoco(variants, np.stack(starts), weights)
        changes = r[1::2] - r[2::2] if central else r[1:] - r[0]
        changes = changes / np.array(spans)[:, None, None]
        differences = np.moveaxis(changes, 0, -1)  # [S, R, P + nx]
        return r[0], differences[..., : len(values)], differences[..., len(values) :]

    def _static(self):
        """The static arguments of `_residuals` and `_jacobian`."""
        return (
            self.parameters,
            self.fixed_parameters,
            self.model_indices,
            self.delay_index,
            self.n_substeps,
            self.mj_model.opt.timestep,
        )

    def _jax_args(self, values, x0, weights):
        f64 = functools.partial(jnp.asarray, dtype=jnp.float64)
        return (
            f64(values),
            f64(x0),
            jnp.asarray(self.segments.start_rows, jnp.int32),
            jnp.asarray(self.segments.first_rows, jnp.int32),
            f64(self.segments.measured),
            f64(self.segment_weights(weights)),
            f64(self.fixed_values[self.segment_recording]),
            f64(self.trajectory.ctrl),
            f64(self.delay),
        )


def _segment_residuals(
    model,
    parameters,
    fixed_parameters,
    model_indices,
    delay_index,
    n_substeps,
    step_seconds,
    values,
    x0,
    start_row,
    first_row,
    measured,
    weights,
    fixed,
    ctrl,
    delay,
):
    """[L, nx] weighted residuals of one segment.

    Args:
        values: [P] the parameters: model ones at `model_indices`, the delay at
            `delay_index` (None: the fixed `delay` instead).
        x0: [nx] start state. start_row, first_row: int, the segment's first row
            and its stretch's. measured: [L, nx]. weights: [nx] 1 / the segment's recording's noise.
            fixed: [F] the values of `fixed_parameters` in the segment's recording (its variant).
            ctrl: [T, nu] the commands of all recordings, joined.
    """
    model = write_all(write_all(model, fixed_parameters, fixed), parameters, values[np.array(model_indices, int)])
    if delay_index is not None:
        delay = values[delay_index]
    controls = signals.step_controls(
        ctrl, start_row, first_row, measured.shape[0] - 1, n_substeps, delay, step_seconds, xp=jnp
    )  # [L - 1, n_substeps, nu]
    nq = model.nq
    data = mjx.make_data(model).replace(qpos=x0[:nq], qvel=x0[nq:])

    def sample(data, u):
        data = jax.lax.fori_loop(0, n_substeps, lambda i, d: mjx.step(model, d.replace(ctrl=u[i])), data)
        return data, jnp.concatenate([data.qpos, data.qvel])

    simulated = jax.lax.scan(sample, data, controls)[1]
    return (jnp.concatenate([x0[None], simulated]) - measured) * weights


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _residuals(model, parameters, fixed_parameters, model_indices, delay_index, n_substeps, step_seconds, *arrays):
    static = (parameters, fixed_parameters, model_indices, delay_index, n_substeps, step_seconds)
    f = functools.partial(_segment_residuals, model, *static)
    values, x0, start_rows, first_rows, measured, weights, fixed, ctrl, delay = arrays
    return jax.vmap(f, in_axes=(None, 0, 0, 0, 0, 0, 0, None, None))(
        values, x0, start_rows, first_rows, measured, weights, fixed, ctrl, delay
    )


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _jacobian(model, parameters, fixed_parameters, model_indices, delay_index, n_substeps, step_seconds, *arrays):
    static = (parameters, fixed_parameters, model_indices, delay_index, n_substeps, step_seconds)
    f = functools.partial(_segment_residuals, model, *static)
    values, x0, start_rows, first_rows, measured, weights, fixed, ctrl, delay = arrays

    def one(x0, start_row, first_row, measured, weights, fixed):
        args = (start_row, first_row, measured, weights, fixed, ctrl, delay)
        r = f(values, x0, *args)
        d_values, d_x0 = jax.jacfwd(f, argnums=(0, 1))(values, x0, *args)
        return r, d_values, d_x0

    return jax.vmap(one)(x0, start_rows, first_rows, measured, weights, fixed)


@dataclass(frozen=True)
class FitResult:
    """Outcome of `fit`.

    Attributes:
        values: [P] estimates.
        information: [P, P] information matrix (inverse covariance) of the values, with the start states free.
        start_states: [S, nx] fitted segment start states.
        noise: noise standard deviations (qpos then qvel), given or estimated: [nx] when the
            problem was given one Trajectory, [K, nx] (one row per recording) when given a sequence.
        noise_given: whether `noise` was given rather than estimated.
        residuals: [S, L * nx] final residuals divided by the noise (of each segment's recording).
        converged: the last Gauss-Newton step was under `tolerance` standard errors (where the cost
            stalled: under 1, or moving no parameter by `tolerance` of its standard error, see
            `shac.sysid.least_squares`) and the noise estimate had settled, within `steps`.
        stalled: the last round stopped because the cost stopped decreasing.
        steps: Levenberg-Marquardt iterations taken, all rounds together.
        losses: mean squared weighted residual after each accepted step.
        step_length: the last Gauss-Newton step in standard errors.
        parameter_step_errors: the largest change that step makes to one parameter, in its standard errors.
        seconds_per_jacobian: median time of one Jacobian (all segments).
        jacobians: Jacobians simulated (the others were reused or secant updates).
        delay_start: the delay (s) the fit started from after `scan_delay`; None without a scan.
        delay_restart: the delay (s) a second fit started from (`kink_restart`); None without one.
        floor_restart: the parameters a last fit started again from their initial values (`floor_restart`).
        misfit: how many times the noise the data show the residuals are (`shac.sysid.noise.misfit`).
        spread_fits: fits run from spread starts (`spread_starts`) after the others were not `sound`.
        spread_start: [P] the spread start the kept fit began from; None if the kept fit is not one of them.
        noise_rounds: times the noise was estimated again from the residuals; 0 where it was given, or where the
            first round did not converge and the noise stayed the data's (`shac.sysid.noise.initial_noise`).
            After a restart `steps`, `seconds_per_jacobian` and `jacobians` count every fit; the other fields are
            the kept one's.
        joined: what `join_segments` did: "" not asked, "kept" (the estimates are the single-shooting fit's), or
            why the multiple-shooting fit was kept.
    """

    values: np.ndarray
    information: np.ndarray
    start_states: np.ndarray
    noise: np.ndarray
    noise_given: bool
    residuals: np.ndarray
    converged: bool
    stalled: bool
    steps: int
    losses: list[float]
    step_length: float
    parameter_step_errors: float
    seconds_per_jacobian: float
    jacobians: int
    misfit: float
    delay_start: float | None = None
    delay_restart: float | None = None
    floor_restart: tuple[str, ...] = ()
    spread_fits: int = 0
    spread_start: np.ndarray | None = None
    noise_rounds: int = 0
    joined: str = ""


def scan_delay(problem: Problem, weights: np.ndarray, method: str = "autodiff") -> float:
    """The delay (s) of least cost among `problem.delay_candidates()`, the other parameters at their
    initial values and the segments starting from their measured states.

    The cost is far from quadratic in the delay over several control steps (the fit's Gauss-Newton
    model holds within about one), and a start one or two steps off can settle where the other
    parameters absorb the lag (a larger armature, no damping); a scan of single simulations is cheap.
    """
    values, x0 = problem.initial_values, problem.segments.measured[:, 0]
    candidates = problem.delay_candidates()
    costs = []
    for delay in candidates:
        values[problem.delay_index] = delay
        costs.append(weighted_cost(problem, values, x0, weights, method))
    return float(candidates[int(np.argmin(costs))])


def fit(
    problem: Problem,
    steps: int = 50,
    tolerance: float = 0.1,
    method: str = "autodiff",
    max_rounds: int = 5,
    on_step: Callable[[int, float, np.ndarray], None] | None = None,
    delay_scan: bool = True,
    delay_restart: bool = True,
    bound_restart: bool = True,
    secant_below: float = SECANT_BELOW,
    spread_fits: int = SPREAD_FITS,
    spread: float = SPREAD,
) -> FitResult:
    """Fits the parameters and start states by Levenberg-Marquardt, estimating the noise unless given.

    Round one weights the residuals by the problem's initial noise; after each
    round the noise of every coordinate of every recording is re-estimated from
    that recording's residuals (divided by 1 - leverage, so the start states'
    share is not counted as noise) and the fit continues from where it stopped,
    until no estimate changes by `NOISE_RTOL` or more, or `max_rounds` is reached.

    Args:
        steps: Levenberg-Marquardt iterations allowed over all rounds (of each fit, with `delay_restart`).
        tolerance: converged when the Gauss-Newton step is shorter than this many standard errors.
        method: "autodiff" (MJX forward mode), or "finite_difference" (central) or "forward_difference"
            (half the simulations) over MuJoCo's C simulator.
        on_step: called with (step, loss, values) after each iteration.
        delay_scan: start a fitted delay at the least-cost delay of `scan_delay` (the initial
            delay among the candidates), not at the initial delay alone.
        delay_restart: fit again from the other side of a physics-step multiple the fitted delay
            ended next to (`kink_restart`), keeping the fit of lower cost.
        bound_restart: fit again with the parameters the fit left at their floor back at their initial
            values (`floor_restart`), keeping the fit of lower cost.
        secant_below: where the Gauss-Newton step is shorter than this many standard errors, an accepted
            step updates the Jacobian by Broyden's secant rule instead of simulating it
            (`shac.sysid.least_squares.levenberg_marquardt`); 0 simulates every one.
        spread_fits: when the fit above is not `sound` (not converged, or converged with residuals far above
            the noise), fit from up to this many of the least-cost starts of `spread_starts` (every model
            parameter within `spread` times its initial value) until one is; the first that is is kept, else
            the fit of least cost; 0 runs none.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method '{method}'; available: {', '.join(METHODS)}")
    if spread_fits < 0 or not spread > 1:
        raise ValueError(f"spread_fits must be >= 0 and spread > 1, got spread_fits={spread_fits}, spread={spread}")
    values = problem.initial_values
    delay_start = None
    if problem.delay_index is not None and delay_scan:
        delay_start = values[problem.delay_index] = scan_delay(problem, 1.0 / problem.noise, method)
    result = replace(
        _fit_from(problem, values, steps, tolerance, method, max_rounds, on_step, secant_below), delay_start=delay_start
    )
    restart = kink_restart(problem, result.values) if delay_restart else None
    if restart is not None:
        mirrored = values.copy()
        mirrored[problem.delay_index] = restart
        second = _fit_from(problem, mirrored, steps, tolerance, method, max_rounds, on_step, secant_below, result.steps)
        result = replace(_lower_cost(problem, result, second, method), delay_restart=restart)
    floored = floor_restart(problem, result.values) if bound_restart else None
    if floored is not None:
        second = _fit_from(problem, floored, steps, tolerance, method, max_rounds, on_step, secant_below, result.steps)
        restarted = tuple(key for key, a, b in zip(problem.keys, result.values, floored, strict=True) if a != b)
        result = replace(_lower_cost(problem, result, second, method), floor_restart=restarted)
    if not sound(result) and spread_fits and problem.model_indices:
        starts = spread_starts(problem, values, 1.0 / problem.noise, method, spread=spread)
        fits = []
        for start in starts[:spread_fits]:
            steps_before = result.steps + sum(f.steps for f in fits)
            fits.append(
                replace(
                    _fit_from(
                        problem, start, steps, tolerance, method, max_rounds, on_step, secant_below, steps_before
                    ),
                    spread_start=start,
                )
            )
            if sound(fits[-1]):
                break
        result = _spread_kept(problem, result, fits, method)
    return result


FIRST_FIT_STORY = (
    "noise_given",
    "noise_rounds",
    "delay_start",
    "delay_restart",
    "floor_restart",
    "spread_fits",
    "spread_start",
)
"""The fields of a kept single-shooting fit (`join_segments`) taken from the fit it started from: how that went."""


def join_segments(
    problem: Problem,
    first: FitResult,
    steps: int = 50,
    tolerance: float = 0.1,
    method: str = "autodiff",
    on_step: Callable[[int, float, np.ndarray], None] | None = None,
    secant_below: float = SECANT_BELOW,
) -> tuple[Problem, FitResult]:
    """Single shooting from a multiple-shooting fit: `first`'s estimates fitted again with every stretch of data
    one segment (`Problem.joined`), weighted by `first`'s noise.

    Multiple shooting frees a start state per segment, and those absorb part of what the parameters do at each
    segment's start; single shooting keeps that information (on the arm of docs/sysid.md, intervals about 3%
    narrower and squared errors about 10% lower), but needs a simulation that follows the data through a whole
    stretch, so it starts where the multiple-shooting fit ended and is kept only if it is `sound`.

    Args:
        steps: the single-shooting fit's iterations; on_step counts on from `first.steps`.

    Returns:
        The problem of the kept fit and the fit: the joined problem and its fit, with `joined` "kept", and
        the multiple-shooting fit's story (restarts, noise rounds) and every fit's steps and Jacobians; else
        `problem` and `first`, with `joined` saying why.
    """
    if not sound(first):
        return problem, replace(first, joined="not tried: the multiple-shooting fit is not sound")
    try:
        joined = problem.joined(first.noise)
    except ValueError as e:
        return problem, replace(first, joined=f"not tried: {e}")
    starts = first.start_states[np.searchsorted(problem.segments.start_rows, joined.segments.start_rows)]
    second = _fit_from(
        joined, first.values, steps, tolerance, method, 1, on_step, secant_below, first.steps, start_states=starts
    )
    counted = {"steps": first.steps + second.steps, "jacobians": first.jacobians + second.jacobians}
    if not sound(second):
        why = "did not converge" if not second.converged else f"left residuals {second.misfit:.3g} times the noise"
        return problem, replace(first, joined=f"not kept: the single-shooting fit {why}", **counted)
    story = {name: getattr(first, name) for name in FIRST_FIT_STORY}
    return joined, replace(second, joined="kept", **story, **counted)


def sound(result: FitResult) -> bool:
    """Converged, with residuals within `MISFIT_LIMIT` times the noise the data show (`shac.sysid.noise.sound_fit`)."""
    return sound_fit(result.converged, result.misfit)


def spread_starts(
    problem: Problem,
    values: np.ndarray,
    weights: np.ndarray,
    method: str = "autodiff",
    count: int = SPREAD_STARTS,
    spread: float = SPREAD,
) -> np.ndarray:
    """[C, P] starts spread around `values` [P], least cost first (C <= count: a start whose simulation is not
    finite is left out), the segments starting from their measured states as in `scan_delay`.

    A model parameter above a lower bound alone is lower + (value - lower) * spread**u; one between two
    finite bounds is lower + (upper - lower) * (u + 1) / 2; u in [-1, 1] comes from a scrambled Sobol
    sequence of fixed seed (so the starts are reproducible and fill the box evenly in any dimension). The
    control delay keeps its value in `values`. A start far from the minimum can end where a ratio of
    parameters is right and their scale is not (a cart and its pole 4,100 times heavier than either, with
    friction to match); the cost of a simulation from the measured states ranks the starts by how near
    the data they begin.
    """
    model = list(problem.model_indices)
    u = 2 * qmc.Sobol(len(model), scramble=True, seed=0).random_base2(max(int(np.ceil(np.log2(count))), 0))[:count] - 1
    starts = np.tile(np.asarray(values, np.float64), (len(u), 1))
    for column, i in enumerate(model):
        bounds = problem.bounds[i]
        if np.isfinite(bounds.upper) and bounds.unit is None:
            starts[:, i] = bounds.lower + (bounds.upper - bounds.lower) * (u[:, column] + 1) / 2
        else:
            starts[:, i] = bounds.lower + (values[i] - bounds.lower) * spread ** u[:, column]
    x0 = problem.segments.measured[:, 0]
    costs = np.array([weighted_cost(problem, start, x0, weights, method) for start in starts])
    order = np.argsort(costs, kind="stable")
    return starts[order[np.isfinite(costs[order])]]


def _spread_kept(problem: Problem, first: FitResult, fits: list[FitResult], method: str) -> FitResult:
    """The first `sound` of `fits`, else the least-cost of `first` and `fits` (under the problem's initial
    noise), counted as `_counting_all`."""
    if not fits:
        return first
    passed = [f for f in fits if sound(f)]
    if passed:
        kept = passed[0]
    else:
        weights = 1.0 / problem.noise
        everyone = [first, *fits]
        kept = everyone[
            int(np.argmin([weighted_cost(problem, r.values, r.start_states, weights, method) for r in everyone]))
        ]
    return replace(_counting_all(kept, first, fits), spread_fits=len(fits))


def _lower_cost(problem: Problem, first: FitResult, second: FitResult, method: str) -> FitResult:
    """The fit of lower cost under `first`'s noise, counted as `_counting_all`."""
    weights = 1.0 / np.atleast_2d(first.noise)
    costs = [weighted_cost(problem, r.values, r.start_states, weights, method) for r in (first, second)]
    return _counting_all(second if costs[1] < costs[0] else first, first, [second])


def _counting_all(kept: FitResult, first: FitResult, later: list[FitResult]) -> FitResult:
    """`kept` with `steps`, `seconds_per_jacobian` and `jacobians` of `first` and the `later` fits together, and
    `first`'s record of the restarts before them."""
    every = [first, *later]
    return replace(
        kept,
        steps=sum(f.steps for f in every),
        seconds_per_jacobian=float(np.mean([f.seconds_per_jacobian for f in every])),
        jacobians=sum(f.jacobians for f in every),
        delay_start=first.delay_start,
        delay_restart=first.delay_restart,
        floor_restart=first.floor_restart,
    )


def floor_restart(problem: Problem, values: np.ndarray) -> np.ndarray | None:
    """`values` [P] with each parameter at its floor (`Bounds`) back at its initial value; None if none is.

    A parameter above its floor leaves it when the data pull it back; at a minimum on the floor they do
    not. On the arm (24 parameters) such minima were wrong ones: a joint's damping and friction at the
    floor, its armature and gain making up for them (docs/sysid.md, "Coverage benchmark").
    A second fit from the other estimates, with these parameters back where the first one started,
    looks for a minimum off the floor.
    """
    floored = [
        i for i, (bounds, value) in enumerate(zip(problem.bounds, values, strict=True)) if bounds.at_floor(value)
    ]
    if not floored:
        return None
    restart = np.array(values, np.float64)
    restart[floored] = problem.initial_values[floored]
    return restart


def kink_restart(problem: Problem, values: np.ndarray) -> float | None:
    """The delay (s) to fit again from, or None: the fitted delay mirrored across the multiple of the physics
    step h nearest to it, when it lies within `DELAY_KINK_WINDOW` h of one (not 0).

    The controls are piecewise linear in the delay between multiples of h (`shac.sysid.signals`), so the
    cost has a kink at each: a Gauss-Newton fit can settle just on one side while the true delay lies
    just on the other, the other parameters making up the difference. On the arm (24 parameters, 20 ms
    control steps) every false convergence of the coverage benchmark ended 0.01 to 0.15 ms below 20 ms
    with the true delay 0.4 to 1.4 ms above (docs/sysid.md).
    """
    if problem.delay_index is None:
        return None
    h = problem.mj_model.opt.timestep
    delay = float(values[problem.delay_index])
    kink = round(delay / h) * h
    if kink <= 0 or abs(delay - kink) > DELAY_KINK_WINDOW * h:
        return None
    mirrored = 2 * kink - delay if delay != kink else kink + DELAY_KINK_WINDOW * h / 2
    bounds = problem.bounds[problem.delay_index]
    return float(mirrored) if bounds.lower <= mirrored <= bounds.upper else None


def residuals_function(problem: Problem, method: str) -> Callable:
    """`problem.residuals` (MJX) for "autodiff", `problem.residuals_mujoco` (MuJoCo's C simulator) otherwise."""
    return problem.residuals if method == "autodiff" else problem.residuals_mujoco


def weighted_cost(
    problem: Problem, values: np.ndarray, x0: np.ndarray, weights: np.ndarray, method: str = "autodiff"
) -> float:
    """Sum of squared residuals at `values` [P] and start states `x0` [S, nx] under `weights` ([K, nx], per
    recording); inf where the simulation is not finite."""
    residuals = residuals_function(problem, method)(values, x0, weights)
    return float(np.sum(residuals**2)) if np.isfinite(residuals).all() else np.inf


def _fit_from(
    problem: Problem,
    values: np.ndarray,
    steps: int,
    tolerance: float,
    method: str,
    max_rounds: int,
    on_step: Callable[[int, float, np.ndarray], None] | None,
    secant_below: float,
    first_step: int = 0,
    start_states: np.ndarray | None = None,
) -> FitResult:
    """`fit` from `values` [P] (the delay scan done), its rounds of noise estimation included; `on_step`
    counts from `first_step`. The segments start from `start_states` [S, nx] (default: their first samples)."""
    derivative = np.vectorize(lambda i, t: problem.bounds[i].derivative(t), otypes=[np.float64])
    lower, upper = problem.theta_limits()
    timings: list[float] = []
    noise = problem.noise.copy()  # [K, nx]
    last: dict = {}  # the last Jacobian: a new round's first, and the final one, are taken where it was

    def make_functions(weights):
        residuals_of = residuals_function(problem, method)

        def residuals_fn(theta, x0):
            return residuals_of(problem.to_values(theta), x0, weights)

        def jacobian_fn(theta, x0):
            if last and np.array_equal(last["theta"], theta) and np.array_equal(last["x0"], x0):
                jacobian = problem.reweight(last["jacobian"], last["weights"], weights)
            else:
                start = time.perf_counter()
                r, d_values, d_x0 = problem.jacobian(problem.to_values(theta), x0, weights, method)
                timings.append(time.perf_counter() - start)
                jacobian = (r, d_values * derivative(np.arange(len(theta)), theta), d_x0)
            last.update(theta=theta.copy(), x0=x0.copy(), weights=weights, jacobian=jacobian)
            return jacobian

        return residuals_fn, jacobian_fn

    theta = problem.to_theta(values)
    x0 = problem.segments.measured[:, 0].copy() if start_states is None else np.array(start_states, np.float64)
    total, losses, settled, reestimated = 0, [], problem.noise_given, 0
    count = problem.segments.measured.size
    for round_ in range(max_rounds):
        weighted_by = noise
        residuals_fn, jacobian_fn = make_functions(1.0 / noise)
        done = first_step + total

        def progress(step, cost, theta, done=done):
            if on_step is not None:
                on_step(done + step, 2 * cost / count, problem.to_values(theta))

        solution = least_squares.levenberg_marquardt(
            residuals_fn,
            jacobian_fn,
            theta,
            x0,
            steps - total,
            tolerance,
            progress,
            lower=lower,
            upper=upper,
            secant_below=secant_below,
        )
        total += solution.steps
        theta, x0 = solution.theta, solution.x
        losses.extend(2 * c / count for c in solution.costs[1 if round_ else 0 :])
        if problem.noise_given or not solution.converged:
            break
        updated = reestimate_noise(solution, noise, problem.segments.measured, problem.segment_recording)
        measured = np.isfinite(noise)
        settled = bool(np.abs(updated[measured] / noise[measured] - 1).max() < NOISE_RTOL)
        noise, reestimated = updated, reestimated + 1
        if settled:
            break
    residuals, shared, local = solution.residuals, solution.shared, solution.local
    if settled and not problem.noise_given:  # the covariance at the final noise estimate
        residuals, shared, local = make_functions(1.0 / noise)[1](theta, x0)
        weighted_by = noise
    theta_information = least_squares.Normal.build(residuals, shared, local).information()
    slope = derivative(np.arange(len(theta)), theta)
    return FitResult(
        values=problem.to_values(theta),
        information=theta_information / (slope[:, None] * slope[None, :]),
        start_states=x0,
        noise=noise[0] if problem.single else noise,
        noise_given=problem.noise_given,
        residuals=residuals,
        converged=bool(solution.converged and settled),
        stalled=solution.stalled,
        steps=total,
        losses=losses,
        step_length=solution.step_length,
        parameter_step_errors=solution.shared_step_errors,
        seconds_per_jacobian=float(np.median(timings[1:] if len(timings) > 1 else timings)),
        jacobians=len(timings),
        misfit=misfit(residuals, weighted_by, problem.segment_recording, problem.data_noise),
        noise_rounds=reestimated,
    )
