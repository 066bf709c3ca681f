"""Do the sysid intervals mean what they say? Coverage of the 95% interval on simulated data.

Each of K datasets is recorded by MuJoCo's C simulator from a model with known
("true") parameters, under its own smooth random excitation and start state, at
one of several sampling rates (in turn), with Gaussian measurement noise of a
random level, and fitted from the model's initial guesses. Optionally each dataset
has its own true system: the model parameters spread log-uniformly around the
true model's (`spread`), and a control delay drawn from a range, fitted as
`signal:ctrl:delay`. Coverage is the fraction of datasets whose fit is sound (converged, residuals
at the noise: `shac.sysid.noise.sound_fit`) and whose 95% interval is bounded and contains the
true value; honest intervals give about 95%.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import jax
import mujoco
import numpy as np

from envs.physics.parameters import ModelParameter
from shac.sysid import noise, signals
from shac.sysid.fit import Problem, fit
from shac.sysid.recording import Trajectory, random_excitation, record
from shac.sysid.report import analyze


@dataclass(frozen=True)
class Dataset:
    """One simulated dataset and its fit.

    Attributes:
        dt: sample spacing (s). qpos_noise, qvel_noise: the noise simulated.
        truth, estimates, std_errors: per parameter; `truth` is this dataset's true value.
        covered: per parameter, whether the fit is sound and its 95% interval is bounded and holds the
            truth (`interval_covers`).
        converged, steps: from the fit. fit_seconds: wall time of `fit` alone.
        stalled, step_length, parameter_step_errors, misfit, spread_fits: from the fit
            (`shac.sysid.fit.FitResult`); None in records made before they were kept.
        delay_error_ms: |estimated - true delay| in ms, and delay_within_step: whether that is at
            most one sample spacing `dt`; both None without `signal:ctrl:delay` among the parameters.
    """

    dt: float
    qpos_noise: float
    qvel_noise: float
    truth: list[float]
    estimates: list[float]
    std_errors: list[float]
    covered: list[bool]
    converged: bool
    steps: int
    fit_seconds: float
    delay_error_ms: float | None
    delay_within_step: bool | None
    stalled: bool | None = None
    step_length: float | None = None
    parameter_step_errors: float | None = None
    misfit: float | None = None
    spread_fits: int | None = None


@dataclass(frozen=True)
class Recording:
    """One simulated recording and the truth behind it.

    Attributes:
        data: the noisy recording. dt: its sample spacing (s).
        qpos_noise, qvel_noise: the noise simulated. truth: per key, this recording's true value.
        true_delay: the control delay simulated (s).
    """

    data: Trajectory
    dt: float
    qpos_noise: float
    qvel_noise: float
    truth: list[float]
    true_delay: float


def simulate(
    true_model: mujoco.MjModel,
    keys: tuple[str, ...],
    initial_state: Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]],
    rng: np.random.Generator,
    dt: float,
    seconds: float,
    max_hz: float,
    qpos_noise: tuple[float, float],
    qvel_noise: tuple[float, float],
    delay: tuple[float, float] = (0.0, 0.0),
    spread: float = 0.0,
) -> Recording:
    """Records one dataset from `true_model` (the arguments of `simulate_and_fit`)."""
    sigma_qpos, sigma_qvel = (float(np.exp(rng.uniform(*np.log(bounds)))) for bounds in (qpos_noise, qvel_noise))
    ctrl = random_excitation(seconds, dt, true_model.nu, rng, max_hz)
    qpos0, qvel0 = initial_state(rng)
    model_keys, _ = signals.split(keys)
    if spread > 0:
        true_model = copy.deepcopy(true_model)
        for key in model_keys:
            parameter = ModelParameter.parse(key, true_model)
            parameter.write_mj(true_model, parameter.read(true_model) * np.exp(rng.uniform(-spread, spread)))
    true_delay = float(rng.uniform(*delay)) if delay[1] > delay[0] else float(delay[0])
    truth = [
        true_delay if key == signals.DELAY else float(ModelParameter.parse(key, true_model).read(true_model))
        for key in keys
    ]
    data = record(true_model, ctrl, qpos0, qvel0, dt, sigma_qpos, sigma_qvel, rng, delay=true_delay)
    return Recording(data, dt, sigma_qpos, sigma_qvel, truth, true_delay)


def simulate_and_fit(
    true_model: mujoco.MjModel,
    guess_model: mujoco.MjModel,
    keys: tuple[str, ...],
    initial_state: Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]],
    rng: np.random.Generator,
    dt: float,
    seconds: float,
    max_hz: float,
    qpos_noise: tuple[float, float],
    qvel_noise: tuple[float, float],
    method: str = "autodiff",
    steps: int = 50,
    delay: tuple[float, float] = (0.0, 0.0),
    initial_delay: float | None = None,
    spread: float = 0.0,
) -> Dataset:
    """Records one dataset from `true_model` and fits `keys` starting from `guess_model`.

    Args:
        keys: model parameters, and `signal:ctrl:delay` to fit the control delay.
        initial_state: rng -> (qpos [nq], qvel [nv]).
        qpos_noise, qvel_noise: (low, high); the noise level is log-uniform in between.
        steps: the fit's Levenberg-Marquardt iterations at most.
        delay: (low, high) seconds, low <= high: the true control delay is uniform in between (low
            when equal). It is simulated even without `signal:ctrl:delay` in `keys`; the fit then assumes none.
        initial_delay: the fit's initial delay (default: `delay`'s low end).
        spread: each model parameter in `keys` of the true model is multiplied by exp(U(-spread, spread)).
    """
    recording = simulate(
        true_model, keys, initial_state, rng, dt, seconds, max_hz, qpos_noise, qvel_noise, delay, spread
    )
    truth, true_delay = recording.truth, recording.true_delay
    fitted_delay = signals.DELAY in keys
    start = delay[0] if initial_delay is None else initial_delay
    signal_values = {signals.DELAY: start} if fitted_delay else None
    problem = Problem(guess_model, keys, recording.data, signal_values=signal_values)
    started = time.perf_counter()
    result = fit(problem, steps=steps, method=method)
    fit_seconds = time.perf_counter() - started
    report = analyze(
        keys, result.values, result.information, result.converged, units=problem.report_units(result.values)
    )
    entries = [report["parameters"][key] for key in keys]
    lower, upper = np.array([e["ci95"] for e in entries]).T
    covered = interval_covers(noise.sound_fit(result.converged, result.misfit), lower, upper, np.array(truth))
    delay_error = abs(entries[keys.index(signals.DELAY)]["estimate"] - true_delay) if fitted_delay else None
    return Dataset(
        dt=dt,
        qpos_noise=recording.qpos_noise,
        qvel_noise=recording.qvel_noise,
        truth=truth,
        estimates=[e["estimate"] for e in entries],
        std_errors=[e["std_error"] for e in entries],
        covered=[bool(c) for c in covered],
        converged=result.converged,
        steps=result.steps,
        fit_seconds=fit_seconds,
        delay_error_ms=None if delay_error is None else 1000 * delay_error,
        delay_within_step=None if delay_error is None else bool(delay_error <= dt),
        stalled=result.stalled,
        step_length=result.step_length,
        parameter_step_errors=result.parameter_step_errors,
        misfit=result.misfit,
        spread_fits=result.spread_fits,
    )


def interval_covers(sound: bool, lower: np.ndarray, upper: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """[P] bool: the fit is sound and each 95% interval [lower, upper] is bounded and holds the truth.

    An unbounded interval (a direction the data do not determine) says nothing and never counts as covering.
    """
    bounded = np.isfinite(lower) & np.isfinite(upper)
    return sound & bounded & (lower <= truth) & (truth <= upper)


def summarize(datasets: list[Dataset], keys: tuple[str, ...]) -> dict:
    """Coverage, errors against each dataset's truth, convergence and fit time, overall and per sampling rate.

    Returns:
        {"all": {...}, "dt=<rate>": {...}} where each holds `datasets`, `converged`,
        `median_steps`, `median_fit_seconds`, `intervals_covered` of `intervals`, and per key
        `coverage` and, for a model parameter, `median_relative_error`; for `signal:ctrl:delay`, `median_error_ms` and
        `within_one_step`, the fraction of datasets whose fit converged with the delay
        within one sample spacing of the truth.
    """

    def stats(group: list[Dataset]) -> dict:
        truth, estimates = np.array([d.truth for d in group]), np.array([d.estimates for d in group])
        # records made before unbounded intervals stopped counting as covering: their std_error is inf
        covered = np.array([d.covered for d in group]) & np.isfinite([d.std_errors for d in group])
        summary = {
            "datasets": len(group),
            "converged": int(sum(d.converged for d in group)),
            "median_steps": float(np.median([d.steps for d in group])),
            "median_fit_seconds": float(np.median([d.fit_seconds for d in group])),
            "intervals_covered": int(covered.sum()),
            "intervals": int(covered.size),
        }
        for i, key in enumerate(keys):
            summary[key] = {"coverage": float(covered[:, i].mean())}
            if key == signals.DELAY:
                summary[key]["median_error_ms"] = float(np.median([d.delay_error_ms for d in group]))
                summary[key]["within_one_step"] = float(np.mean([d.converged and d.delay_within_step for d in group]))
            else:
                summary[key]["median_relative_error"] = float(np.median(np.abs(estimates[:, i] / truth[:, i] - 1)))
        return summary

    rates = sorted({d.dt for d in datasets})
    return {"all": stats(datasets), **{f"dt={r:g}": stats([d for d in datasets if d.dt == r]) for r in rates}}


def reset_states(env) -> Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]]:
    """rng -> (qpos [nq], qvel [nv]) float64: a start state from `env`'s reset distribution (`initial_data`)."""
    initial_data = jax.jit(env.initial_data)

    def initial_state(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        data = jax.device_get(initial_data(jax.random.key(int(rng.integers(2**31)))))
        return np.asarray(data.qpos, np.float64), np.asarray(data.qvel, np.float64)

    return initial_state


def models(
    model: mujoco.MjModel, true_values: dict[str, float], initial_values: dict[str, float]
) -> tuple[mujoco.MjModel, mujoco.MjModel]:
    """(true model, model holding the initial guesses): copies of `model` with the model values written in.

    `initial_values` may hold `signal:ctrl:delay`, the fit's initial delay (`simulate_and_fit`'s
    `initial_delay`), which no model holds.

    Raises:
        ValueError: a signal parameter among `true_values` (each dataset draws its true delay from a
            range), or an unknown one among `initial_values`.
    """
    for key in true_values:
        if signals.is_signal(key):
            raise ValueError(
                f"the coverage benchmark draws each dataset's true delay from a range; give delay=[low,high] "
                f"(seconds) instead of '{key}' among the true values"
            )
    model_init, _ = signals.split_values(initial_values)
    true_model, guess_model = copy.deepcopy(model), copy.deepcopy(model)
    for target, values in ((true_model, true_values), (guess_model, model_init)):
        for key, value in values.items():
            ModelParameter.parse(key, target).write_mj(target, value)
    return true_model, guess_model
