"""Benchmarks against the peers: `python launch/benchmark.py suite=learning env=ant budget_minutes=6 seeds=1`.

suite=playground (with env=playground) surveys MuJoCo Playground's tasks (built,
8-step gradient, a short SHAC run each) and runs the learning comparison on
`playground.tasks` (docs/playground.md). suite=learning trains every configuration of brax APG and brax PPO in
configs/peers/<env>.yaml with one seed, then SHAC (and with methods=[...] AHAC,
SAPO) and each peer's best configuration with `seeds` seeds, all with the same
training wall-clock budget per run (compile and evaluation time excluded) and
the same deterministic evaluation; suite=throughput times SHAC's epoch,
part by part, against its forward rollout and brax APG's update, at each env's
own N and h or over an (N, h) grid (`preset=gpu` for an accelerator); suite=sysid fits simulated
recordings with this project's sysid and with mujoco.sysid (docs/sysid.md). Writes results.json and PNG plots into the
run directory and, unless docs= is empty, copies them to
docs/benchmarks/<section>/ and replaces the generated section of
the docs= file (default docs/benchmarks.md). See shac/tools/benchmarks/.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import shlex
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from launch.runtime import configure_runtime
from shac.config import ALGORITHMS, AlgoConfig, ConfigError, from_dict
from shac.run.hydra_config import register_configs, to_config
from shac.tools.benchmarks.config import METHODS, BenchmarkConfig, register_benchmark_config, validate_benchmark

ROOT = Path(__file__).resolve().parents[1]


def run_subject(suite: str, env_name: str, throughput_envs: Sequence[str]) -> str:
    """Hydra resolver: what a benchmark's run directory is named after, below `runs/benchmark/`: the suite,
    and the environment where the suite measures one (`learning`; `throughput` without `throughput.envs`)
    or the environments it lists; the Playground and sysid suites take their tasks from their own options."""
    if suite == "learning":
        return f"{suite}/{env_name}"
    if suite == "throughput":
        return f"{suite}/{'+'.join(throughput_envs) or env_name}"
    return suite


register_configs()
register_benchmark_config()
OmegaConf.register_new_resolver("run_subject", run_subject)


def machine(load_average: tuple[float, float, float]) -> dict:
    """Where and when the benchmark ran, with the load average (1, 5, 15 min) at its start."""
    import jax

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python launch/benchmark.py " + shlex.join(sys.argv[1:]),
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
    return from_dict(AlgoConfig, OmegaConf.to_container(values), "algo.")


def method_algo(config: BenchmarkConfig, method: str) -> AlgoConfig:
    """The settings of `method` (shac, ahac or sapo): configs/algo/<method>.yaml over the env's, with the
    command line's overrides."""
    if method == config.algo.name:
        return config.algo
    from hydra import compose

    overrides = [o for o in HydraConfig.get().overrides.task if not o.startswith("algo=")]
    return to_config(compose("benchmark", overrides=[*overrides, f"algo={method}"]), BenchmarkConfig).algo


def lr_decay(run: dict) -> str:
    """What a SHAC-family run of a results.json decayed its learning rates over: "budget" (the run's clock,
    `shac_budget_schedule`), "calibrated epochs" (the epochs timed before the run, by earlier versions of that
    option) or "max_epochs"."""
    if "budget_epochs" in run:
        return "calibrated epochs"
    return run.get("lr_decay", "max_epochs")


