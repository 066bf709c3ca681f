"""What the data can and cannot tell about identified parameters.

The fit's information matrix about the parameters, F = J^T J of the
noise-weighted residuals with every segment start state free (the Schur
complement in `shac.sysid.least_squares`), is the inverse covariance of the
estimates. Taken in relative units (d residuals / d log(values)), its inverse
gives relative standard errors and 95% intervals, and its eigen-decomposition
the combinations of parameters the data pins down (large eigenvalues) or
leaves free (small ones), which are flagged in plain language. A parameter
that may be 0 (the control delay) is taken in a fixed unit instead (the sample
spacing), its interval is cut at 0, and it is printed in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from matplotlib.figure import Figure

from shac.sysid.signals import DELAY

Z_95 = 1.959964
MILLISECONDS = (DELAY,)
"""Parameters in seconds, reported in milliseconds too (an `ms` entry in the report, the printed line)."""
SINGULAR_RTOL = 1e-12
"""Eigenvalues of the relative information below this fraction of the largest count as zero (undetermined)."""


def analyze(
    keys: tuple[str, ...],
    values: np.ndarray,
    information: np.ndarray,
    reliable: bool = True,
    max_relative_std: float = 0.05,
    component_threshold: float = 0.3,
    units: dict[str, float] | None = None,
) -> dict:
    """The identifiability report of an estimate.

    Args:
        keys: parameter names, P of them.
        values: float [P] estimates.
        information: float [P, P] the information matrix about the values
            (inverse covariance), with the segment start states eliminated.
        reliable: whether the fit converged; recorded with every interval.
        max_relative_std: a direction whose relative standard deviation
            exceeds this is flagged as unresolved.
        component_threshold: parameters whose |component| in a flagged
            direction exceeds this are named in its flag.
        units: parameters (>= 0, possibly 0) judged in a fixed unit rather than
            relative to their value, key -> unit: their `relative_std` is the
            standard error in that unit, their interval is cut at 0, and their
            entry records the `unit`.

    Returns:
        A JSON-ready dict: `parameters` (estimate, std_error, relative_std,
        ci95, reliable per key; `unit` for those in `units`; `ms` with estimate,
        std_error and ci95 in milliseconds for a delay), `directions`
        (eigenvalue, relative_std, unit vector per key, weakest first), `flags`
        (plain-language sentences), `condition_number`.
    """
    p = len(keys)
    units = units or {}
    scale = np.array([units.get(key, values[i]) for i, key in enumerate(keys)], np.float64)
    fisher = information * scale[:, None] * scale[None, :]
    eigenvalues, eigenvectors = np.linalg.eigh(fisher)
    determined = eigenvalues > SINGULAR_RTOL * max(eigenvalues.max(), 0.0)
    inverse = np.where(determined, 1.0 / np.where(determined, eigenvalues, 1.0), np.inf)
    share = eigenvectors**2  # share[i, k]: how much of direction k parameter i carries
    variance = np.where(share > 1e-12, share * inverse[None], 0.0).sum(axis=1)
    relative_std = np.sqrt(variance)

    parameters = {}
    for i, key in enumerate(keys):
        std_error = float(scale[i] * relative_std[i])
        low, high = float(values[i] - Z_95 * std_error), float(values[i] + Z_95 * std_error)
        entry = {
            "estimate": float(values[i]),
            "std_error": std_error,
            "relative_std": float(relative_std[i]),
            "ci95": [max(low, 0.0) if key in units else low, high],
            "reliable": reliable,
        }
        if key in units:
            entry["unit"] = float(units[key])
        if key in MILLISECONDS:
            entry["ms"] = {
                "estimate": 1000 * entry["estimate"],
                "std_error": 1000 * std_error,
                "ci95": [1000 * bound for bound in entry["ci95"]],
            }
        parameters[key] = entry
    directions, flags = [], []
    effects = np.sqrt(np.maximum(np.diag(fisher), 0.0))
    for k in range(p):
        direction_std = float(np.sqrt(inverse[k]))
        vector = eigenvectors[:, k] * np.sign(eigenvectors[np.argmax(np.abs(eigenvectors[:, k])), k])
        directions.append(
            {
                "eigenvalue": float(eigenvalues[k]),
                "relative_std": direction_std,
                "vector": {key: float(vector[i]) for i, key in enumerate(keys)},
            }
        )
        if direction_std > max_relative_std:
            involved = [keys[i] for i in np.argsort(-np.abs(vector)) if abs(vector[i]) > component_threshold]
            flags.append(_flag(involved, vector, keys, direction_std, effects))
    positive = eigenvalues[determined]
    return {
        "parameters": parameters,
        "directions": directions,
        "flags": flags,
        "condition_number": float(positive.max() / positive.min()) if positive.size == p else float("inf"),
    }


def _flag(
    involved: list[str], vector: np.ndarray, keys: tuple[str, ...], direction_std: float, effects: np.ndarray
) -> str:
    """A sentence on one unresolved direction; `effects` are the norms of weighted d residuals / d log(value)."""
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
    """The printed summary: convergence first, one line per parameter, the noise model, then the flags.

    Args:
        report: `analyze`'s dict with the fit's `converged`, `stalled`, `steps`,
            `step_length` (standard errors) and `noise` (`noise_model_line`'s input) added;
            with several `recordings` (each a dict of `file`, `seconds`, `samples`,
            `segments` and `noise` {qpos, qvel}), one line per recording follows the noise model.
    """
    remaining = f"the Gauss-Newton step {report['step_length']:.2g} standard errors long"
    stall = "the cost stopped decreasing (the simulation is not smooth at this scale)"
    if report["converged"]:
        lines = [f"converged after {report['steps']} steps, {remaining}" + (f"; {stall}" if report["stalled"] else "")]
    else:
        why = stall if report["stalled"] else "stopped at the step limit"
        lines = [
            f"NOT CONVERGED after {report['steps']} steps: {why}, {remaining}; "
            "every estimate and interval below is unreliable"
        ]
    for key, entry in report["parameters"].items():
        low, high = entry["ci95"]
        if "ms" in entry:
            ms = entry["ms"]
            lines.append(
                f"{key}: {ms['estimate']:.4g} ms ± {ms['std_error']:.2g} ms, "
                f"95% CI [{ms['ci95'][0]:.4g}, {ms['ci95'][1]:.4g}] ms"
                + ("" if entry["reliable"] else " (unreliable: not converged)")
            )
            continue
        lines.append(
            f"{key}: {entry['estimate']:.6g} ± {entry['std_error']:.2g} "
            f"({100 * entry['relative_std']:.2f}%), 95% CI [{low:.6g}, {high:.6g}]"
            + ("" if entry["reliable"] else " (unreliable: not converged)")
        )
    lines.append(noise_model_line(report["noise"]))
    recordings = report.get("recordings", [])
    if len(recordings) > 1:
        lines.extend(recording_line(recording) for recording in recordings)
    lines.append(f"condition number {report['condition_number']:.3g}")
    lines.extend(f"FLAG: {flag}" for flag in report["flags"])
    if not report["flags"]:
        lines.append("every direction is resolved")
    return lines


def noise_model_line(noise: dict) -> str:
    """One sentence on the assumed noise.

    `noise` holds `source` (given or estimated), `qpos` and `qvel` lists (left
    out when several recordings have one set each: `recording_line`), and
    `controls` (`shac.sysid.signals.controls_phrase`; default "exact controls").
    """
    if "qpos" in noise:
        return (
            "noise model: independent Gaussian measurement noise per coordinate, constant in time, "
            f"{noise.get('controls', 'exact controls')}; standard deviations ({noise['source']}): {_stds(noise)}"
        )
    return (
        "noise model: independent Gaussian measurement noise per coordinate and recording, constant in time, "
        f"{noise.get('controls', 'exact controls')}; standard deviations ({noise['source']}) per recording:"
    )


def recording_line(recording: dict) -> str:
    """One line on one of several recordings: its file, length, segments and noise standard deviations."""
    return (
        f"  {recording['file']}: {recording['seconds']:.4g} s, {recording['samples']} samples, "
        f"{recording['segments']} segments; {_stds(recording['noise'])}"
    )


def _stds(noise: dict) -> str:
    return ", ".join(f"{name} [{', '.join(f'{s:.3g}' for s in noise[name])}]" for name in ("qpos", "qvel"))


def least_identifiable_pair(report: dict) -> tuple[str, ...]:
    """The (up to) two parameters with the largest components in the weakest direction."""
    vector = report["directions"][0]["vector"]
    return tuple(sorted(vector, key=lambda key: -abs(vector[key]))[:2])


def plot_landscape(
    loss_fn: Callable[[np.ndarray], np.ndarray], keys: tuple[str, ...], report: dict, path: str, points: int = 21
) -> None:
    """Writes a PNG of the loss over the least identifiable pair (or the one parameter).

    Each axis spans the estimate times exp(+-3 relative standard errors), at
    least +-10% and at most a factor e; for a parameter in a fixed unit (the
    delay), the estimate +- as many units, cut at 0. Other parameters stay at their estimates.

    Args:
        loss_fn: values float [G, P] -> losses float [G].
    """
    values = np.array([report["parameters"][key]["estimate"] for key in keys])
    pair = least_identifiable_pair(report)
    spans = {key: float(np.clip(3 * report["parameters"][key]["relative_std"], 0.1, 1.0)) for key in pair}
    axes = {}
    for key in pair:
        entry, value, span = report["parameters"][key], values[keys.index(key)], spans[key]
        if "unit" in entry:
            axes[key] = np.linspace(max(value - span * entry["unit"], 0.0), value + span * entry["unit"], points)
        else:
            axes[key] = value * np.exp(np.linspace(-span, span, points))
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
