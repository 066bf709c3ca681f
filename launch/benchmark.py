"""Benchmarks against the peers: `python launch/benchmark.py suite=learning env=ant budget_minutes=6 seeds=1`.

suite=learning trains SHAC, brax APG and brax PPO on `env` with the same
training wall-clock budget each (compile and evaluation time excluded) and
the same deterministic evaluation; suite=throughput times SHAC's epoch
against its forward rollout and brax APG's update over an (N, h) grid
(`preset=gpu` for an accelerator). Writes results.json and PNG plots into the
run directory and, unless docs= is empty, copies them to
docs/benchmarks/<section>/ and replaces the generated section of
docs/benchmarks.md. See shac/benchmarks/.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import shutil
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from launch.runtime import configure_runtime
from shac.benchmarks.config import BenchmarkConfig, register_benchmark_config, validate_benchmark
from shac.config import AlgoConfig, ConfigError, register_configs, to_train_config

ROOT = Path(__file__).resolve().parents[1]
register_configs()
register_benchmark_config()


def machine(load_average: tuple[float, float, float]) -> dict:
    """Where and when the benchmark ran, with the load average (1, 5, 15 min) at its start."""
    import jax

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python launch/benchmark.py " + " ".join(sys.argv[1:]),
        "load_average_at_start": list(load_average),
        "cpu_count": os.cpu_count(),
        "device": str(jax.devices()[0].device_kind),
        "platform": platform.platform(),
        "jax": jax.__version__,
    }


def env_algo(name: str) -> AlgoConfig:
    """SHAC's settings for env `name`: configs/algo/shac.yaml with configs/env/<name>.yaml on top."""
    base = OmegaConf.load(ROOT / "configs/algo/shac.yaml")
    values = OmegaConf.merge(base, OmegaConf.load(ROOT / f"configs/env/{name}.yaml").algo)
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in OmegaConf.to_container(values).items()}
    return AlgoConfig(**values)


def learning(config: BenchmarkConfig, out: Path, meta: dict) -> tuple[dict, str, list[Path]]:
    from shac.benchmarks import learning, report
    from shac.config import make_env

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
    records = [r for run in runs for r in run["records"]]
    summary = report.learning_summary(records)
    results = {**meta, "suite": "learning", "env": config.env.name, "budget_s": budget_s}
    results |= {"config": dataclasses.asdict(config), "runs": runs, "records": records, "summary": summary}
    title = f"{config.env.name}, {config.budget_minutes:g} min per method"
    plots = report.plot_learning(records, title, out / "learning")
    return results, report.learning_table(summary), plots


def throughput(config: BenchmarkConfig, out: Path, meta: dict) -> tuple[dict, str, list[Path]]:
    from shac.benchmarks import report, throughput
    from shac.config import make_env

    grid = config.throughput
    names = grid.envs or (config.env.name,)
    points = []
    for name in names:
        env = make_env(dataclasses.replace(config.env, name=name), config.randomization, config.smoothing)
        algo = config.algo if name == config.env.name else env_algo(name)
        for n in grid.num_envs:
            for h in grid.horizons:
                print(f"{name} N={n} h={h}", flush=True)
                point = throughput.measure_point(
                    name, env, algo, n, h, grid.repeats, config.apg if grid.apg else None, grid.apg_updates
                )
                print("  " + ", ".join(f"{k} {v:.3g}" for k, v in point.items() if isinstance(v, float)), flush=True)
                points.append(point)
                (out / "results.json").write_text(json.dumps({**meta, "points": points}, indent=1) + "\n")
    results = {**meta, "suite": "throughput", "preset": config.preset, "grid": dataclasses.asdict(grid)}
    results["points"] = points
    return results, report.throughput_table(points), [report.plot_throughput(points, out / "throughput.png")]


@hydra.main(version_base=None, config_path="../configs", config_name="benchmark")
def main(cfg: DictConfig) -> None:
    load_average = os.getloadavg()
    try:
        config = to_train_config(cfg, BenchmarkConfig)
        validate_benchmark(config)
    except ConfigError as e:
        sys.exit(f"config error: {e}")
    configure_runtime(precision=config.precision)
    from shac.benchmarks import report

    out = Path(HydraConfig.get().runtime.output_dir)
    meta = machine(load_average)
    suite = learning if config.suite == "learning" else throughput
    results, table, plots = suite(config, out, meta)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(table)
    print(f"results: {out / 'results.json'}")
    if config.docs:
        envs = config.env.name if config.suite == "learning" else "_".join(config.throughput.envs or (config.env.name,))
        section = f"{config.suite}_{envs}_{config.preset}" if config.suite == "throughput" else f"{config.suite}_{envs}"
        folder = ROOT / "docs" / "benchmarks" / section
        folder.mkdir(parents=True, exist_ok=True)
        for path in [out / "results.json", *plots]:
            shutil.copy(path, folder / path.name)
        load = ", ".join(f"{x:.2f}" for x in load_average)
        links = " ".join(f"![{p.stem}](benchmarks/{section}/{p.name})" for p in plots)
        body = (
            f"Measured {meta['date']} on {meta['cpu_count']} CPU cores ({meta['device']}), load average at start "
            f"{load} (1, 5, 15 min), with:\n\n```bash\n{meta['command']}\n```\n\n{table}\n\n"
            f"Raw results: [results.json](benchmarks/{section}/results.json).\n\n{links}\n"
        )
        report.replace_section(ROOT / config.docs, section, body)
        print(f"docs: {config.docs} (section {section})")


if __name__ == "__main__":
    main()
