"""System identification by multiple shooting through MJX, fitted by Levenberg-Marquardt.

A recorded trajectory (`shac.sysid.recording`) is cut into segments of equal
duration. Each segment starts from its own start state, a decision variable
initialised from the measurement there, and is simulated under the measured
controls. The residuals are, per segment, the start state minus its
measurement and each simulated state minus the next measurement, every
coordinate divided by its noise standard deviation; each measurement enters
exactly once. The named model parameters (`envs.physics.parameters`, bounded as
in `shac.sysid.parameters`) and all start states are fitted together by
Levenberg-Marquardt (`shac.sysid.least_squares`), so noise in the measured start
states does not bias the parameters and the intervals account for the start
states being estimated too. The noise standard deviations are given, or
estimated as `shac.sysid.noise` describes.

Jacobians come from MJX's forward mode (`method="autodiff"`) or from central
differences with MuJoCo's C simulator (`"finite_difference"`, for models MJX
cannot differentiate).
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from envs.physics.parameters import ModelParameter, parse_all, write_all
from shac.sysid import least_squares
from shac.sysid.noise import NOISE_RTOL, initial_noise, reestimate_noise
from shac.sysid.parameters import Bounds
from shac.sysid.recording import Trajectory, simulate_mujoco

METHODS = ("autodiff", "finite_difference")
MIN_SEGMENT_SAMPLES = 5


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
        measured: [S, L, nx] measured states (qpos then qvel); row 0 is the start.
        ctrl: [S, L - 1, nu] the controls applied from each sample to the next.
    """

    start_rows: np.ndarray
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
        segments = cls(start_rows=starts, measured=states[rows], ctrl=trajectory.ctrl[rows[:, :-1]])
        return segments, len(trajectory.time) - rows.size