def learning(config: BenchmarkConfig, meta: dict, earlier: tuple[dict, ...] = ()) -> dict:
    """Trains every configuration of each peer with seed `seed`, then SHAC and each peer's best
    configuration with `seeds` seeds (the first one's run reused); the results with every run's records.
    Runs in `earlier` (an earlier part's runs of the same task) are kept and not trained again."""
    from shac.config import make_env
    from shac.tools.benchmarks import learning, report

    env = make_env(config.env, config.randomization, config.smoothing)
    budget_s = config.budget_minutes * 60
    peers = {"apg": config.apg, "ppo": config.ppo}
    runs = list(earlier)
    decay = "budget" if config.shac_budget_schedule else "max_epochs"

    def train(method: str, name: str, seed: int) -> None:
        earlier_run = next((r for r in runs if (r["method"], r["config"], r["seed"]) == (method, name, seed)), None)
        if earlier_run is not None:
            if method in ALGORITHMS and lr_decay(earlier_run) != decay:
                raise ConfigError(
                    f"the earlier {method} run of seed {seed} decayed its learning rates over "
                    f"{lr_decay(earlier_run)}, this one over {decay} (shac_budget_schedule="
                    f"{str(config.shac_budget_schedule).lower()}); extend only results of the same schedule "
                    f"(shac_budget_schedule={str(not config.shac_budget_schedule).lower()} extends these)"
                )
            return
        print(f"{method} ({name}) seed {seed}: training for {budget_s:.0f} s", flush=True)
        schedule = {}
        if method in ALGORITHMS:
            algo = method_algo(config, method)
            if config.shac_budget_schedule:
                algo = dataclasses.replace(algo, budget_minutes=config.budget_minutes)
                schedule = {"lr_decay": decay}
            result = learning.train_shac(env, algo, seed, budget_s, config.eval_episodes, config.shac_eval_every_steps)
        elif method == "apg":
            result = learning.train_apg(env, config.apg[name], seed, budget_s, config.eval_episodes, name)
        else:
            result = learning.train_ppo(env, config.ppo[name], seed, budget_s, config.eval_episodes, name)
        last = result.records[-1]
        print(
            f"  {len(result.records)} evaluations, final return {last.eval_return:.1f} after "
            f"{last.wall_time_s:.0f} s and {last.env_steps} steps (compile {result.compile_s or 0:.0f} s)",
            flush=True,
        )
        runs.append({"method": method, "config": name, "seed": seed, **result.to_json(), **schedule})

    for method in (m for m in config.methods if m in peers):
        for name in peers[method]:
            train(method, name, config.seed)
    records = [r for run in runs for r in run["records"]]
    chosen = {"shac": "paper", "ahac": "paper", "sapo": "paper", **report.best_configs(records, config.seed)}
    for method in config.methods:
        for seed in range(config.seed, config.seed + config.seeds):
            train(method, chosen[method], seed)
    sources = {method: {name: c.source for name, c in peers[method].items()} for method in peers}
    results = {**meta, "suite": "learning", "env": config.env.name, "budget_s": budget_s}
    return results | {"config": dataclasses.asdict(config), "chosen": chosen, "sources": sources, "runs": runs}


