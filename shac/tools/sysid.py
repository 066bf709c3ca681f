"""Differentiable system identification by multiple shooting through MJX, with identifiability.

Recorded trajectories are cut into short segments; each segment is simulated
from its measured initial state under the measured controls, and the named
model parameters (`envs.physics.parameters`) are fitted to the measured positions and
velocities by gradient descent (optax) on a log (or bounded logistic)
reparameterisation that keeps them positive and within bounds.

Data format (NPZ with these arrays, or CSV with a header naming these columns,
vector columns as `qpos_0, qpos_1, ...`):
    time: float [T], seconds, evenly spaced by a multiple of the model's time step.
    qpos: float [T, nq]; qvel: float [T, nv]; ctrl: float [T, nu], the control
    applied from each sample to the next.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import optax
from flax import struct
from mujoco import mjx
from mujoco import rollout as mj_rollout

from envs.physics.parameters import ModelParameter, parse_all, write_all


@dataclass(frozen=True)
class Trajectory:
    """A recorded trajectory (see the module docstring for the format)."""

    time: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray
    ctrl: np.ndarray

    @classmethod
    def load(cls, path: str | Path) -> Trajectory:
        """Reads an NPZ or CSV file."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no trajectory file at '{path}'")
        if path.suffix == ".npz":
            with np.load(path) as data:
                missing = {"time", "qpos", "qvel", "ctrl"} - set(data.files)
                if missing:
                    raise ValueError(f"'{path}' lacks arrays {sorted(missing)}; needs time, qpos, qvel, ctrl")
                return cls(time=data["time"], qpos=data["qpos"], qvel=data["qvel"], ctrl=data["ctrl"])
        if path.suffix == ".csv":
            table = np.genfromtxt(path, delimiter=",", names=True)
            columns = table.dtype.names

            def block(prefix: str) -> np.ndarray:
                names = sorted((c for c in columns if c.startswith(prefix + "_")), key=lambda c: int(c.split("_")[-1]))
                if not names:
                    raise ValueError(f"'{path}' has no {prefix}_0, {prefix}_1, ... columns")
                return np.stack([table[c] for c in names], axis=-1)

            return cls(time=table["time"], qpos=block("qpos"), qvel=block("qvel"), ctrl=block("ctrl"))
        raise ValueError(f"unsupported trajectory file '{path}'; accepted: .npz, .csv")

    def save(self, path: str | Path) -> None:
        """Writes an NPZ file."""
        np.savez(path, time=self.time, qpos=self.qpos, qvel=self.qvel, ctrl=self.ctrl)

    @property
    def dt(self) -> float:
        return float(self.time[1] - self.time[0])


@struct.dataclass
class Segments:
    """Multiple-shooting segments, S of them, each L samples long.

    Attributes:
        qpos0: [S, nq] and qvel0: [S, nv] measured initial states.
        ctrl: [S, L, nu] controls.
        qpos: [S, L, nq] and qvel: [S, L, nv] measured states after each control.
    """

    qpos0: jax.Array
    qvel0: jax.Array
    ctrl: jax.Array
    qpos: jax.Array
    qvel: jax.Array

    @classmethod
    def cut(cls, trajectory: Trajectory, length: int) -> Segments:
        """Non-overlapping segments of `length` samples (a shorter tail is dropped)."""
        count = (len(trajectory.time) - 1) // length
        if count < 1:
            raise ValueError(f"segment length {length} exceeds the trajectory ({len(trajectory.time)} samples)")
        starts = np.arange(count) * length
        steps = starts[:, None] + np.arange(1, length + 1)[None]
        return cls(
            qpos0=jnp.asarray(trajectory.qpos[starts], jnp.float32),
            qvel0=jnp.asarray(trajectory.qvel[starts], jnp.float32),
            ctrl=jnp.asarray(trajectory.ctrl[steps - 1], jnp.float32),
            qpos=jnp.asarray(trajectory.qpos[steps], jnp.float32),
            qvel=jnp.asarray(trajectory.qvel[steps], jnp.float32),
        )