class Problem:
    """The fitting problem: a model, the parameters to estimate, and segments of data.

    Args:
        mj_model: the MuJoCo model (its current parameter values are the
            initial guess; it is copied, not changed).
        keys: parameters as `element:name:attribute`.
        trajectory: the recorded data; checked against the model here, before anything compiles.
        segment_seconds: duration of each segment (default: `default_segment_seconds`).
        bounds: per-key bounds (default: positive, unbounded above).
        noise: (qpos, qvel) noise standard deviations, each a scalar or one per
            coordinate; None estimates them.

    Raises:
        ValueError: unusable data or settings, in one line.
    """

    def __init__(
        self,
        mj_model: mujoco.MjModel,
        keys: list[str] | tuple[str, ...],
        trajectory: Trajectory,
        segment_seconds: float | None = None,
        bounds: dict[str, Bounds] | None = None,
        noise: tuple[float | np.ndarray, float | np.ndarray] | None = None,
    ):
        self.mj_model = copy.deepcopy(mj_model)
        self.parameters: tuple[ModelParameter, ...] = parse_all(list(keys), mj_model)
        self.keys = tuple(keys)
        self.bounds = tuple((bounds or {}).get(key, Bounds()) for key in keys)
        trajectory.check(mj_model.nq, mj_model.nv, mj_model.nu)
        dt = trajectory.dt
        self.n_substeps = round(dt / mj_model.opt.timestep)
        if self.n_substeps < 1 or abs(self.n_substeps * mj_model.opt.timestep - dt) > 1e-6 * max(dt, 1.0):
            raise ValueError(
                f"sample spacing {dt:.6g} s is not a multiple of the model time step {mj_model.opt.timestep} s"
            )
        if segment_seconds is None:
            segment_seconds = default_segment_seconds(trajectory)
        elif segment_seconds < dt:
            raise ValueError(f"segment_seconds={segment_seconds} is shorter than the sample spacing {dt:.6g} s")
        self.trajectory = trajectory
        self.segment_length = round(segment_seconds / dt) + 1
        self.segment_seconds = (self.segment_length - 1) * dt
        self.stretches = trajectory.stretches()
        self.segments, self.samples_left_out = Segments.cut(trajectory, self.segment_length)
        self.nq, self.nv = mj_model.nq, mj_model.nv
        if noise is None:
            self.noise, self.noise_given = initial_noise(trajectory), False
        else:
            qpos_noise = np.broadcast_to(np.asarray(noise[0], np.float64), (self.nq,))
            qvel_noise = np.broadcast_to(np.asarray(noise[1], np.float64), (self.nv,))
            self.noise, self.noise_given = np.concatenate([qpos_noise, qvel_noise]), True
            if not (self.noise > 0).all():
                raise ValueError(f"noise standard deviations must be > 0, got {self.noise.tolist()}")
        with jax.enable_x64(True):
            self.mjx_model = mjx.put_model(mj_model, impl="jax")

    @property
    def initial_values(self) -> np.ndarray:
        return np.array([p.read(self.mj_model) for p in self.parameters])

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
        if len(self.stretches) > 1:
            line += f" from {len(self.stretches)} contiguous stretches (gaps in time split the recording)"
        if self.samples_left_out:
            line += f"; {self.samples_left_out} samples at stretch ends left out"
        return line

    # --- residuals [S, L, nx]: (simulated - measured) / noise, start states x0 [S, nx] ---

    def residuals(self, values: np.ndarray, x0: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """float64 [S, L * nx] weighted residuals simulated by MJX in float64."""
        with jax.enable_x64(True):
            r = _residuals(self.mjx_model, self.parameters, self.n_substeps, *self._jax_args(values, x0, weights))
        return np.asarray(r, np.float64).reshape(len(x0), -1)

    def jacobian(
        self, values: np.ndarray, x0: np.ndarray, weights: np.ndarray, method: str = "autodiff"
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Residuals [S, R] and their Jacobians d/d values [S, R, P] and d/d x0_s [S, R, nx] (R = L nx)."""
        if method == "finite_difference":
            return self._jacobian_mujoco(values, x0, weights)
        with jax.enable_x64(True):
            args = self._jax_args(values, x0, weights)
            r, d_values, d_x0 = _jacobian(self.mjx_model, self.parameters, self.n_substeps, *args)
        s = len(x0)
        return (
            np.asarray(r, np.float64).reshape(s, -1),
            np.asarray(d_values, np.float64).reshape(s, -1, len(values)),
            np.asarray(d_x0, np.float64).reshape(s, -1, x0.shape[1]),
        )

    def residuals_mujoco(self, values: np.ndarray, x0: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """`residuals` simulated by MuJoCo's C simulator in float64."""
        model = copy.deepcopy(self.mj_model)
        for parameter, value in zip(self.parameters, values, strict=True):
            parameter.write_mj(model, float(value))
        qpos, qvel = simulate_mujoco(model, x0[:, : self.nq], x0[:, self.nq :], self.segments.ctrl, self.n_substeps)
        simulated = np.concatenate([x0[:, None], np.concatenate([qpos, qvel], axis=-1)], axis=1)
        return ((simulated - self.segments.measured) * weights).reshape(len(x0), -1)

    def _jacobian_mujoco(self, values, x0, weights, rel_step=1e-5):
        """Central differences of `residuals_mujoco`: 2 (P + nx) simulations of all segments."""
        r = self.residuals_mujoco(values, x0, weights)
        d_values = []
        for i in range(len(values)):
            h = rel_step * max(abs(values[i]), 1e-8)
            up, down = np.array(values, np.float64), np.array(values, np.float64)
            up[i] += h
            down[i] -= h
            d_values.append(
                (self.residuals_mujoco(up, x0, weights) - self.residuals_mujoco(down, x0, weights)) / (2 * h)
            )
        d_x0 = []
        for j in range(x0.shape[1]):
            h = rel_step * max(np.abs(x0[:, j]).max(), 1.0)
            up, down = np.array(x0), np.array(x0)
            up[:, j] += h
            down[:, j] -= h
            d_x0.append(
                (self.residuals_mujoco(values, up, weights) - self.residuals_mujoco(values, down, weights)) / (2 * h)
            )
        return r, np.stack(d_values, axis=-1), np.stack(d_x0, axis=-1)

    def _jax_args(self, values, x0, weights):
        f64 = functools.partial(jnp.asarray, dtype=jnp.float64)
        return f64(values), f64(x0), f64(self.segments.ctrl), f64(self.segments.measured), f64(weights)


def _segment_residuals(model, parameters, n_substeps, values, x0, ctrl, measured, weights):
    """[L, nx] weighted residuals of one segment: values [P], x0 [nx], ctrl [L-1, nu], measured [L, nx]."""
    model = write_all(model, parameters, values)
    nq = model.nq
    data = mjx.make_data(model).replace(qpos=x0[:nq], qvel=x0[nq:])

    def sample(data, u):
        data = data.replace(ctrl=u)
        data = jax.lax.fori_loop(0, n_substeps, lambda _, d: mjx.step(model, d), data)
        return data, jnp.concatenate([data.qpos, data.qvel])

    simulated = jax.lax.scan(sample, data, ctrl)[1]
    return (jnp.concatenate([x0[None], simulated]) - measured) * weights


@functools.partial(jax.jit, static_argnums=(1, 2))
def _residuals(model, parameters, n_substeps, values, x0, ctrl, measured, weights):
    f = functools.partial(_segment_residuals, model, parameters, n_substeps)
    return jax.vmap(f, in_axes=(None, 0, 0, 0, None))(values, x0, ctrl, measured, weights)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _jacobian(model, parameters, n_substeps, values, x0, ctrl, measured, weights):
    f = functools.partial(_segment_residuals, model, parameters, n_substeps)

    def one(x0, ctrl, measured):
        r = f(values, x0, ctrl, measured, weights)
        d_values, d_x0 = jax.jacfwd(f, argnums=(0, 1))(values, x0, ctrl, measured, weights)
        return r, d_values, d_x0

    return jax.vmap(one)(x0, ctrl, measured)


@dataclass(frozen=True)
class FitResult:
    """Outcome of `fit`.

    Attributes:
        values: [P] estimates.
        information: [P, P] information matrix (inverse covariance) of the values, with the start states free.
        start_states: [S, nx] fitted segment start states.
        noise: [nx] noise standard deviations (qpos then qvel), given or estimated.
        noise_given: whether `noise` was given rather than estimated.
        residuals: [S, L * nx] final residuals divided by `noise`.
        converged: the last Gauss-Newton step was under `tolerance` standard
            errors (or under 1 where the cost stalled, see `shac.sysid.least_squares`)
            and the noise estimate had settled, within `steps`.
        stalled: the last round stopped because the cost stopped decreasing.
        steps: Levenberg-Marquardt iterations taken, all rounds together.
        losses: mean squared weighted residual after each accepted step.
        step_length: the last Gauss-Newton step in standard errors.
        seconds_per_jacobian: median time of one Jacobian (all segments).
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
    seconds_per_jacobian: float


def fit(
    problem: Problem,
    steps: int = 50,
    tolerance: float = 0.1,
    method: str = "autodiff",
    max_rounds: int = 5,
    on_step: Callable[[int, float, np.ndarray], None] | None = None,
) -> FitResult:
    """Fits the parameters and start states by Levenberg-Marquardt, estimating the noise unless given.

    Round one weights the residuals by the problem's initial noise; after each
    round the noise of every coordinate is re-estimated from the residuals
    (divided by 1 - leverage, so the start states' share is not counted as
    noise) and the fit continues from where it stopped, until the estimate
    changes by less than `NOISE_RTOL` or `max_rounds` is reached.

    Args:
        steps: Levenberg-Marquardt iterations allowed over all rounds.
        tolerance: converged when the Gauss-Newton step is shorter than this many standard errors.
        method: "autodiff" (MJX forward mode) or "finite_difference" (MuJoCo's C simulator).
        on_step: called with (step, loss, values) after each iteration.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method '{method}'; available: {', '.join(METHODS)}")
    derivative = np.vectorize(lambda i, t: problem.bounds[i].derivative(t), otypes=[np.float64])
    timings: list[float] = []
    noise = problem.noise.copy()

    def make_functions(weights):
        residuals_of = problem.residuals if method == "autodiff" else problem.residuals_mujoco

        def residuals_fn(theta, x0):
            return residuals_of(problem.to_values(theta), x0, weights)

        def jacobian_fn(theta, x0):
            start = time.perf_counter()
            r, d_values, d_x0 = problem.jacobian(problem.to_values(theta), x0, weights, method)
            timings.append(time.perf_counter() - start)
            return r, d_values * derivative(np.arange(len(theta)), theta), d_x0

        return residuals_fn, jacobian_fn

    theta = problem.to_theta(problem.initial_values)
    x0 = problem.segments.measured[:, 0].copy()
    total, losses, settled = 0, [], problem.noise_given
    count = problem.segments.measured.size
    for round_ in range(max_rounds):
        residuals_fn, jacobian_fn = make_functions(1.0 / noise)
        offset = total

        def progress(step, cost, theta, offset=offset):
            if on_step is not None:
                on_step(offset + step, 2 * cost / count, problem.to_values(theta))

        solution = least_squares.levenberg_marquardt(
            residuals_fn, jacobian_fn, theta, x0, steps - total, tolerance, progress
        )
        total += solution.steps
        theta, x0 = solution.theta, solution.x
        losses.extend(2 * c / count for c in solution.costs[1 if round_ else 0 :])
        if problem.noise_given or not solution.converged:
            break
        updated = reestimate_noise(solution, noise, problem.segments.measured)
        settled = bool(np.abs(updated / noise - 1).max() < NOISE_RTOL)
        noise = updated
        if settled:
            break
    residuals, shared, local = solution.residuals, solution.shared, solution.local
    if settled and not problem.noise_given:  # the covariance at the final noise estimate
        residuals, shared, local = make_functions(1.0 / noise)[1](theta, x0)
    theta_information = least_squares.Normal.build(residuals, shared, local).information()
    slope = derivative(np.arange(len(theta)), theta)
    return FitResult(
        values=problem.to_values(theta),
        information=theta_information / (slope[:, None] * slope[None, :]),
        start_states=x0,
        noise=noise,
        noise_given=problem.noise_given,
        residuals=residuals,
        converged=bool(solution.converged and settled),
        stalled=solution.stalled,
        steps=total,
        losses=losses,
        step_length=solution.step_length,
        seconds_per_jacobian=float(np.median(timings[1:] if len(timings) > 1 else timings)),
    )
