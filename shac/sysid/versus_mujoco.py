"""This project's fit against MuJoCo's own `mujoco.sysid`, on the same simulated recordings.

Each dataset is recorded as the coverage benchmark records it (`shac.sysid.coverage.simulate`:
MuJoCo's C simulator, the true model, smooth random torques, a random start state, Gaussian noise)
and fitted twice from the same initial guesses within the same bounds:

- shac: `shac.sysid.fit.fit` (multiple shooting, start states fitted, noise estimated; with `join_segments`,
  then `shac.sysid.fit.join_segments`: single shooting from its estimates), with the 95% intervals of
  `shac.sysid.report.analyze`; converged as the fit says.
- mujoco.sysid: single shooting from the first (noisy) recorded state, `mujoco.sysid.optimize` with
  MuJoCo's least squares (finite-difference Jacobians over `mujoco.rollout`) on qpos and qvel, and
  the 95% intervals of `mujoco.sysid.calculate_intervals`. It has no convergence flag: a fit counts
  as converged when MuJoCo's solver stopped on its step or gradient tolerance, not on an iteration
  limit, a failed factorisation or insufficient reduction. Its model is built by the same
  `ModelParameter.write_mj` as ours (through `build_residual_fn`'s `build_model`), so every model
  parameter means the same in both; both read a command as held until the next sample.

An interval covers when its fit converged and it is bounded and holds the true value (as in the coverage benchmark,
which also asks that its own fits be sound). A `mujoco.sysid` fit that raises (its rollout of an unstable trial model
resets the simulation's clock, and its time series then refuses the times) is scored as a failed fit, with its error
as the status, and the benchmark goes on with the next dataset.
"""

from __future__ import annotations

import copy
import io
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np

from envs.physics.parameters import ModelParameter
from shac.sysid import coverage, signals
from shac.sysid.coverage import Recording
from shac.sysid.fit import Problem, fit, join_segments
from shac.sysid.parameters import Bounds
from shac.sysid.report import analyze

TOOLS = ("shac", "mujoco.sysid")
CONVERGED_STATUS = ("norm(dx) < tol.", "norm(gradient) < tol.")
"""MuJoCo least-squares terminations counted as converged (the others: iterations, factorisation, reduction)."""


@dataclass(frozen=True)
class ToolFit:
    """One tool's fit of one dataset, per parameter where a list.

    Attributes:
        estimates: the fitted values. ci95: [lower, upper] 95% intervals (inf wide where undetermined).
        relative_errors: |estimate / truth - 1|. covered: the fit converged and its interval holds the truth.
        converged: see the module docstring. status: the solver's own word on how it stopped.
        steps: solver iterations. fit_seconds: wall time of the fit alone (and its intervals).
    """

    estimates: list[float]
    ci95: list[list[float]]
    relative_errors: list[float]
    covered: list[bool]
    converged: bool
    status: str
    steps: int
    fit_seconds: float


@dataclass(frozen=True)
class Comparison:
    """Both tools on one dataset: its sample spacing, simulated noise, true values and the fits by tool name."""

    dt: float
    qpos_noise: float
    qvel_noise: float
    truth: list[float]
    fits: dict[str, ToolFit]


def check_keys(keys: tuple[str, ...]) -> None:
    """Raises ValueError for a parameter mujoco.sysid cannot fit here (the control delay)."""
    for key in keys:
        if signals.is_signal(key):
            raise ValueError(
                f"'{key}' cannot be fitted by mujoco.sysid: its SignalTransform delays the measured signals, "
                "not the commands; compare model parameters only (element:name:attribute)"
            )


def scored(estimates, lower, upper, truth, converged: bool, status: str, steps: int, seconds: float) -> ToolFit:
    """A ToolFit from the estimates, the 95% interval ends and the true values (each float [P])."""
    estimates, lower, upper, truth = (np.asarray(a, np.float64) for a in (estimates, lower, upper, truth))
    covered = coverage.interval_covers(converged, lower, upper, truth)
    return ToolFit(
        estimates=estimates.tolist(),
        ci95=np.stack([lower, upper], axis=-1).tolist(),
        relative_errors=np.abs(estimates / truth - 1).tolist(),
        covered=[bool(c) for c in covered],
        converged=bool(converged),
        status=status,
        steps=int(steps),
        fit_seconds=float(seconds),
    )