@dataclass(frozen=True)
class Bounds:
    """Where a parameter may lie: (lower, upper), upper may be inf."""

    lower: float = 0.0
    upper: float = float("inf")

    def to_value(self, theta: jax.Array) -> jax.Array:
        """Unconstrained theta -> value in (lower, upper): exp above a lower bound, logistic between two."""
        if np.isinf(self.upper):
            return self.lower + jnp.exp(theta)
        return self.lower + (self.upper - self.lower) * jax.nn.sigmoid(theta)

    def to_theta(self, value: float) -> float:
        if not self.lower < value < self.upper:
            raise ValueError(f"initial value {value} is outside the bounds ({self.lower}, {self.upper})")
        if np.isinf(self.upper):
            return float(np.log(value - self.lower))
        u = (value - self.lower) / (self.upper - self.lower)
        return float(np.log(u / (1.0 - u)))


class Problem:
    """The fitting problem: a model, the parameters to estimate, and segments of data.

    Args:
        mj_model: the MuJoCo model (its current parameter values are the
            initial guess; it is copied, not changed).
        keys: parameters as `element:name:attribute`.
        trajectory: the recorded data.
        segment_length: samples per multiple-shooting segment.
        bounds: per-key bounds (default: positive, unbounded above).
    """

    def __init__(
        self,
        mj_model: mujoco.MjModel,
        keys: list[str] | tuple[str, ...],
        trajectory: Trajectory,
        segment_length: int,
        bounds: dict[str, Bounds] | None = None,
    ):
        self.mj_model = mj_model
        self.parameters: tuple[ModelParameter, ...] = parse_all(list(keys), mj_model)
        self.keys = tuple(keys)
        self.bounds = tuple((bounds or {}).get(key, Bounds()) for key in keys)
        self.n_substeps = round(trajectory.dt / mj_model.opt.timestep)
        if self.n_substeps < 1 or abs(self.n_substeps * mj_model.opt.timestep - trajectory.dt) > 1e-6:
            raise ValueError(
                f"sample spacing {trajectory.dt} s is not a multiple of the model time step {mj_model.opt.timestep} s"
            )
        self.trajectory = trajectory
        self.segments = Segments.cut(trajectory, segment_length)
        self.scale_qpos = jnp.asarray(np.maximum(trajectory.qpos.std(axis=0), 1e-6), jnp.float32)
        self.scale_qvel = jnp.asarray(np.maximum(trajectory.qvel.std(axis=0), 1e-6), jnp.float32)
        self.mjx_model = mjx.put_model(mj_model, impl="jax")

    @property
    def initial_values(self) -> np.ndarray:
        return np.array([p.read(self.mj_model) for p in self.parameters])

    def to_values(self, theta: jax.Array) -> jax.Array:
        return jnp.stack([b.to_value(theta[i]) for i, b in enumerate(self.bounds)])

    def to_theta(self, values: np.ndarray) -> jax.Array:
        return jnp.array([b.to_theta(float(v)) for b, v in zip(self.bounds, values, strict=True)])

    def simulate(self, values: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Predicted (qpos [S, L, nq], qvel [S, L, nv]) of every segment under `values` [P]."""
        model = write_all(self.mjx_model, self.parameters, values)

        def segment(qpos0, qvel0, ctrl):
            data = mjx.make_data(model).replace(qpos=qpos0, qvel=qvel0)

            def sample(data, u):
                data = data.replace(ctrl=u)
                data = jax.lax.fori_loop(0, self.n_substeps, lambda _, d: mjx.step(model, d), data)
                return data, (data.qpos, data.qvel)

            return jax.lax.scan(sample, data, ctrl)[1]

        return jax.vmap(segment)(self.segments.qpos0, self.segments.qvel0, self.segments.ctrl)

    def residuals(self, values: jax.Array) -> jax.Array:
        """float32 [M] prediction errors, each channel divided by its spread in the data."""
        qpos, qvel = self.simulate(values)
        errors = ((qpos - self.segments.qpos) / self.scale_qpos, (qvel - self.segments.qvel) / self.scale_qvel)
        return jnp.concatenate([e.reshape(-1) for e in errors])

    def loss(self, values: jax.Array) -> jax.Array:
        """Mean squared normalised prediction error."""
        return jnp.mean(self.residuals(values) ** 2)

    def finite_difference_gradient(self, values: np.ndarray) -> np.ndarray:
        """d loss / d values from central differences on MuJoCo's C simulator (any model).

        The fallback for models MJX cannot differentiate: 2 P + 1 simulations
        of all segments.
        """
        residuals = self.residuals_mujoco(values)
        return 2.0 * self.jacobian(values, method="finite_difference").T @ residuals / residuals.size

    def residuals_mujoco(self, values: np.ndarray) -> np.ndarray:
        """`residuals` computed with MuJoCo's C simulator in float64."""
        model = copy.deepcopy(self.mj_model)
        for parameter, value in zip(self.parameters, values, strict=True):
            parameter.write_mj(model, float(value))
        segments = jax.device_get(self.segments)
        qpos, qvel = simulate_mujoco(model, segments.qpos0, segments.qvel0, segments.ctrl, self.n_substeps)
        errors = (
            (qpos - segments.qpos) / np.asarray(self.scale_qpos),
            (qvel - segments.qvel) / np.asarray(self.scale_qvel),
        )
        return np.concatenate([e.reshape(-1) for e in errors])

    def loss_mujoco(self, values: np.ndarray) -> float:
        """`loss` computed with MuJoCo's C simulator in float64."""
        return float(np.mean(self.residuals_mujoco(values) ** 2))

    def jacobian(self, values: np.ndarray, method: str = "autodiff", rel_step: float = 1e-4) -> np.ndarray:
        """float [M, P] d residuals / d values: MJX forward mode, or central differences in MuJoCo."""
        if method == "autodiff":
            return np.asarray(jax.jit(jax.jacfwd(self.residuals))(jnp.asarray(values, jnp.float32)), np.float64)
        columns = []
        for i in range(len(values)):
            step = rel_step * max(abs(values[i]), 1e-8)
            shifted = [np.array(values, np.float64) for _ in range(2)]
            shifted[0][i] += step
            shifted[1][i] -= step
            columns.append((self.residuals_mujoco(shifted[0]) - self.residuals_mujoco(shifted[1])) / (2 * step))
        return np.stack(columns, axis=-1)


def simulate_mujoco(
    model: mujoco.MjModel, qpos0: np.ndarray, qvel0: np.ndarray, ctrl: np.ndarray, n_substeps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Segments simulated by MuJoCo's C `rollout`: qpos [S, L, nq], qvel [S, L, nv] at each sample."""
    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    initial = np.zeros((len(qpos0), mujoco.mj_stateSize(model, spec)))
    for i, (q, v) in enumerate(zip(qpos0, qvel0, strict=True)):
        mujoco.mj_resetData(model, data)
        data.qpos[:], data.qvel[:] = q, v
        mujoco.mj_getState(model, data, initial[i], spec)
    controls = np.repeat(np.asarray(ctrl, np.float64), n_substeps, axis=1)
    states, _ = mj_rollout.rollout(model, data, initial, controls)
    states = states[:, n_substeps - 1 :: n_substeps]
    return states[..., 1 : 1 + model.nq], states[..., 1 + model.nq : 1 + model.nq + model.nv]


def multisine(seconds: float, dt: float, amplitudes: list[float], frequencies: list[float]) -> np.ndarray:
    """An excitation signal float [T, 1] (T = seconds / dt + 1), clipped to [-1, 1]."""
    t = np.arange(round(seconds / dt) + 1) * dt
    signal = sum(a * np.sin(f * t + i) for i, (a, f) in enumerate(zip(amplitudes, frequencies, strict=True)))
    return np.clip(signal, -1.0, 1.0)[:, None]


def record(
    model: mujoco.MjModel,
    ctrl: np.ndarray,
    qpos0: np.ndarray,
    qvel0: np.ndarray,
    dt: float,
    qpos_noise: float = 0.0,
    qvel_noise: float = 0.0,
    seed: int = 0,
) -> Trajectory:
    """A trajectory from MuJoCo's C simulator with Gaussian measurement noise.

    Args:
        ctrl: float [T, nu]; the last row is recorded but not applied.
        qpos0, qvel0: the initial state. dt: sample spacing (a multiple of the time step).
    """
    n_substeps = round(dt / model.opt.timestep)
    qpos, qvel = simulate_mujoco(model, qpos0[None], qvel0[None], ctrl[None, :-1], n_substeps)
    rng = np.random.default_rng(seed)
    qpos = np.concatenate([qpos0[None], qpos[0]])
    qvel = np.concatenate([qvel0[None], qvel[0]])
    return Trajectory(
        time=np.arange(len(ctrl)) * dt,
        qpos=qpos + rng.normal(scale=qpos_noise, size=qpos.shape),
        qvel=qvel + rng.normal(scale=qvel_noise, size=qvel.shape),
        ctrl=ctrl,
    )


@dataclass(frozen=True)
class FitResult:
    """Outcome of `fit`: estimates, the loss history and whether it converged."""

    values: np.ndarray
    losses: list[float]
    converged: bool
    steps: int
    seconds_per_gradient: float


def fit(
    problem: Problem,
    steps: int = 50,
    tolerance: float = 1e-6,
    method: str = "autodiff",
    on_step: Callable[[int, float, np.ndarray], None] | None = None,
) -> FitResult:
    """Fits the parameters by L-BFGS (optax's direction) with a backtracking line search.

    With `method="autodiff"` gradients come from MJX's reverse mode and losses
    from MJX; with `"finite_difference"` both come from MuJoCo's C simulator
    (central differences), for models MJX cannot differentiate. Stops after
    `steps` optimiser steps, or earlier when the relative loss change stayed
    below `tolerance` for 2 steps in a row.

    Args:
        on_step: called with (step, loss, values) after each step.
    """
    if method not in ("autodiff", "finite_difference"):
        raise ValueError(f"unknown method '{method}'; available: autodiff, finite_difference")
    to_values = jax.jit(problem.to_values)
    if method == "autodiff":
        objective = jax.jit(lambda theta: problem.loss(problem.to_values(theta)))
        value_and_grad = jax.jit(jax.value_and_grad(lambda theta: problem.loss(problem.to_values(theta))))
    else:

        def objective(theta):
            return problem.loss_mujoco(np.asarray(to_values(theta), np.float64))

        def value_and_grad(theta):
            values = np.asarray(to_values(theta), np.float64)
            dvalues_dtheta = np.asarray(jax.jacfwd(problem.to_values)(theta)).diagonal()
            grad = problem.finite_difference_gradient(values) * dvalues_dtheta
            return problem.loss_mujoco(values), jnp.asarray(grad, jnp.float32)

    direction_of = optax.scale_by_lbfgs()
    theta = problem.to_theta(problem.initial_values)
    opt_state = direction_of.init(theta)
    losses, quiet, converged, timings, step = [], 0, False, [], 0
    for step in range(1, steps + 1):
        start = time.perf_counter()
        loss, grad = value_and_grad(theta)
        loss = float(loss)
        timings.append(time.perf_counter() - start)
        direction, opt_state = direction_of.update(grad, opt_state, theta)
        theta = _backtrack(objective, theta, loss, grad, -direction)
        quiet = quiet + 1 if losses and abs(losses[-1] - loss) <= tolerance * abs(losses[-1]) else 0
        losses.append(loss)
        if on_step is not None:
            on_step(step, loss, np.asarray(to_values(theta)))
        if quiet >= 2:
            converged = True
            break
    return FitResult(
        values=np.asarray(to_values(theta), np.float64),
        losses=[*losses, float(objective(theta))],
        converged=converged,
        steps=step,
        seconds_per_gradient=float(np.median(timings[1:] if len(timings) > 1 else timings)),
    )


def _backtrack(objective, theta, loss, grad, direction, shrink=0.5, tries=30, armijo=1e-4):
    """theta + a * direction for the first a in 1, 1/2, 1/4, ... that decreases the loss enough."""
    slope = float(jnp.vdot(grad, direction))
    if slope >= 0:  # not a descent direction (stale curvature): fall back to the gradient
        direction, slope = -grad, -float(jnp.vdot(grad, grad))
    step = 1.0
    for _ in range(tries):
        candidate = theta + step * direction
        value = float(objective(candidate))
        if np.isfinite(value) and value <= loss + armijo * step * slope:
            return candidate
        step *= shrink
    return theta


def time_gradient(problem: Problem, values: np.ndarray, method: str) -> float | str:
    """Seconds for one gradient of `problem`'s loss at `values` by `method` (after compilation), or why it failed.

    Args:
        problem: the fitting problem.
        values: float [P] parameter values.
        method: "autodiff" (MJX, jitted) or "finite_difference" (MuJoCo's C simulator).
    """
    try:
        if method == "autodiff":
            grad = jax.jit(jax.grad(problem.loss))
            point = jnp.asarray(values, jnp.float32)
            jax.block_until_ready(grad(point))
            start = time.perf_counter()
            jax.block_until_ready(grad(point))
        else:
            start = time.perf_counter()
            problem.finite_difference_gradient(values)
        return time.perf_counter() - start
    except Exception as e:
        return f"unavailable: {type(e).__name__}: {e}"
