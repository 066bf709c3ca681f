"""The survey of MuJoCo Playground's tasks: does each build, is its gradient finite, what does an epoch cost?

For each task: built through `envs/playground.py` (or the one line that says why
not), the bridge's changes to its model, the gradient of an 8-step window under
random actions (of the summed reward and, separately, of the summed observation:
the physics), and a short SHAC run at the one default setting with its compile
time and seconds per environment step. A reward whose gradient is exactly zero
from the first states is flat there (a tolerance with no margin, a sparse
reward): SHAC's actor gets no signal from it until the policy stumbles into reward.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Iterable

import jax
import jax.numpy as jnp
import numpy as np

from shac.config import AlgoConfig, ConfigError, EnvConfig, make_env
from shac.core.algorithms import make_algorithm
from shac.core.rollout import window_rewards
from shac.tools.benchmarks.config import PPOConfig

GRADIENT_HORIZON = 8
GRADIENT_ENVS = 8
PUBLISHED_PPO_FIELDS = (
    "unroll_length",
    "num_updates_per_batch",
    "discounting",
    "learning_rate",
    "entropy_cost",
    "reward_scaling",
    "max_grad_norm",
)
"""The values of Playground's PPO configuration a benchmark run takes as published (its batch is scaled)."""
PUBLISHED_PPO_NETWORKS = {"policy_hidden_layer_sizes": "policy_hidden", "value_hidden_layer_sizes": "value_hidden"}
PUBLISHED_PPO_RETURNS = {
    "AcrobotSwingup": 220.0,
    "AcrobotSwingupSparse": 15.0,
    "BallInCup": 680.0,
    "CartpoleBalance": 950.0,
    "CartpoleBalanceSparse": 700.0,
    "CartpoleSwingup": 800.0,
    "CartpoleSwingupSparse": 425.0,
    "CheetahRun": 850.0,
    "FingerSpin": 600.0,
    "FingerTurnEasy": 950.0,
    "FingerTurnHard": 950.0,
    "FishSwim": 650.0,
    "HopperHop": 2.0,
    "HopperStand": 70.0,
    "HumanoidRun": 130.0,
    "HumanoidStand": 700.0,
    "HumanoidWalk": 500.0,
    "PendulumSwingup": 395.0,
    "PointMass": 900.0,
    "ReacherEasy": 950.0,
    "ReacherHard": 950.0,
    "SwimmerSwimmer6": 560.0,
    "WalkerRun": 560.0,
    "WalkerStand": 1000.0,
    "WalkerWalk": 960.0,
}
"""Playground's published PPO return of each dm_control task, read off a figure: the end of the JAX
curves of Playground's announcement of its Warp backend (google-deepmind/mujoco_playground discussion
#197), as SLM-Lab's Playground benchmark read them for its targets (kengz/SLM-Lab, docs/PHASE5_OPS.md,
March 2026). Playground publishes no table of these values; a reading of a curve is approximate."""
REFERENCE_FRACTION = 0.8
REFERENCE_STEPS_FRACTION = 0.1
"""A method matches the published return at 80% of it using at most a tenth of PPO's env steps."""


def window_gradients(env, seed: int = 0) -> dict:
    """Norms of the gradients of an 8-step window with respect to its actions, for 8 envs.

    Actions are 0.3 x N(0, 1) draws (clipped by the env). Returns the norms of
    d(summed reward)/d(actions) and d(summed observation)/d(actions) and whether
    each is finite.
    """
    reset_key, action_key = jax.random.split(jax.random.key(seed))
    # jitted: MJX run op by op compiles each of its operations on its own
    start = jax.jit(jax.vmap(env.reset))(jax.random.split(reset_key, GRADIENT_ENVS))
    actions = 0.3 * jax.random.normal(action_key, (GRADIENT_HORIZON, GRADIENT_ENVS, env.action_size))
    step = jax.vmap(env.step)

    def reward(actions):
        return window_rewards(step, start, actions).sum()

    def observation(actions):
        def one_step(state, action):
            state = step(state, action)
            return state, state.obs.sum()

        return jax.lax.scan(one_step, start, actions)[1].sum()

    reward_grad, obs_grad = jax.jit(lambda a: (jax.grad(reward)(a), jax.grad(observation)(a)))(actions)
    reward_norm, obs_norm = float(jnp.linalg.norm(reward_grad)), float(jnp.linalg.norm(obs_grad))
    return {
        "reward_grad_norm": reward_norm,
        "obs_grad_norm": obs_norm,
        "finite": bool(np.isfinite(reward_norm) and np.isfinite(obs_norm)),
        "flat_reward": reward_norm == 0.0,
    }