def failed(truth, error: Exception, seconds: float) -> ToolFit:
    """A fit that raised `error` after `seconds`: no estimates (nan), errors inf, nothing covered, not converged."""
    nothing = [float("nan")] * len(truth)
    return ToolFit(
        estimates=nothing,
        ci95=[[-float("inf"), float("inf")]] * len(truth),
        relative_errors=[float("inf")] * len(truth),
        covered=[False] * len(truth),
        converged=False,
        status=f"raised {type(error).__name__}: {error}",
        steps=0,
        fit_seconds=seconds,
    )


def bounds(guess_model: mujoco.MjModel, keys: tuple[str, ...], upper: float) -> list[Bounds]:
    """Per key, [0, `upper` times its value in `guess_model`] (mujoco.sysid needs finite bounds).

    Raises:
        ValueError: an initial guess that is not positive.
    """
    guesses = {key: ModelParameter.parse(key, guess_model).read(guess_model) for key in keys}
    for key, value in guesses.items():
        if not value > 0:
            raise ValueError(f"'{key}' starts at {value:g}; the comparison needs a positive initial guess (init=)")
    return [Bounds(0.0, upper * value) for value in guesses.values()]


def fit_shac(
    guess_model: mujoco.MjModel,
    keys: tuple[str, ...],
    recording: Recording,
    steps: int,
    upper: float,
    method: str = "autodiff",
    joined: bool = False,
) -> ToolFit:
    """This project's fit of `recording` from `guess_model`'s values within `bounds`, its Jacobians by `method`,
    then with `joined` single shooting from its estimates (`join_segments`)."""
    started = time.perf_counter()
    limits = dict(zip(keys, bounds(guess_model, keys, upper), strict=True))
    problem = Problem(guess_model, keys, recording.data, bounds=limits)
    result = fit(problem, steps=steps, method=method)
    if joined:
        _, result = join_segments(problem, result, steps, method=method)
    report = analyze(keys, result.values, result.information, result.converged)
    seconds = time.perf_counter() - started
    entries = [report["parameters"][key] for key in keys]
    low, high = zip(*(e["ci95"] for e in entries), strict=True)
    status = "converged" if result.converged else "stalled" if result.stalled else "iteration limit"
    status += f" (segments joined: {result.joined})" if joined else ""
    estimates = [e["estimate"] for e in entries]
    return scored(estimates, low, high, recording.truth, result.converged, status, result.steps, seconds)


