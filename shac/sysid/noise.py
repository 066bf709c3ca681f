"""The measurement noise model of system identification, and its estimates.

Noise model: independent Gaussian measurement noise, one standard deviation per
qpos and qvel coordinate, constant in time; controls are exact, apart from a
control delay when one is given or fitted (`shac.sysid.signals`). The standard
deviations are given, or estimated: from third differences of the data to
start (`initial_noise`), then from the fit's residuals (each divided by 1 - its
leverage, `reestimate_noise`) until they change by less than 5%
(`NOISE_RTOL`; the rounds are run by `shac.sysid.fit.fit`). Several recordings
in one fit have one set of standard deviations each, estimated from their own
data and residuals. A velocity nobody measured has noise inf (weight 0) throughout.
"""

from __future__ import annotations

import numpy as np

from shac.sysid import least_squares
from shac.sysid.recording import Trajectory

NOISE_RTOL = 0.05
"""Noise estimation stops when no standard deviation changes by more than this fraction."""
MISFIT_LIMIT = 3.0
"""A fit whose residuals are more than this many times the noise the data show (`misfit`) has not explained
the data: a model that does leaves residuals at the noise, within a few tens of percent."""


def initial_noise(trajectory: Trajectory) -> np.ndarray:
    """[nx] a first noise estimate per qpos/qvel coordinate, from third differences within stretches.

    For white noise of standard deviation s a third difference has standard
    deviation s sqrt(20); a smooth signal sampled finely adds little. The median
    absolute deviation keeps fast motions from dominating. Floored at
    `noise_floor`.
    """
    states = np.concatenate([trajectory.qpos, trajectory.qvel], axis=1)
    diffs = [np.diff(states[s], n=3, axis=0) for s in trajectory.stretches() if s.stop - s.start > 3]
    if not diffs:
        return noise_floor(states)
    d3 = np.concatenate(diffs)
    mad = np.median(np.abs(d3 - np.median(d3, axis=0)), axis=0)
    return np.maximum(1.4826 * mad / np.sqrt(20.0), noise_floor(states))


def misfit(residuals: np.ndarray, noise: np.ndarray, groups: np.ndarray, data_noise: np.ndarray) -> float:
    """How many times the noise the data show (`initial_noise`, or the noise given) the fit's residuals are, at
    most over the coordinates and recordings.

    A wrong minimum can pass every test of convergence: on a cart-pole, parameters with the pole's hinge
    stuck by friction of 1e10 N m converged (before the steps stayed within the bounds) with the residuals 160
    times the noise, and the noise estimated from those residuals would call them noise. The third
    differences of the data do not depend on the fit. They do not see noise a filter smoothed or a quantizer
    held, so on such signals a right fit can exceed `MISFIT_LIMIT` too: a stated noise level then replaces them.

    Args:
        residuals: [S, L * nx] weighted by 1 / `noise` of each segment's recording.
        noise: [K, nx] the weights' noise (inf: not measured, left out); groups: int [S] each segment's
            recording; data_noise: [K, nx].
    """
    segments, nx = len(residuals), noise.shape[-1]
    measured = np.where(np.isfinite(noise), noise, 0.0)  # an unmeasured velocity (inf, weight 0) counts 0
    unweighted = residuals.reshape(segments, -1, nx) * measured[groups][:, None]
    ratios = [np.sqrt(np.mean(unweighted[groups == k] ** 2, axis=(0, 1))) / data_noise[k] for k in np.unique(groups)]
    return float(np.max(ratios))


def reported_noise(noise: np.ndarray) -> list[float | None]:
    """Standard deviations [n] as a report lists them: None for a coordinate nobody measured (inf)."""
    return [float(n) if np.isfinite(n) else None for n in noise]


def residual_rms(residuals: np.ndarray, noise: np.ndarray) -> float:
    """The root mean square of noise-weighted residuals [S, L * nx] over the coordinates measured in every
    recording (`noise` [nx] or [K, nx], inf where not measured: their residuals are 0 by weight)."""
    measured = np.isfinite(np.atleast_2d(noise)).all(axis=0)
    return float(np.sqrt(np.mean(residuals.reshape(len(residuals), -1, len(measured))[..., measured] ** 2)))


def sound_fit(converged: bool, misfit_ratio: float) -> bool:
    """Whether a fit's estimates can be used: converged, with residuals within `MISFIT_LIMIT` times the noise
    the data show (`misfit`)."""
    return converged and misfit_ratio <= MISFIT_LIMIT


def noise_floor(states: np.ndarray) -> np.ndarray:
    """[nx] the smallest noise level assumed: 1e-9 of each coordinate's magnitude, above float64 simulation error."""
    return 1e-9 * (1.0 + np.abs(states).max(axis=0))


def reestimate_noise(
    solution: least_squares.Solution, noise: np.ndarray, measured: np.ndarray, groups: np.ndarray | None = None
) -> np.ndarray:
    """Noise per coordinate (and recording) from a converged fit's residuals, each divided by 1 - its leverage.

    Args:
        solution: residuals [S, L * nx] weighted by 1 / `noise` (of each segment's recording).
        noise: [nx], or [K, nx] one row per recording (group); inf for a coordinate not measured (kept).
        measured: [S, L, nx] the data (for the floor).
        groups: int [S] the recording of each segment, in 0..K-1 (default: all in one).

    Returns:
        The estimate, shaped like `noise`: each recording's from its own segments' residuals.
    """
    per_group = np.atleast_2d(noise)
    count, nx = per_group.shape
    segments = len(solution.residuals)
    groups = np.zeros(segments, int) if groups is None else np.asarray(groups)
    normal = least_squares.Normal.build(solution.residuals, solution.shared, solution.local)
    leverage = least_squares.leverages(solution.shared, solution.local, normal).reshape(segments, -1, nx)
    finite = np.where(np.isfinite(per_group), per_group, 0.0)
    residuals = solution.residuals.reshape(segments, -1, nx) * finite[groups][:, None]
    updated = np.empty_like(per_group, dtype=np.float64)
    for k in range(count):
        mine = groups == k
        squares = (residuals[mine].reshape(-1, nx) ** 2).sum(axis=0)
        dof = np.maximum((1 - leverage[mine]).reshape(-1, nx).sum(axis=0), 1.0)
        updated[k] = np.maximum(np.sqrt(squares / dof), noise_floor(measured[mine].reshape(-1, nx)))
    updated[np.isinf(per_group)] = np.inf  # a velocity nobody measured stays so
    return updated.reshape(np.shape(noise))
