"""The measurement noise model of system identification, and its estimates.

Noise model: independent Gaussian measurement noise, one standard deviation per
qpos and qvel coordinate, constant in time; controls are exact, apart from a
control delay when one is given or fitted (`shac.sysid.signals`). The standard
deviations are given, or estimated: from third differences of the data to
start (`initial_noise`), then from the fit's residuals (each divided by 1 - its
leverage, `reestimate_noise`) until they change by less than 5%
(`NOISE_RTOL`; the rounds are run by `shac.sysid.fit.fit`).
"""

from __future__ import annotations

import numpy as np

from shac.sysid import least_squares
from shac.sysid.recording import Trajectory

NOISE_RTOL = 0.05
"""Noise estimation stops when no standard deviation changes by more than this fraction."""


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


def noise_floor(states: np.ndarray) -> np.ndarray:
    """[nx] the smallest noise level assumed: 1e-9 of each coordinate's magnitude, above float64 simulation error."""
    return 1e-9 * (1.0 + np.abs(states).max(axis=0))


def reestimate_noise(solution: least_squares.Solution, noise: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """[nx] noise per coordinate from a converged fit's residuals, each divided by 1 - its leverage.

    Args:
        solution: residuals weighted by 1 / `noise`. measured: [S, L, nx] the data (for the floor).
    """
    nx = len(noise)
    normal = least_squares.Normal.build(solution.residuals, solution.shared, solution.local)
    leverage = least_squares.leverages(solution.shared, solution.local, normal)
    squares = ((solution.residuals.reshape(-1, nx) * noise) ** 2).sum(axis=0)
    dof = np.maximum((1 - leverage).reshape(-1, nx).sum(axis=0), 1.0)
    return np.maximum(np.sqrt(squares / dof), noise_floor(measured.reshape(-1, nx)))