def fit_mujoco(
    guess_model: mujoco.MjModel,
    spec: mujoco.MjSpec,
    keys: tuple[str, ...],
    recording: Recording,
    steps: int,
    upper: float,
) -> ToolFit:
    """mujoco.sysid's fit of `recording` from `guess_model`'s values within `bounds`.

    `spec` compiles to a model with `guess_model`'s names and sizes (mujoco.sysid checks the data against it).

    Raises:
        ValueError: a signal parameter among `keys`, or a model whose state mujoco.sysid names
            otherwise than as qpos then qvel.
        ImportError: mujoco.sysid without its optional dependencies.
    """
    from mujoco import sysid

    if not hasattr(sysid, "optimize"):  # mujoco.sysid hides itself when they are missing
        raise ImportError("mujoco.sysid lacks its optional dependencies; pip install -e '.[mujoco-sysid]'")
    check_keys(keys)
    parameters = [ModelParameter.parse(key, guess_model) for key in keys]
    params = sysid.ParameterDict()
    for key, parameter, bound in zip(keys, parameters, bounds(guess_model, keys, upper), strict=True):
        params.add(sysid.Parameter(key, parameter.read(guess_model), bound.lower, bound.upper))

    def build_model(values: sysid.ParameterDict, _spec: mujoco.MjSpec) -> mujoco.MjModel:
        model = copy.deepcopy(guess_model)
        for key, parameter in zip(keys, parameters, strict=True):
            parameter.write_mj(model, float(values[key].value[0]))
        return model

    data, h = recording.data, guess_model.opt.timestep
    n_substeps = round(recording.dt / h)
    qpos_map, qvel_map, _, _ = sysid.TimeSeries.compute_all_state_mappings(guess_model)
    state_map = qpos_map | qvel_map
    columns = np.concatenate([indices for _, indices in state_map.values()])
    if not np.array_equal(columns, np.arange(guess_model.nq + guess_model.nv)):
        raise ValueError(f"mujoco.sysid's state signals {list(state_map)} are not qpos then qvel in order")
    measured = sysid.TimeSeries.from_names(data.time, np.hstack([data.qpos, data.qvel]), guess_model, list(state_map))
    held = np.repeat(data.ctrl[:-1], n_substeps, axis=0)  # [(T - 1) n_substeps, nu]: every physics step's command
    control = sysid.TimeSeries.from_control_names(np.arange(len(held)) * h, held, guess_model)
    initial = sysid.create_initial_state(guess_model, data.qpos[0], data.qvel[0])
    sequences = sysid.ModelSequences("model", spec, "recording", initial, control, measured, allow_missing_sensors=True)
    residual_fn = sysid.build_residual_fn(models_sequences=[sequences], build_model=build_model)
    log = io.StringIO()
    started = time.perf_counter()
    fitted, result = sysid.optimize(params, residual_fn, optimizer="mujoco", verbose=False, max_iters=steps, output=log)
    residuals, _, _ = residual_fn(result.x, fitted)
    _, half_widths = sysid.calculate_intervals(residuals, result.jac)
    seconds = time.perf_counter() - started
    match = re.search(r"Terminated after (\d+) iterations: (.+?\.) y:", log.getvalue())
    if match is None:
        raise RuntimeError(f"mujoco.sysid's solver printed no termination line: {log.getvalue()[-300:]!r}")
    estimates = np.array([fitted[key].value[0] for key in keys])
    converged = match.group(2) in CONVERGED_STATUS
    return scored(
        estimates,
        estimates - half_widths,
        estimates + half_widths,
        recording.truth,
        converged,
        match.group(2),
        int(match.group(1)),
        seconds,
    )


def summarize(comparisons: list[Comparison], keys: tuple[str, ...]) -> dict[str, dict]:
    """Per tool: `datasets`, `converged` (count), `median_fit_seconds`, `lower_median_error` (the datasets on which
    its median relative error over the parameters is below the other tool's) and per key `coverage` (the fraction
    of datasets whose interval covers) and `median_relative_error`."""
    medians = {tool: np.array([np.median(c.fits[tool].relative_errors) for c in comparisons]) for tool in TOOLS}
    summary = {}
    for tool in TOOLS:
        fits = [c.fits[tool] for c in comparisons]
        covered, errors = np.array([f.covered for f in fits]), np.array([f.relative_errors for f in fits])
        others = np.stack([medians[other] for other in TOOLS if other != tool])
        summary[tool] = {
            "datasets": len(fits),
            "converged": sum(f.converged for f in fits),
            "median_fit_seconds": float(np.median([f.fit_seconds for f in fits])),
            "lower_median_error": int(np.sum(medians[tool] < others.min(axis=0))),
        }
        for i, key in enumerate(keys):
            summary[tool][key] = {
                "coverage": float(covered[:, i].mean()),
                "median_relative_error": float(np.median(errors[:, i])),
            }
    return summary


