"""The two suites as `launch/benchmark.py` runs them, and where their results go.

`learning` trains each method (SHAC, brax APG, brax PPO) for every seed under the same
wall-clock budget; `throughput` measures each (N, h) point of the grid. `run` does either
(or re-renders an earlier results.json), writes results.json and the plots into the run
directory, and replaces the suite's generated section of the docs page.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import shutil
from pathlib import Path

import jax
from omegaconf import OmegaConf

from shac.config import AlgoConfig, make_env
from shac.tools.benchmarks import learning as learning_suite
from shac.tools.benchmarks import report
from shac.tools.benchmarks import throughput as throughput_suite
from shac.tools.benchmarks.config import BenchmarkConfig


def machine(load_average: tuple[float, float, float], command: str) -> dict:
    """Where and when the benchmark ran, with the load average (1, 5, 15 min) at its start."""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "load_average_at_start": list(load_average),
        "cpu_count": os.cpu_count(),
        "device": str(jax.devices()[0].device_kind),
        "platform": platform.platform(),
        "jax": jax.__version__,
    }


def env_algo(name: str, configs: Path) -> AlgoConfig:
    """SHAC's settings for env `name`: `configs`/algo/shac.yaml with `configs`/env/<name>.yaml on top."""
    base = OmegaConf.load(configs / "algo/shac.yaml")
    values = OmegaConf.merge(base, OmegaConf.load(configs / f"env/{name}.yaml").algo)
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in OmegaConf.to_container(values).items()}
    return AlgoConfig(**values)


def learning(config: BenchmarkConfig, meta: dict) -> dict:
    """Trains every method and seed; the results with every run's records."""
    learning = learning_suite
    env = make_env(config.env, config.randomization, config.smoothing)
    budget_s = config.budget_minutes * 60
    runs = []
    for method in config.methods:
        for seed in range(config.seed, config.seed + config.seeds):
            print(f"{method} seed {seed}: training for {budget_s:.0f} s", flush=True)
            if method == "shac":
                result = learning.train_shac(
                    env, config.algo, seed, budget_s, config.eval_episodes, config.shac_eval_every_steps
                )
            elif method == "apg":
                result = learning.train_apg(env, config.apg, seed, budget_s, config.eval_episodes)
            else:
                result = learning.train_ppo(env, config.ppo, seed, budget_s, config.eval_episodes)
            last = result.records[-1]
            print(
                f"  {len(result.records)} evaluations, final return {last.eval_return:.1f} after "
                f"{last.wall_time_s:.0f} s and {last.env_steps} steps (compile {result.compile_s or 0:.0f} s)",
                flush=True,
            )
            runs.append({"method": method, "seed": seed, **result.to_json()})
    results = {**meta, "suite": "learning", "env": config.env.name, "budget_s": budget_s}
    return results | {"config": dataclasses.asdict(config), "runs": runs}


def throughput(config: BenchmarkConfig, out: Path, meta: dict, configs: Path) -> dict:
    """Measures every point of the grid (saving results.json after each); the results with the points.

    `configs` is the directory of the Hydra configs (`env_algo` reads the other envs' settings there).
    """
    grid = config.throughput
    results = {**meta, "suite": "throughput", "preset": config.preset, "grid": dataclasses.asdict(grid)}
    results |= {"envs": list(grid.envs or (config.env.name,)), "points": []}
    for name in results["envs"]:
        env = make_env(dataclasses.replace(config.env, name=name), config.randomization, config.smoothing)
        algo = config.algo if name == config.env.name else env_algo(name, configs)
        for n in grid.num_envs:
            for h in grid.horizons:
                print(f"{name} N={n} h={h}", flush=True)
                point = throughput_suite.measure_point(
                    name, env, algo, n, h, grid.repeats, config.apg if grid.apg else None, grid.apg_updates
                )
                print("  " + ", ".join(f"{k} {v:.3g}" for k, v in point.items() if isinstance(v, float)), flush=True)
                results["points"].append(point)
                (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def render(results: dict, out: Path) -> tuple[str, str, list[Path]]:
    """The docs section name, the Markdown table and the plots (written into `out`) of `results`."""
    if results["suite"] == "learning":
        records = [r for run in results["runs"] for r in run["records"]]
        title = f"{results['env']}, {results['budget_s'] / 60:g} min per method"
        table = report.learning_table(report.learning_summary(records))
        return f"learning_{results['env']}", table, report.plot_learning(records, title, out / "learning")
    section = f"throughput_{'_'.join(results['envs'])}_{results['preset']}"
    points = results["points"]
    return section, report.throughput_table(points), [report.plot_throughput(points, out / "throughput.png")]


def write_docs(
    root: Path, doc: Path, section: str, results: dict, table: str, files: list[Path], rendered_by: str
) -> None:
    """Copies `files` to `root`/docs/benchmarks/<section>/ and replaces `section` of `doc` with the table
    (`rendered_by`: the command that re-rendered it from a results.json, if it did)."""
    folder = root / "docs" / "benchmarks" / section
    folder.mkdir(parents=True, exist_ok=True)
    for path in files:
        shutil.copy(path, folder / path.name)
    load = ", ".join(f"{x:.2f}" for x in results["load_average_at_start"])
    links = " ".join(f"![{p.stem}](benchmarks/{section}/{p.name})" for p in files if p.suffix == ".png")
    rerendered = f"Re-rendered from its results.json with:\n\n```bash\n{rendered_by}\n```\n\n" if rendered_by else ""
    body = (
        f"Measured {results['date']} on {results['cpu_count']} CPU cores ({results['device']}, jax "
        f"{results['jax']}), load average at start {load} (1, 5, 15 min), with:\n\n"
        f"```bash\n{results['command']}\n```\n\n{rerendered}{table}\n\n"
        f"Raw results: [results.json](benchmarks/{section}/results.json).\n\n{links}\n"
    )
    report.replace_section(doc, section, body)


def run(config: BenchmarkConfig, out: Path, root: Path, command: str, load_average: tuple[float, float, float]) -> str:
    """Runs (or, with `config.from_results`, re-renders) the suite; writes results.json, plots and docs.

    Args:
        config: the composed, validated benchmark config.
        out: the run directory (results.json and the plots go there).
        root: the repository (its `configs/`, and `config.docs` relative to it).
        command: the command line, recorded beside the numbers.
        load_average: the machine's load average (1, 5, 15 min) when the command started.

    Returns:
        What to print: the table and where the files went.
    """
    if config.from_results:
        results = json.loads(Path(config.from_results).read_text())
        if results["suite"] == "learning":
            results["runs"] = [learning_suite.retime(run) for run in results["runs"]]
    elif config.suite == "learning":
        results = learning(config, machine(load_average, command))
    else:
        results = throughput(config, out, machine(load_average, command), root / "configs")
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    section, table, plots = render(results, out)
    lines = [table, f"results: {out / 'results.json'}"]
    if config.docs:
        rendered_by = command if config.from_results else ""
        write_docs(root, root / config.docs, section, results, table, [out / "results.json", *plots], rendered_by)
        lines.append(f"docs: {config.docs} (section {section})")
    return "\n".join(lines)
