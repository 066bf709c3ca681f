"""What the data can and cannot tell about identified parameters.

At the estimate, the Gauss-Newton approximation of the Fisher information of
the (log) parameters, F = J^T J / sigma^2 with J = d residuals / d log(values)
and sigma^2 the residual variance, gives standard errors (the diagonal of
F^-1) and, through its eigen-decomposition, the combinations of parameters
the data pins down (large eigenvalues) or leaves free (small ones).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from matplotlib.figure import Figure

Z_95 = 1.959964


def analyze(
    keys: tuple[str, ...],
    values: np.ndarray,
    jacobian: np.ndarray,
    residuals: np.ndarray,
    max_relative_std: float = 0.05,
    component_threshold: float = 0.3,
) -> dict:
    """The identifiability report of an estimate.

    Args:
        keys: parameter names, P of them.
        values: float [P] estimates.
        jacobian: float [M, P] d residuals / d values at the estimate.
        residuals: float [M] residuals at the estimate.
        max_relative_std: a direction whose relative standard deviation
            exceeds this is flagged as unresolved.
        component_threshold: parameters whose |component| in a flagged
            direction exceeds this are named in its flag.

    Returns:
        A JSON-ready dict: `parameters` (estimate, std_error, relative_std,
        ci95 per key), `directions` (eigenvalue, relative_std, unit vector per
        key, weakest first), `flags` (plain-language sentences),
        `residual_std`, `condition_number`.
    """
    m, p = jacobian.shape
    sigma2 = float(residuals @ residuals) / max(m - p, 1)
    relative_jacobian = jacobian * values[None, :]
    fisher = relative_jacobian.T @ relative_jacobian / sigma2
    eigenvalues, eigenvectors = np.linalg.eigh(fisher)
    covariance = np.linalg.pinv(fisher)
    relative_std = np.sqrt(np.maximum(np.diag(covariance), 0.0))

    parameters = {
        key: {
            "estimate": float(values[i]),
            "std_error": float(values[i] * relative_std[i]),
            "relative_std": float(relative_std[i]),
            "ci95": [float(values[i] * (1 - Z_95 * relative_std[i])), float(values[i] * (1 + Z_95 * relative_std[i]))],
        }
        for i, key in enumerate(keys)
    }
    directions, flags = [], []
    for k in range(p):
        eigenvalue = float(eigenvalues[k])
        direction_std = float(1.0 / np.sqrt(eigenvalue)) if eigenvalue > 0 else float("inf")
        vector = eigenvectors[:, k] * np.sign(eigenvectors[np.argmax(np.abs(eigenvectors[:, k])), k])
        directions.append(
            {
                "eigenvalue": eigenvalue,
                "relative_std": direction_std,
                "vector": {key: float(vector[i]) for i, key in enumerate(keys)},
            }
        )
        if direction_std > max_relative_std:
            involved = [keys[i] for i in np.argsort(-np.abs(vector)) if abs(vector[i]) > component_threshold]
            flags.append(_flag(involved, vector, keys, direction_std, np.linalg.norm(relative_jacobian, axis=0)))
    positive = eigenvalues[eigenvalues > 0]
    return {
        "parameters": parameters,
        "directions": directions,
        "flags": flags,
        "residual_std": float(np.sqrt(sigma2)),
        "condition_number": float(positive.max() / positive.min()) if positive.size else float("inf"),
    }


def _flag(
    involved: list[str], vector: np.ndarray, keys: tuple[str, ...], direction_std: float, effects: np.ndarray
) -> str:
    """A sentence on one unresolved direction; `effects` are the norms of d residuals / d log(value)."""
    spread = f"±{100 * direction_std:.0f}% along this direction"
    if len(involved) == 1:
        weak = keys.index(involved[0])
        others = [i for i in range(len(keys)) if i != weak]
        if not others:
            return f"{involved[0]} is poorly determined ({spread}); add motions that excite it."
        strong = max(others, key=lambda i: effects[i])
        ratio = effects[strong] / max(effects[weak], 1e-300)
        return (
            f"{involved[0]} is poorly determined ({spread}): its effect on this data is {ratio:.3g}x smaller than "
            f"that of {keys[strong]}, which absorbs it; the data cannot separate {involved[0]} from "
            f"{keys[strong]}: add faster and larger motions."
        )
    signs = {key: np.sign(vector[keys.index(key)]) for key in involved}
    relation = "trade off" if len(set(signs.values())) > 1 else "move together"
    names = ", ".join(involved[:-1]) + f" and {involved[-1]}"
    return f"{names} {relation} ({spread}): the data cannot separate them; add faster and larger motions."


def summary_lines(report: dict) -> list[str]:
    """The printed summary: one line per parameter, then the flags."""
    lines = []
    for key, entry in report["parameters"].items():
        low, high = entry["ci95"]
        lines.append(
            f"{key}: {entry['estimate']:.6g} ± {entry['std_error']:.2g} "
            f"({100 * entry['relative_std']:.1f}%), 95% CI [{low:.6g}, {high:.6g}]"
        )
    lines.append(f"condition number {report['condition_number']:.3g}, residual std {report['residual_std']:.3g}")
    lines.extend(f"FLAG: {flag}" for flag in report["flags"])
    if not report["flags"]:
        lines.append("every direction is resolved")
    return lines


def least_identifiable_pair(report: dict) -> tuple[str, ...]:
    """The (up to) two parameters with the largest components in the weakest direction."""
    vector = report["directions"][0]["vector"]
    return tuple(sorted(vector, key=lambda key: -abs(vector[key]))[:2])


def plot_landscape(
    loss_fn: Callable[[np.ndarray], np.ndarray], keys: tuple[str, ...], report: dict, path: str, points: int = 21
) -> None:
    """Writes a PNG of the loss over the least identifiable pair (or the one parameter).

    Each axis spans the estimate times exp(+-3 relative standard errors), at
    least +-10% and at most a factor e. Other parameters stay at their estimates.

    Args:
        loss_fn: values float [G, P] -> losses float [G].
    """
    values = np.array([report["parameters"][key]["estimate"] for key in keys])
    pair = least_identifiable_pair(report)
    spans = {key: float(np.clip(3 * report["parameters"][key]["relative_std"], 0.1, 1.0)) for key in pair}
    axes = {key: values[keys.index(key)] * np.exp(np.linspace(-spans[key], spans[key], points)) for key in pair}
    figure = Figure(figsize=(5.5, 4.5), layout="constrained")
    ax = figure.subplots()
    if len(pair) == 1:
        grid = np.repeat(values[None], points, axis=0)
        grid[:, keys.index(pair[0])] = axes[pair[0]]
        ax.plot(axes[pair[0]], loss_fn(grid))
        ax.set_xlabel(pair[0])
        ax.set_ylabel("loss")
    else:
        x, y = np.meshgrid(axes[pair[0]], axes[pair[1]])
        grid = np.repeat(values[None], x.size, axis=0)
        grid[:, keys.index(pair[0])] = x.ravel()
        grid[:, keys.index(pair[1])] = y.ravel()
        losses = np.asarray(loss_fn(grid)).reshape(x.shape)
        contour = ax.contourf(x, y, np.log10(losses), levels=20, cmap="viridis")
        figure.colorbar(contour, ax=ax, label="log10 loss")
        ax.plot(values[keys.index(pair[0])], values[keys.index(pair[1])], "r+", markersize=12, label="estimate")
        ax.set_xlabel(pair[0])
        ax.set_ylabel(pair[1])
        ax.legend(loc="upper right")
    ax.set_title("loss landscape, least identifiable direction")
    figure.savefig(path, dpi=100)