def table(summary: dict[str, dict], keys: tuple[str, ...], truth: dict[str, float]) -> str:
    """Markdown: one row per tool and parameter (median error, coverage, converged, median fit time)."""
    lines = [
        "| tool | parameter (truth) | median error | coverage of the 95% interval | converged | median fit time |",
        "|---|---|---|---|---|---|",
    ]
    for tool, stats in summary.items():
        for key in keys:
            lines.append(
                f"| {tool} | `{key}` ({truth[key]:g}) | {100 * stats[key]['median_relative_error']:.3g}% | "
                f"{100 * stats[key]['coverage']:.0f}% | {stats['converged']}/{stats['datasets']} | "
                f"{stats['median_fit_seconds']:.3g} s |"
            )
    if all("lower_median_error" in stats for stats in summary.values()):  # results.json of earlier versions lack it
        datasets = next(iter(summary.values()))["datasets"]
        counts = ", ".join(f"{tool} on {stats['lower_median_error']}" for tool, stats in summary.items())
        lines += ["", f"The lower median error over the {len(keys)} parameters, per recording: {counts} of {datasets}."]
    return "\n".join(lines)


def models(
    env, true_values: dict[str, float], initial_values: dict[str, float], upper: float
) -> tuple[mujoco.MjModel, mujoco.MjModel]:
    """(true model, model holding the initial guesses) of `env` (`shac.sysid.coverage.models`), checked for
    both tools: the keys of `true_values` are fitted, from `initial_values` or else the model's value.

    Raises:
        ValueError: a parameter mujoco.sysid cannot fit, one the model lacks, or a guess that is not positive.
    """
    check_keys(tuple(true_values))
    true_model, guess_model = coverage.models(env.mj_model, true_values, initial_values)
    bounds(guess_model, tuple(true_values), upper)
    return true_model, guess_model


def run(
    env,
    true_model: mujoco.MjModel,
    guess_model: mujoco.MjModel,
    keys: tuple[str, ...],
    datasets: int,
    seconds: float,
    dt: float,
    max_hz: float,
    qpos_noise: tuple[float, float],
    qvel_noise: tuple[float, float],
    steps: int,
    upper: float,
    seed: int,
    on_dataset: Callable[[int, Comparison], None] | None = None,
    method: str = "autodiff",
    join_segments: bool = False,
) -> tuple[list[Comparison], float]:
    """Records `datasets` recordings of `true_model` (dataset k from the generator seeded [seed, k], as
    launch/sysid_coverage.py seeds it, start states from `env`'s reset) and fits `keys` in each with both
    tools from `guess_model`'s values (the models of `models`).

    Args:
        qpos_noise, qvel_noise: (low, high); each dataset's noise std is log-uniform in between.
        steps: each solver's iterations at most. upper: see `bounds`.
        on_dataset: called with (k, comparison) after each dataset.
        method: how this project's fit takes its Jacobians (`shac.sysid.fit.fit`).
        join_segments: this project's fit ends in single shooting from its estimates (`fit_shac`).

    Returns:
        The comparisons and the seconds of a one-step warm-up fit of the first dataset by this project's
        fit before the timed ones: it compiles the fit's functions, which the fit times then exclude.
    """
    spec, initial_state = env.mjcf_spec(), coverage.reset_states(env)
    comparisons, compile_seconds = [], 0.0
    for k in range(datasets):
        rng = np.random.default_rng([seed, k])
        recording = coverage.simulate(true_model, keys, initial_state, rng, dt, seconds, max_hz, qpos_noise, qvel_noise)
        if k == 0:
            compile_seconds = fit_shac(guess_model, keys, recording, 1, upper, method).fit_seconds
        fits = {"shac": fit_shac(guess_model, keys, recording, steps, upper, method, join_segments)}
        started = time.perf_counter()
        try:
            fits["mujoco.sysid"] = fit_mujoco(guess_model, spec, keys, recording, steps, upper)
        except ImportError:
            raise
        except Exception as error:  # the other tool's own failure ends its fit, not the benchmark
            fits["mujoco.sysid"] = failed(recording.truth, error, time.perf_counter() - started)
        comparisons.append(Comparison(dt, recording.qpos_noise, recording.qvel_noise, recording.truth, fits))
        if on_dataset is not None:
            on_dataset(k, comparisons[-1])
    return comparisons, compile_seconds
