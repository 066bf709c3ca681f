"""Benchmark results as tables, plots and a generated section of a Markdown file.

Learning records are dicts with the fields of `shac.tools.benchmarks.learning.Record`
(method, config, seed, env_steps, wall_time_s, eval_return; records of older
results without `config` count as config "default"); throughput points are the
dicts `shac.tools.benchmarks.throughput.measure_point` returns.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

FRACTIONS = (0.5, 0.8, 0.9)


def runs_of(records: Sequence[dict]) -> dict[str, dict[tuple[str, int], list[dict]]]:
    """method -> (config, seed) -> that run's records, in training order."""
    runs: dict[str, dict[tuple[str, int], list[dict]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        runs[record["method"]][config_of(record), record["seed"]].append(record)
    for seeds in runs.values():
        for run in seeds.values():
            run.sort(key=lambda r: r["env_steps"])
    return runs


def config_of(record: dict) -> str:
    """The name of the configuration `record` was trained with."""
    return record.get("config", "default")


def best_configs(records: Sequence[dict], seed: int) -> dict[str, str]:
    """method -> the name of its configuration whose run with `seed` ended with the highest return.

    Only the runs of `seed` are compared, so every configuration is judged on one run of the same
    budget (the first in `records` wins a tie).
    """
    finals: dict[str, dict[str, float]] = defaultdict(dict)
    for method, seeds in runs_of(records).items():
        for run in seeds.values():
            if run[0]["seed"] == seed:
                finals[method][config_of(run[0])] = run[-1]["eval_return"]
    return {method: max(by_config, key=by_config.get) for method, by_config in finals.items()}


def of_configs(records: Sequence[dict], configs: dict[str, str]) -> list[dict]:
    """The records of each method's configuration in `configs` (method -> config name)."""
    return [r for r in records if configs.get(r["method"]) == config_of(r)]


def first_reaching(run: Sequence[dict], threshold: float) -> dict | None:
    """The first record of `run` whose return is at least `threshold`, or None."""
    return next((r for r in run if r["eval_return"] >= threshold), None)


def learning_summary(records: Sequence[dict], fractions: Sequence[float] = FRACTIONS) -> dict:
    """Final returns, and time and samples to reach fractions of the best final return, per method.

    Reaching fraction f means a return of at least R0 + f * (best - R0), where
    `best` is the best method's final return (mean over its seeds) and R0 the
    best return of the untrained policies (every run's first record), so no
    method reaches a fraction by its initialisation alone: with returns that
    start near 0 this is f times the best, and it stays meaningful for negative
    returns (costs). Per method, the time and samples are means over the seeds
    that reached it.

    Returns:
        {"start": R0, "best": best, "thresholds": {f: value},
         "methods": {method: {"configs", "seeds", "final_return", "final_std", "wall_time_s", "env_steps",
                              "reach": {f or "ppo_final": {"reached", "wall_time_s", "env_steps"}}}}}
    """
    runs = runs_of(records)
    start = float(max(run[0]["eval_return"] for seeds in runs.values() for run in seeds.values()))
    finals = {m: [run[-1]["eval_return"] for run in seeds.values()] for m, seeds in runs.items()}
    best = max(float(np.mean(v)) for v in finals.values())
    thresholds: dict = {f: start + f * (best - start) for f in fractions}
    if "ppo" in runs:
        thresholds["ppo_final"] = float(np.mean(finals["ppo"]))
    methods = {}
    for method, seeds in runs.items():
        reach = {}
        for name, threshold in thresholds.items():
            hits = [first_reaching(run, threshold) for run in seeds.values()]
            hits = [h for h in hits if h is not None]
            reach[name] = {
                "reached": len(hits),
                "wall_time_s": float(np.mean([h["wall_time_s"] for h in hits])) if hits else None,
                "env_steps": float(np.mean([h["env_steps"] for h in hits])) if hits else None,
            }
        methods[method] = {
            "configs": sorted({config for config, _ in seeds}),
            "seeds": len(seeds),
            "final_return": float(np.mean(finals[method])),
            "final_std": float(np.std(finals[method])),
            "wall_time_s": float(np.mean([run[-1]["wall_time_s"] for run in seeds.values()])),
            "env_steps": float(np.mean([run[-1]["env_steps"] for run in seeds.values()])),
            "reach": reach,
        }
    return {"start": start, "best": best, "thresholds": thresholds, "methods": methods}


def _reach_cell(entry: dict, seeds: int, key: str, unit: str) -> str:
    if not entry["reached"]:
        return "not reached"
    value = entry[key]
    text = f"{value:.1f} s" if unit == "s" else _steps(value)
    return text if entry["reached"] == seeds else f"{text} ({entry['reached']}/{seeds} seeds)"


def _steps(value: float) -> str:
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value:,.0f}"


def learning_table(summary: dict) -> str:
    """The summary as a Markdown table, one row per method. Where no method's final return beat the best
    untrained return, no gain exists to take fractions of, and those cells say so."""
    names = [f for f in summary["thresholds"] if f != "ppo_final"]
    gained = summary["best"] > summary["start"]
    header = ["method", "seeds", "final return", "trained", *[f"time to {f:.0%}" for f in names]]
    header += [f"samples to {f:.0%}" for f in names]
    has_ppo = "ppo_final" in summary["thresholds"]
    if has_ppo:
        header += ["time to PPO's final", "samples to PPO's final"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method, m in summary["methods"].items():
        cells = [
            method if m.get("configs", ["default"]) == ["default"] else f"{method} ({', '.join(m['configs'])})",
            str(m["seeds"]),
            f"{m['final_return']:.1f}" + (f" ± {m['final_std']:.1f}" if m["seeds"] > 1 else ""),
            f"{m['wall_time_s']:.0f} s, {_steps(m['env_steps'])} steps",
        ]
        for key, unit in (("wall_time_s", "s"), ("env_steps", "steps")):
            cells += [_reach_cell(m["reach"][f], m["seeds"], key, unit) if gained else "no gain" for f in names]
        if has_ppo:
            cells += [
                _reach_cell(m["reach"]["ppo_final"], m["seeds"], key, unit)
                for key, unit in (("wall_time_s", "s"), ("env_steps", "steps"))
            ]
        lines.append("| " + " | ".join(cells) + " |")
    thresholds = ", ".join(f"{f:.0%}: {v:.1f}" for f, v in summary["thresholds"].items() if f != "ppo_final")
    lines.append("")
    if gained:
        lines.append(
            f"Best untrained return R0 = {summary['start']:.1f}, best final return {summary['best']:.1f}; "
            f"fraction f is reached at R0 + f (best - R0): {thresholds}."
        )
    else:
        lines.append(
            f"Best untrained return R0 = {summary['start']:.1f}, above every method's final return (the best "
            f"{summary['best']:.1f}): no method gained on it, so no fraction of a gain is reached."
        )
    return "\n".join(lines)


def configurations_table(records: Sequence[dict], sources: dict[str, dict[str, str]], best: dict[str, str]) -> str:
    """One Markdown row per (method, configuration) tried: its seeds' final return (mean ± std over
    seeds), best evaluation, training time and steps, steps per second, whether it was chosen, its source."""
    header = ["method", "configuration", "seeds", "final return", "best evaluation", "trained", "steps/s"]
    lines = ["| " + " | ".join([*header, "chosen", "source"]) + " |", "|" + "---|" * (len(header) + 2)]
    for method, seeds in runs_of(records).items():
        for config in sorted({c for c, _ in seeds}, key=lambda c: (c != best.get(method), c)):
            runs = [run for (c, _), run in seeds.items() if c == config]
            finals = [run[-1]["eval_return"] for run in runs]
            time_s = float(np.mean([run[-1]["wall_time_s"] for run in runs]))
            steps = float(np.mean([run[-1]["env_steps"] for run in runs]))
            cells = [
                method,
                config,
                str(len(runs)),
                f"{np.mean(finals):.1f}" + (f" ± {np.std(finals):.1f}" if len(runs) > 1 else ""),
                f"{max(r['eval_return'] for run in runs for r in run):.1f}",
                f"{time_s:.0f} s, {_steps(steps)} steps",
                f"{steps / max(time_s, 1e-9):,.0f}",
                "yes" if best.get(method) == config else "",
                sources.get(method, {}).get(config, ""),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_learning(records: Sequence[dict], title: str, path_prefix: Path) -> list[Path]:
    """Return against training wall-clock and against env steps: `<prefix>_time.png`, `<prefix>_steps.png`.

    The return axis is linear within the magnitude of the best untrained return and logarithmic
    beyond, so a run that starts or strays far below it does not flatten the others.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = runs_of(records)
    start = max(run[0]["eval_return"] for seeds in runs.values() for run in seeds.values())
    paths = []
    axes = (("wall_time_s", "training wall-clock (s)", "time"), ("env_steps", "env steps", "steps"))
    for axis, label, suffix in axes:
        fig, ax = plt.subplots(figsize=(6, 4))
        for i, (method, seeds) in enumerate(sorted(runs.items())):
            for j, run in enumerate(seeds.values()):
                ax.plot(
                    [r[axis] for r in run],
                    [r["eval_return"] for r in run],
                    color=f"C{i}",
                    alpha=0.9,
                    marker=".",
                    label=method if j == 0 else None,
                )
        if axis == "env_steps":
            ax.set_xscale("symlog", linthresh=1e4)
        ax.set_yscale("symlog", linthresh=max(abs(start), 1.0))
        ax.set_xlabel(label)
        ax.set_ylabel("evaluation return")
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        path = Path(f"{path_prefix}_{suffix}.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def throughput_table(points: Sequence[dict]) -> str:
    """One Markdown row per (env, N, h) point."""
    header = [
        "env",
        "N",
        "h",
        "compile (s)",
        "forward (ms)",
        "SHAC epoch (ms)",
        "gradient overhead",
        "APG update (ms)",
        "SHAC / APG",
        "epoch memory (MB)",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for p in points:
        apg = p.get("apg_update_s")
        cells = [
            p["env"],
            str(p["num_envs"]),
            str(p["horizon"]),
            f"{p['compile_s']:.1f}",
            f"{p['forward_s'] * 1e3:.1f}",
            f"{p['epoch_s'] * 1e3:.1f}",
            f"{p['overhead']:.2f}",
            "-" if apg is None else f"{apg * 1e3:.1f}",
            "-" if apg is None else f"{p['epoch_s'] / apg:.2f}",
            f"{p['epoch_memory_bytes'] / 2**20:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def epoch_parts_table(points: Sequence[dict]) -> str:
    """One Markdown row per point: env steps/s with and without the gradient, and each part of the
    epoch in ms with its share of the epoch (points measured before the parts were timed are left out)."""
    parts = ("forward", "backward", "actor_update", "critic_fit", "target_update", "rest")
    header = [
        "env",
        "N",
        "h",
        "steps/s (epoch)",
        "steps/s (forward)",
        "epoch (ms)",
        *(p.replace("_", " ") for p in parts),
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for p in (p for p in points if "critic_fit_s" in p):
        shares = [f"{p[f'{part}_s'] * 1e3:.1f} ({p[f'{part}_s'] / p['epoch_s']:.0%})" for part in parts]
        cells = [
            p["env"],
            str(p["num_envs"]),
            str(p["horizon"]),
            f"{p['steps_per_s']:,.0f}",
            f"{p['forward_steps_per_s']:,.0f}",
            f"{p['epoch_s'] * 1e3:.1f}",
            *shares,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_throughput(points: Sequence[dict], path: Path) -> Path:
    """Gradient overhead and epoch memory against h, one line per (env, N)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    series = defaultdict(list)
    for p in points:
        series[(p["env"], p["num_envs"])].append(p)
    for (env, n), ps in sorted(series.items()):
        ps.sort(key=lambda p: p["horizon"])
        h = [p["horizon"] for p in ps]
        left.plot(h, [p["overhead"] for p in ps], marker="o", label=f"{env} N={n}")
        right.plot(h, [p["epoch_memory_bytes"] / 2**20 for p in ps], marker="o", label=f"{env} N={n}")
    for ax, ylabel in ((left, "SHAC epoch / forward rollout"), (right, "epoch memory (MB)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("horizon h")
        ax.set_ylabel(ylabel)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def replace_section(doc: Path, name: str, body: str) -> None:
    """Writes `body` between the markers `<!-- begin NAME -->` and `<!-- end NAME -->` of `doc`.

    The section is replaced if present, else appended; the rest of the file is kept.
    """
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    text = doc.read_text() if doc.is_file() else ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + block + "\n"
    doc.write_text(text)