def short_run(env, algo: AlgoConfig, epochs: int, seed: int = 0) -> dict:
    """`epochs` SHAC epochs: the first's time (compilation included), the rest's median per env step."""
    shac = make_algorithm(algo, env)
    state = jax.jit(shac.init)(jax.random.key(seed))
    epoch = jax.jit(shac.epoch)
    times, skipped = [], 0.0
    for _ in range(epochs):
        began = time.perf_counter()
        state, metrics = epoch(state)
        metrics = jax.device_get(metrics)
        times.append(time.perf_counter() - began)
        skipped += float(metrics["actor/skipped"])
    steps_per_epoch = algo.num_envs * algo.horizon
    steady = float(np.median(times[1:])) if len(times) > 1 else float("nan")
    return {
        "first_epoch_s": times[0],
        "epoch_s": steady,
        "us_per_env_step": 1e6 * steady / steps_per_epoch,
        "skipped_updates": skipped,
        "epochs": epochs,
    }


def survey_task(name: str, algo: AlgoConfig, epochs: int, seed: int = 0) -> dict:
    """One task's survey entry (see the module docstring); a task that fails says why in `error`."""
    entry: dict = {"task": name}
    began = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # what the bridge changed is recorded below
            env = make_env(EnvConfig(name=name))
    except (ConfigError, ValueError, FileNotFoundError) as e:
        return entry | {"built": False, "error": str(e).splitlines()[0]}
    entry |= {
        "built": True,
        "build_s": time.perf_counter() - began,
        "model_changes": list(env.model_changes),
        "obs_size": env.observation_size,
        "action_size": env.action_size,
        "ctrl_dt": env.ctrl_dt,
        "substeps": env.n_substeps,
    }
    try:
        entry |= window_gradients(env, seed)
        entry |= short_run(env, algo, epochs, seed)
    except Exception as e:  # a task that builds but cannot be differentiated: recorded, the survey goes on
        entry["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return entry


def survey_table(entries: list[dict]) -> str:
    """The survey as a Markdown table, one row per task."""
    rows = [
        "| task | built | model changed | 8-step gradient (reward / physics) | flat reward at start | "
        "first epoch s | µs per env step | skipped updates |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        if not e["built"] or "error" in e:
            rows.append(f"| {e['task']} | {'yes' if e['built'] else 'no'}: {e['error']} | | | | | | |")
            continue
        changed = "; ".join(c.split(" (")[0] for c in e["model_changes"]) or "-"
        gradient = f"{e['reward_grad_norm']:.3g} / {e['obs_grad_norm']:.3g}" + ("" if e["finite"] else " (NaN)")
        rows.append(
            f"| {e['task']} | yes | {changed} | {gradient} | {'yes' if e['flat_reward'] else 'no'} | "
            f"{e['first_epoch_s']:.0f} | {e['us_per_env_step']:.0f} | {e['skipped_updates']:.0f} of {e['epochs']} |"
        )
    return "\n".join(rows)


def dm_control_tasks() -> list[str]:
    """Every task of Playground's dm_control suite, as `playground/<Name>`."""
    from envs import playground

    return playground.task_names("dm_control_suite")


def published_ppo(name: str, scaled: PPOConfig) -> PPOConfig:
    """`scaled` (PPO with a CPU-sized batch) with Playground's own values for the task `name` wherever
    they differ (per-task discounts, networks, ...); `source` says which.

    Raises:
        ConfigError: Playground's configuration repeats actions, which this benchmark's PPO does not.
    """
    from envs import playground

    published = playground.published_ppo_config(name)
    if published.get("action_repeat", 1) != 1:
        raise ConfigError(
            f"{name}: Playground's PPO repeats each action {published['action_repeat']} times; "
            "the benchmark's PPO runs with action_repeat 1 only"
        )
    values = {field: published[field] for field in PUBLISHED_PPO_FIELDS if field in published}
    networks = published.get("network_factory", {})
    values |= {ours: tuple(networks[theirs]) for theirs, ours in PUBLISHED_PPO_NETWORKS.items() if theirs in networks}
    changed = {field: value for field, value in values.items() if value != getattr(scaled, field)}
    if not changed:
        return scaled
    listed = ", ".join(f"{field} {value}" for field, value in changed.items())
    task = name.removeprefix("playground/")
    return dataclasses.replace(scaled, **changed, source=f"{scaled.source}; {task}: {listed}")


def latest_survey(entries: Iterable[dict]) -> list[dict]:
    """Survey entries, one per task: a task surveyed again keeps its place and takes its latest entry."""
    return list({entry["task"]: entry for entry in entries}.values())


def run_parts(results: dict) -> list[dict]:
    """The parts a suite=playground results dict was measured in, each {"command", "date",
    "load_average_at_start"}: its "parts" if it merges several, else itself as one."""
    if "parts" in results:
        return results["parts"]
    keys = ("command", "date", "load_average_at_start")
    return [{key: results[key] for key in keys if key in results}]


def extend_results(earlier: list[dict], results: dict) -> dict:
    """`results` (a new suite=playground run, before it measures) after the survey entries and learning
    runs of `earlier` runs, with every run's command (one per line), the date and load average of the
    first run, and each part's command, date and load average ("parts", `run_parts`). A task surveyed in
    several parts keeps its latest entry; a task learned in several parts keeps its first part's settings
    and the runs of every part. Parts that extended the same earlier results (two halves of a benchmark run
    side by side) hold its parts and runs once."""
    parts = [*earlier, results]
    first = min(parts, key=lambda run: run["date"])
    measured: list[dict] = []
    for part in (part for run in parts for part in run_parts(run)):
        if part not in measured:
            measured.append(part)
    merged = {**results, "command": "\n".join(part["command"] for part in measured), "date": first["date"]}
    merged["parts"] = measured
    if "load_average_at_start" in first:
        merged["load_average_at_start"] = first["load_average_at_start"]
    merged["survey"] = latest_survey(entry for run in parts for entry in run["survey"])
    learning: dict[str, dict] = {}
    for task, run in ((task, run) for part in parts for task, run in part["learning"].items()):
        first = learning.setdefault(task, {**run, "runs": []})
        first["runs"] = first["runs"] + [r for r in run["runs"] if r not in first["runs"]]
        for key in ("chosen", "sources"):
            if key in run:
                first[key] = {**run[key], **first.get(key, {})}
    merged["learning"] = learning
    return merged


def _return_by(records: list[dict], key: str, limit: float) -> float:
    """The return of the last record of one run whose `key` (wall_time_s or env_steps) is at most `limit`."""
    return [r for r in records if r[key] <= limit][-1]["eval_return"]


def _mean_return_by(runs: list[list[dict]], key: str, limit: float) -> float:
    """The mean over runs (one list of records per seed) of `_return_by`."""
    return float(np.mean([_return_by(records, key, limit) for records in runs]))


def _method_runs(results: dict, method: str) -> list[list[dict]]:
    """The records of each seed's run of `method` in a task's learning results: of its chosen configuration,
    or every run of it where none was chosen."""
    chosen = results.get("chosen", {}).get(method)
    return [
        r["records"]
        for r in results["runs"]
        if r["method"] == method and (chosen is None or r.get("config") in (None, chosen))
    ]


def comparison_table(learning: dict, methods: tuple[str, str] = ("shac", "ppo")) -> str:
    """Each task's return at equal env steps and at equal training wall-clock, one method against another.

    Per task, each method's return is the mean over its seeds: S is the smallest final env-step count
    among the two methods' runs and T the smallest final training time, and a run's return at S (or T)
    is that of its last evaluation at or before it. Tasks without runs of both methods are left out.
    `learning` maps a task to its learning results. The last column says which of Playground's
    per-task PPO values the task's PPO runs took (`published_ppo`).
    """
    header = [
        "task",
        "seeds",
        *[f"{m} final (steps)" for m in methods],
        "equal steps S",
        *[f"{m} at S" for m in methods],
        "equal time T",
        *[f"{m} at T" for m in methods],
        "PPO's per-task values",
    ]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for task, results in learning.items():
        chosen = results.get("chosen", {})
        runs = {m: _method_runs(results, m) for m in methods}
        if not all(runs.values()):
            continue
        every = [records for seeds in runs.values() for records in seeds]
        steps = min(records[-1]["env_steps"] for records in every)
        time = min(records[-1]["wall_time_s"] for records in every)
        cells = [task.removeprefix("playground/"), " / ".join(str(len(runs[m])) for m in methods)]
        for m in methods:
            counts = list(dict.fromkeys(f"{r[-1]['env_steps']:,}" for r in runs[m]))
            cells.append(f"{np.mean([r[-1]['eval_return'] for r in runs[m]]):.1f} ({', '.join(counts)})")
        cells += [f"{steps:,}", *[f"{_mean_return_by(runs[m], 'env_steps', steps):.1f}" for m in methods]]
        cells += [f"{time:.0f} s", *[f"{_mean_return_by(runs[m], 'wall_time_s', time):.1f}" for m in methods]]
        source = results.get("sources", {}).get("ppo", {}).get(chosen.get("ppo"), "")
        cells.append(source.partition(f"; {cells[0]}: ")[2] or "none")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def reference_table(learning: dict, method: str, ppo_steps: dict[str, int]) -> str:
    """Each task's return under `method` against Playground's published PPO return.

    `ppo_steps` maps a task (its bare name) to the env steps of Playground's PPO configuration for it.
    A task meets the reference when every seed's evaluations reach `REFERENCE_FRACTION` of the
    published return within `REFERENCE_STEPS_FRACTION` of those steps and the mean final return over
    the seeds is at least that fraction too. Tasks without a run of `method` are left out; those
    without a published return say so.
    """
    header = [
        "task",
        f"{method} final, mean (seeds)",
        "PPO published",
        "PPO steps (Playground's config)",
        "final / published",
        f"steps to {REFERENCE_FRACTION:.0%} of it (slowest seed)",
        f"{REFERENCE_FRACTION:.0%} within {REFERENCE_STEPS_FRACTION:g} of PPO's steps",
    ]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for task, results in learning.items():
        runs = _method_runs(results, method)
        if not runs:
            continue
        name = task.removeprefix("playground/")
        final = float(np.mean([records[-1]["eval_return"] for records in runs]))
        cells = [name, f"{final:.1f} ({len(runs)})"]
        if name not in PUBLISHED_PPO_RETURNS:
            rows.append("| " + " | ".join([*cells, "-", "-", "-", "-", "-"]) + " |")
            continue
        published, budget = PUBLISHED_PPO_RETURNS[name], ppo_steps[name]
        target = REFERENCE_FRACTION * published
        reached = [next((r["env_steps"] for r in records if r["eval_return"] >= target), None) for records in runs]
        slowest = None if None in reached else max(reached)
        met = slowest is not None and slowest <= REFERENCE_STEPS_FRACTION * budget and final >= target
        cells += [f"{published:g}", f"{budget:,}", f"{final / published:.0%}"]
        cells += ["not reached" if slowest is None else f"{slowest:,}", "yes" if met else "no"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
