"""Do the sysid intervals mean what they say? Coverage of the 95% interval on simulated data.

Each of K datasets is recorded by MuJoCo's C simulator from a model with known
("true") parameters, under its own smooth random excitation and start state, at
one of several sampling rates (in turn), with Gaussian measurement noise of a
random level, and fitted with the default settings from the model's initial
guesses. Coverage is the fraction of datasets whose fit converged and whose 95%
interval contains the true value; honest intervals give about 95%.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np

from envs.physics.parameters import ModelParameter
from shac.sysid import signals
from shac.sysid.fit import Problem, fit
from shac.sysid.recording import random_excitation, record
from shac.sysid.report import analyze


@dataclass(frozen=True)
class Dataset:
    """One simulated dataset and its fit.

    Attributes:
        dt: sample spacing (s). qpos_noise, qvel_noise: the noise simulated.
        estimates, std_errors: per parameter. covered: whether each 95% interval holds the truth.
        converged, steps: from the fit.
    """

    dt: float
    qpos_noise: float
    qvel_noise: float
    estimates: list[float]
    std_errors: list[float]
    covered: list[bool]
    converged: bool
    steps: int


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
) -> Dataset:
    """Records one dataset from `true_model` and fits `keys` starting from `guess_model`.

    Args:
        initial_state: rng -> (qpos [nq], qvel [nv]).
        qpos_noise, qvel_noise: (low, high); the noise level is log-uniform in between.
    """
    truth = np.array([ModelParameter.parse(key, true_model).read(true_model) for key in keys])
    sigma_qpos, sigma_qvel = (float(np.exp(rng.uniform(*np.log(bounds)))) for bounds in (qpos_noise, qvel_noise))
    ctrl = random_excitation(seconds, dt, true_model.nu, rng, max_hz)
    qpos0, qvel0 = initial_state(rng)
    data = record(true_model, ctrl, qpos0, qvel0, dt, sigma_qpos, sigma_qvel, rng)
    problem = Problem(guess_model, keys, data)
    result = fit(problem, method=method)
    report = analyze(keys, result.values, result.information, result.converged)
    entries = [report["parameters"][key] for key in keys]
    covered = [result.converged and e["ci95"][0] <= t <= e["ci95"][1] for e, t in zip(entries, truth, strict=True)]
    return Dataset(
        dt=dt,
        qpos_noise=sigma_qpos,
        qvel_noise=sigma_qvel,
        estimates=[e["estimate"] for e in entries],
        std_errors=[e["std_error"] for e in entries],
        covered=[bool(c) for c in covered],
        converged=result.converged,
        steps=result.steps,
    )


def summarize(datasets: list[Dataset], keys: tuple[str, ...], truth: np.ndarray) -> dict:
    """Coverage, median relative error and convergence, over all datasets and per sampling rate.

    Returns:
        {"all": {...}, "dt=<rate>": {...}} where each holds `datasets`,
        `converged`, `median_steps`, and per key `coverage` and `median_relative_error`.
    """

    def stats(group: list[Dataset]) -> dict:
        errors = np.abs(np.array([d.estimates for d in group]) / truth[None] - 1)
        covered = np.array([d.covered for d in group])
        return {
            "datasets": len(group),
            "converged": int(sum(d.converged for d in group)),
            "median_steps": float(np.median([d.steps for d in group])),
            **{
                key: {"coverage": float(covered[:, i].mean()), "median_relative_error": float(np.median(errors[:, i]))}
                for i, key in enumerate(keys)
            },
        }

    rates = sorted({d.dt for d in datasets})
    return {"all": stats(datasets), **{f"dt={r:g}": stats([d for d in datasets if d.dt == r]) for r in rates}}


def models(
    model: mujoco.MjModel, true_values: dict[str, float], initial_values: dict[str, float]
) -> tuple[mujoco.MjModel, mujoco.MjModel]:
    """(true model, model holding the initial guesses): copies of `model` with the values written in.

    Raises:
        ValueError: a signal parameter (`signal:ctrl:delay`): the benchmark covers model parameters only.
    """
    for key in [*true_values, *initial_values]:
        if signals.is_signal(key):
            raise ValueError(
                f"the coverage benchmark fits model parameters only, not '{key}'; fit a delay with launch/sysid.py"
            )
    true_model, guess_model = copy.deepcopy(model), copy.deepcopy(model)
    for target, values in ((true_model, true_values), (guess_model, initial_values)):
        for key, value in values.items():
            ModelParameter.parse(key, target).write_mj(target, value)
    return true_model, guess_model