def throughput(config: BenchmarkConfig, out: Path, meta: dict) -> dict:
    """Measures every point of the grid (saving results.json after each); the results with the points."""
    from shac.config import make_env
    from shac.tools.benchmarks import throughput

    grid = config.throughput
    results = {**meta, "suite": "throughput", "preset": config.preset, "grid": dataclasses.asdict(grid)}
    results |= {"envs": list(grid.envs or (config.env.name,)), "points": []}
    for name in results["envs"]:
        env = make_env(dataclasses.replace(config.env, name=name), config.randomization, config.smoothing)
        algo = config.algo if name == config.env.name else env_algo(name)
        for n in grid.num_envs or (algo.num_envs,):
            for h in grid.horizons or (algo.horizon,):
                print(f"{name} N={n} h={h}", flush=True)
                apg = next(iter(config.apg.values())) if grid.apg else None  # the first configuration listed
                point = throughput.measure_point(name, env, algo, n, h, grid.repeats, apg, grid.apg_updates)
                print("  " + ", ".join(f"{k} {v:.4g}" for k, v in point.items() if isinstance(v, float)), flush=True)
                results["points"].append(point)
                (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def playground(config: BenchmarkConfig, out: Path, meta: dict) -> dict:
    """The survey of every listed Playground task, then the learning comparison on `playground.tasks`
    (saving results.json after each task), extending the results of `playground.extend` (their runs are
    kept, not trained again). PPO's
    `playground` configuration takes Playground's own values for each task (`published_ppo`)."""
    from shac.tools.benchmarks import playground as survey

    options = config.playground
    results = {**meta, "suite": "playground", "algo": dataclasses.asdict(config.algo), "survey": [], "learning": {}}
    results = survey.extend_results([json.loads(Path(path).read_text()) for path in options.extend], results)
    surveyed = {entry["task"] for entry in results["survey"]}
    if options.survey:
        names = options.survey_tasks or tuple(n for n in survey.dm_control_tasks() if n not in surveyed)
        for name in names:
            print(f"survey {name}", flush=True)
            entry = survey.survey_task(name, config.algo, options.survey_epochs, config.seed)
            print("  " + json.dumps(entry), flush=True)
            results["survey"] = survey.latest_survey([*results["survey"], entry])
            (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    for name in options.tasks:
        ppo = {key: survey.published_ppo(name, c) if key == "playground" else c for key, c in config.ppo.items()}
        task_config = dataclasses.replace(config, env=dataclasses.replace(config.env, name=name), ppo=ppo)
        earlier = results["learning"].get(name, {})
        results["learning"][name] = learning(task_config, meta, tuple(earlier.get("runs", ())))
        (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def sysid(config: BenchmarkConfig, out: Path, meta: dict) -> dict:
    """This project's fit and mujoco.sysid on the same recordings (saving results.json after each dataset)."""
    import envs
    from shac.sysid import versus_mujoco
    from shac.sysid.parameters import parse_assignments

    options = config.sysid
    true_values, initial_values = parse_assignments(options.true_params), parse_assignments(options.init)
    keys = tuple(true_values)
    results = {**meta, "suite": "sysid", "options": dataclasses.asdict(options), "keys": list(keys)}
    done = []

    def save(k: int, comparison: versus_mujoco.Comparison) -> None:
        for tool, fit in comparison.fits.items():
            estimates = ", ".join(
                f"{e:.5g} [{lo:.5g}, {hi:.5g}]" for e, (lo, hi) in zip(fit.estimates, fit.ci95, strict=True)
            )
            print(f"  {k:3d} {tool:13s} {estimates} covered {fit.covered} {fit.status} {fit.fit_seconds:.2f} s")
        done.append(comparison)
        results.update(summary=versus_mujoco.summarize(done, keys), datasets=[dataclasses.asdict(c) for c in done])
        (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")

    try:
        env = envs.make(options.model)
        models = versus_mujoco.models(env, true_values, initial_values, options.upper)
    except ValueError as e:
        sys.exit(f"config error: {e}")
    data = (options.datasets, options.seconds, options.dt, options.max_hz, options.qpos_noise, options.qvel_noise)
    fitting = (options.steps, options.upper, config.seed, save, options.method, options.join_segments)
    _, results["shac_compile_s"] = versus_mujoco.run(env, *models, keys, *data, *fitting)
    return results


def render(results: dict, out: Path) -> tuple[str, str, list[Path]]:
    """The docs section name, the Markdown table and the plots (written into `out`) of `results`."""
    from shac.tools.benchmarks import report

    if results["suite"] == "playground":
        from envs.playground import published_ppo_config
        from shac.tools.benchmarks import playground as survey

        tables, plots = [], []
        if results["survey"]:
            tables.append(f"Every task surveyed:\n\n{survey.survey_table(results['survey'])}")
        learning = results["learning"]
        methods = {run["method"] for learned in learning.values() for run in learned["runs"]}
        ppo_steps = {name.removeprefix("playground/"): published_ppo_config(name)["num_timesteps"] for name in learning}
        for method in sorted(methods - {"ppo"}, key=METHODS.index):
            if "ppo" in methods:
                table = survey.comparison_table(learning, (method, "ppo"))
                tables.append(f"{method.upper()} against PPO on every task (mean over seeds):\n\n{table}")
            table = survey.reference_table(learning, method, ppo_steps)
            tables.append(
                f"{method.upper()} against Playground's published PPO return (readings of its published curves, "
                f"`PUBLISHED_PPO_RETURNS` in shac/tools/benchmarks/playground.py):\n\n{table}"
            )
        for name, learned in learning.items():
            folder = out / name.removeprefix("playground/")
            folder.mkdir(parents=True, exist_ok=True)
            _, table, task_plots = render(learned, folder)
            tables.append(f"{name}:\n\n{table}")
            plots += [plot.rename(out / f"{folder.name}_{plot.name}") for plot in task_plots]
        parts = [part for part in ("survey", "learning") if results[part]]
        return "_".join(["playground", *parts]), "\n\n".join(tables), plots
    if results["suite"] == "sysid":
        from shac.sysid import versus_mujoco

        keys, options = tuple(results["keys"]), results["options"]
        truth = dict(zip(keys, results["datasets"][0]["truth"], strict=True))
        attributes = dict.fromkeys(key.rsplit(":", 1)[1] for key in keys)
        joined = ["joined"] if options.get("join_segments") else []
        section = "_".join(["sysid_versus_mujoco", options["model"], *attributes, *joined])
        table = versus_mujoco.table(results["summary"], keys, truth)
        table += (
            "\n\nThis project's warm-up, a one-step fit of the first dataset that compiles its functions "
            f"(excluded from the fit times): {results['shac_compile_s']:.1f} s."
        )
        if options.get("method", "autodiff") != "autodiff":
            table += f" Its Jacobians: {options['method']} (`sysid.method`)."
        if joined:
            table += " Its fits end in single shooting from their estimates (`sysid.join_segments`)."
        return section, table, []
    if results["suite"] == "learning":
        records = [{"config": run.get("config", "default"), **r} for run in results["runs"] for r in run["records"]]
        chosen = results.get("chosen", {r["method"]: "default" for r in records})
        compared = sorted(report.of_configs(records, chosen), key=lambda r: METHODS.index(r["method"]))
        title = f"{results['env']}, {results['budget_s'] / 60:g} min per run"
        table = report.learning_table(report.learning_summary(compared))
        plots = report.plot_learning(compared, title, out / "learning")
        if len(compared) < len(records):
            seed = results["config"]["seed"]
            tried = [{**r, "method": f"{r['method']} {r['config']}"} for r in records if r["seed"] == seed]
            configurations = report.configurations_table(records, results.get("sources", {}), chosen)
            table = f"Every configuration tried:\n\n{configurations}\n\nSHAC against the best of each peer:\n\n{table}"
            plots += report.plot_learning(tried, f"{title}, seed {seed}", out / "configurations")
        return f"learning_{results['env']}", table, plots
    section = f"throughput_{'_'.join(results['envs'])}_{results['preset']}"
    points = results["points"]
    table = report.throughput_table(points)
    if any("critic_fit_s" in p for p in points):
        table += f"\n\nWhere the epoch's time goes (ms, share of the epoch):\n\n{report.epoch_parts_table(points)}"
    return section, table, [report.plot_throughput(points, out / "throughput.png")]


def measured_on(results: dict) -> str:
    """When and on what a results dict was measured: its date, the machine and the load average at its start
    (each part's too, for a benchmark measured in parts)."""

    def load(part: dict) -> str:
        return ", ".join(f"{x:.2f}" for x in part["load_average_at_start"])

    text = (
        f"Measured {results['date']} on {results['cpu_count']} CPU cores ({results['device']}, jax "
        f"{results['jax']}), load average at start {load(results)} (1, 5, 15 min)"
    )
    parts = [part for part in results.get("parts", []) if "load_average_at_start" in part]
    if len(parts) > 1:
        text += "; each part's, in order: " + "; ".join(f"{load(part)} ({part['date']})" for part in parts)
    return text


def decay_note(results: dict) -> str:
    """One sentence on what the SHAC-family runs of a learning or playground results dict decayed their
    learning rates over (and how many runs each way); empty when it holds none."""
    learned = (results["learning"] or {}).values() if results["suite"] == "playground" else [results]
    runs = [run for part in learned for run in part.get("runs", []) if run["method"] in ALGORITHMS]
    counts = Counter(lr_decay(run) for run in runs)
    words = {
        "budget": "on each run's training clock, to end with its budget (`shac_budget_schedule=true`)",
        "max_epochs": "over `algo.max_epochs` alone (`shac_budget_schedule=false`)",
        "calibrated epochs": "over epochs timed before each run (an earlier version of `shac_budget_schedule`)",
    }
    if not counts:
        return ""
    return (
        "SHAC, AHAC and SAPO runs decayed their learning rates "
        + "; ".join(f"{words[decay]}: {n} run{'s' * (n > 1)}" for decay, n in sorted(counts.items()))
        + ".\n\n"
    )


def write_docs(doc: Path, section: str, results: dict, table: str, files: list[Path], rendered_by: str) -> None:
    """Copies `files` to docs/benchmarks/<section>/ and replaces `section` of `doc` with the table
    (`rendered_by`: the command that re-rendered it from a results.json, if it did)."""
    from shac.tools.benchmarks import report

    folder = ROOT / "docs" / "benchmarks" / section
    folder.mkdir(parents=True, exist_ok=True)
    for path in files:
        shutil.copy(path, folder / path.name)
    links = " ".join(f"![{p.stem}](benchmarks/{section}/{p.name})" for p in files if p.suffix == ".png")
    rerendered = f"Re-rendered from its results.json with:\n\n```bash\n{rendered_by}\n```\n\n" if rendered_by else ""
    body = (
        f"{measured_on(results)}, with:\n\n"
        f"```bash\n{results['command']}\n```\n\n{rerendered}{decay_note(results)}{table}\n\n"
        f"Raw results: [results.json](benchmarks/{section}/results.json).\n\n{links}\n"
    )
    report.replace_section(doc, section, body)


@hydra.main(version_base=None, config_path="../configs", config_name="benchmark")
def main(cfg: DictConfig) -> None:
    load_average = os.getloadavg()
    try:
        config = to_config(cfg, BenchmarkConfig)
        validate_benchmark(config)
    except ConfigError as e:
        sys.exit(f"config error: {e}")
    configure_runtime(precision=config.precision)
    out = Path(HydraConfig.get().runtime.output_dir)
    if config.from_results:
        results = json.loads(Path(config.from_results).read_text())
        if results["suite"] == "learning":
            from shac.tools.benchmarks.learning import retime

            results["runs"] = [retime(run) for run in results["runs"]]
    elif config.suite == "learning":
        results = learning(config, machine(load_average))
    elif config.suite == "playground":
        out.mkdir(parents=True, exist_ok=True)
        results = playground(config, out, machine(load_average))
    elif config.suite == "sysid":
        out.mkdir(parents=True, exist_ok=True)
        results = sysid(config, out, machine(load_average))
    else:
        results = throughput(config, out, machine(load_average))
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    section, table, plots = render(results, out)
    print(table)
    print(f"results: {out / 'results.json'}")
    if config.docs:
        rendered_by = "python launch/benchmark.py " + " ".join(sys.argv[1:]) if config.from_results else ""
        write_docs(ROOT / config.docs, section, results, table, [out / "results.json", *plots], rendered_by)
        print(f"docs: {config.docs} (section {section})")


if __name__ == "__main__":
    main()
