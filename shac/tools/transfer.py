"""The identify-narrow-retrain-transfer loop's arithmetic: randomisation ranges from a sysid report and by
hand, the models near the real one that policies are also evaluated on, and the loop's summary (JSON,
a Markdown table, a bar plot).

`launch/transfer.py` runs the loop's stages (training, recording, identification, evaluation) and calls
these; docs/transfer.md describes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from shac.config import RandomizationConfig, randomization_ranges
from shac.sysid.noise import sound_fit

POLICIES = {
    "nominal": "the nominal model",
    "identified": "randomised around the sysid estimates",
    "wide": "randomised over wide hand-set ranges",
    "direct": "the real model itself (reference)",
}
"""The trained policies the summary compares, and what each was trained on."""
UNRESOLVED_STD = 0.05
"""A parameter whose relative standard error exceeds this is unresolved: launch/sysid.py flags every direction
of the information matrix past it (`shac.sysid.report.analyze`), and a parameter's own error exceeds it only
if it carries a flagged direction."""


def model_keys(report: Mapping) -> list[str]:
    """The parameters of a sysid report that a model holds (a `signal:` one, the control delay, is not)."""
    return [key for key in report["parameters"] if not key.startswith("signal:")]


def sound_report(report: Mapping) -> bool:
    """Whether a sysid report's fit is sound (`shac.sysid.noise.sound_fit`); a report without `misfit` (made
    before it was kept) is judged on convergence alone."""
    return sound_fit(report.get("converged") is not False, report.get("misfit", 0.0))


def unresolved(report: Mapping, max_relative_std: float = UNRESOLVED_STD) -> list[str]:
    """The model parameters of a sysid report that its data did not pin down.

    Args:
        report: a `sysid.json` as a dict.
        max_relative_std: the largest relative standard error of a resolved parameter.

    Returns:
        Every model parameter if the fit did not converge or left residuals above `MISFIT_LIMIT` times the
        data's noise (`shac.sysid.noise.misfit`), else those whose relative standard error exceeds
        `max_relative_std` (or is not finite).
    """
    if not sound_report(report):
        return model_keys(report)
    return [key for key in model_keys(report) if not report["parameters"][key]["relative_std"] <= max_relative_std]


def outside_wide(report: Mapping, wide: Mapping[str, Sequence[float]]) -> dict[str, dict]:
    """The model parameters of a sound sysid report whose 95% interval lies wholly outside the wide range:
    key -> {"estimate", "ci95", "wide": [low, high]}; none when the fit is not sound (its estimates say
    nothing). An estimate just past a bound with its interval across it is not named: the system may lie
    within the range.

    A wide range set around a guess can miss the real system; the wide policy then never trains on it,
    and the identified estimates are the evidence.
    """
    if not sound_report(report):
        return {}
    outside = {}
    for key in model_keys(report):
        entry, (low, high) = report["parameters"][key], wide[key]
        below, above = entry["ci95"]
        if above < low or below > high:
            outside[key] = {"estimate": entry["estimate"], "ci95": [below, above], "wide": [float(low), float(high)]}
    return outside


def wide_ranges(
    centres: Mapping[str, float], factor: Sequence[float], given: Mapping[str, Sequence[float]]
) -> dict[str, tuple[float, float]]:
    """Hand-set ranges: `given[key]` where there is one, else (factor[0], factor[1]) times the key's centre.

    Args:
        centres: key -> the value the range is around (the nominal model's, or a guess where it has none).
        factor: [low, high] multipliers, 0 < low <= high.
        given: key -> [low, high] that replaces the factor's range.

    Raises:
        ValueError: a bad factor, or a centre of 0 without a given range (the range would be [0, 0]).
    """
    if len(factor) != 2 or not 0 < factor[0] <= factor[1]:
        raise ValueError(f"wide must be [low, high] multipliers with 0 < low <= high, got {list(factor)}")
    ranges = {}
    for key, centre in centres.items():
        if key in given:
            if len(given[key]) != 2:
                raise ValueError(f"wide_ranges['{key}'] must be [low, high], got {list(given[key])}")
            ranges[key] = (float(given[key][0]), float(given[key][1]))
        elif centre == 0:
            raise ValueError(
                f"'{key}' is 0 in the model, so wide={list(factor)} times it is [0, 0]; give a guess, "
                f"init=[{key}=<value>], or its range, wide_ranges={{{key}: [low, high]}}"
            )
        else:
            ranges[key] = tuple(sorted((factor[0] * centre, factor[1] * centre)))
    return ranges


def narrow_ranges(
    report_path: str, report: Mapping, num_std: float, wide: Mapping[str, tuple[float, float]], widened: Sequence[str]
) -> dict[str, tuple[float, float]]:
    """The ranges of `randomization=from_sysid` (estimate * exp(+-num_std * relative standard error)), with the
    `widened` parameters' ranges replaced by their `wide` ones.

    Args:
        report_path: the sysid report's path.
        report: its contents.
        num_std: relative standard errors on either side of each estimate.
        wide: key -> the hand-set range, for every key in `widened`.
        widened: the keys randomised over their wide range (`unresolved`).
    """
    keys = model_keys(report)
    narrow = {}
    if any(key not in widened for key in keys):  # a fit that did not converge has every key widened
        narrow = randomization_ranges(RandomizationConfig(mode="from_sysid", report=report_path, num_std=num_std))
    return {key: wide[key] if key in widened else narrow[key] for key in keys}


def nearby_models(real: Mapping[str, float], count: int, sigma: float, seed: int) -> list[dict[str, float]]:
    """`count` models near `real`: each value times exp(e), e ~ N(0, sigma^2) drawn for each value and model.

    A factor keeps a value's sign, so a model near a physically valid one stays valid (a mass positive,
    a gear's sign); a value of 0 stays 0.
    """
    rng = np.random.default_rng(seed)
    return [{key: value * float(np.exp(rng.normal(0.0, sigma))) for key, value in real.items()} for _ in range(count)]


def summarize(evaluations: Sequence[Mapping], report: Mapping, truth: Mapping[str, float]) -> dict:
    """The loop's summary from its evaluations and its sysid report.

    Args:
        evaluations: one dict per policy, seed and model: `policy` (a key of `POLICIES`), `seed`,
            `model` (`real` or `nearby_<i>`) and `mean_return`.
        report: the sysid report.
        truth: key -> the real system's value of every identified parameter.

    Returns:
        `return_on_real`: policy -> mean over seeds of the return on the real model;
        `return_on_real_std`: policy -> the standard deviation over seeds (0 for one seed);
        `return_on_nearby`: policy -> the mean over seeds and nearby models (policies evaluated on them);
        `identified`: key -> `estimate`, `ci95`, `real` and `covered` (the interval holds the real value;
            None where it is unbounded: the data did not determine the parameter, and such an interval
            holds every value without saying anything).
    """
    on_real, on_nearby = {}, {}
    for policy in POLICIES:
        real = [e["mean_return"] for e in evaluations if e["policy"] == policy and e["model"] == "real"]
        nearby = [e["mean_return"] for e in evaluations if e["policy"] == policy and e["model"] != "real"]
        if real:
            on_real[policy] = real
        if nearby:
            on_nearby[policy] = nearby
    identified = {}
    for key, entry in report["parameters"].items():
        if key in truth:
            low, high = entry["ci95"]
            identified[key] = {
                "estimate": entry["estimate"],
                "ci95": [low, high],
                "real": truth[key],
                "covered": bool(low <= truth[key] <= high) if np.isfinite([low, high]).all() else None,
            }
    return {
        "return_on_real": {policy: float(np.mean(values)) for policy, values in on_real.items()},
        "return_on_real_std": {policy: float(np.std(values)) for policy, values in on_real.items()},
        "return_on_nearby": {policy: float(np.mean(values)) for policy, values in on_nearby.items()},
        "identified": identified,
    }


def markdown(summary: Mapping, seeds: int, nearby: int) -> str:
    """`summary` as Markdown: a table of the policies' returns and one of the identified parameters, a line when
    the identified policy trained on the wide ranges (`identified_is_wide`), and the estimates outside them."""
    lines = [
        f"| policy | trained on | return on real (mean ± std over {seeds} seeds) | "
        f"return on {nearby} nearby models (mean) |",
        "|---|---|---|---|",
    ]
    for policy, trained_on in POLICIES.items():
        if policy not in summary["return_on_real"]:
            continue
        real = f"{summary['return_on_real'][policy]:.1f} ± {summary['return_on_real_std'][policy]:.1f}"
        near = summary["return_on_nearby"].get(policy)
        lines.append(f"| {policy} | {trained_on} | {real} | {'-' if near is None else f'{near:.1f}'} |")
    lines += ["", "| parameter | real | estimate | 95% interval | covered |", "|---|---|---|---|---|"]
    for key, entry in summary["identified"].items():
        low, high = entry["ci95"]
        covered = {True: "yes", False: "no", None: "unbounded: not determined"}[entry["covered"]]
        interval = f"[{low:.6g}, {high:.6g}]"
        lines.append(f"| `{key}` | {entry['real']:.6g} | {entry['estimate']:.6g} | {interval} | {covered} |")
    if summary.get("identified_is_wide"):
        lines += [
            "",
            "Every parameter was widened: the identified policy trained on the wide ranges, as the wide one did.",
        ]
    outside = summary.get("outside_wide", {})
    if outside:
        lines += [
            "",
            "Estimates outside their wide range, 95% interval and all (the wide policy never trained on them):",
        ]
        for key, entry in outside.items():
            low, high = entry["wide"]
            below, above = entry["ci95"]
            lines.append(
                f"- `{key}`: {entry['estimate']:.6g} [{below:.6g}, {above:.6g}], wide range [{low:.6g}, {high:.6g}]"
            )
    return "\n".join(lines) + "\n"


def plot(summary: Mapping, path: str, title: str) -> None:
    """Writes a bar plot of each policy's return on the real model (error bars: std over seeds) and on the
    nearby models to `path` (PNG)."""
    policies = [p for p in POLICIES if p in summary["return_on_real"]]
    x = np.arange(len(policies))
    figure = Figure(figsize=(6.4, 4.0), layout="constrained")
    axes = figure.add_subplot()
    real = [summary["return_on_real"][p] for p in policies]
    spread = [summary["return_on_real_std"][p] for p in policies]
    axes.bar(x - 0.2, real, 0.4, yerr=spread, capsize=4, label="on real")
    near = [summary["return_on_nearby"].get(p, np.nan) for p in policies]
    axes.bar(x + 0.2, near, 0.4, label="on nearby models")
    axes.set_xticks(x, policies)
    axes.set_ylabel("return (deterministic policy)")
    axes.set_title(title)
    axes.legend()
    figure.savefig(path, dpi=100)
