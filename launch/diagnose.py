"""Gradient diagnostics: `python launch/diagnose.py env=ant smoothing=soft`.

Writes report.json and gradients.png into the run directory and prints a verdict:
the one-step Jacobian against finite differences, the gradient norms and their
variance across seeds as the window grows (for none, soft and straight_through
side by side unless diagnose.compare_smoothing=false), the fraction of steps
with contact changes, and a suggested horizon with its reasoning; with
diagnose.env_shares=true, also how unequal the envs' shares of the training
window's actor gradient are and how well groups of envs agree on its direction.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from launch.runtime import configure_runtime, headless_rendering


@hydra.main(version_base=None, config_path="../configs", config_name="diagnose")
def main(cfg: DictConfig) -> None:
    from shac.config import ConfigError, DiagnoseConfig
    from shac.run.hydra_config import to_config

    try:
        config = to_config(cfg, DiagnoseConfig)
    except ConfigError as e:
        sys.exit(f"config error: {e}")
    options = config.diagnose
    configure_runtime(precision=config.precision)
    import jax

    from shac.config import make_env
    from shac.core.algorithms import make_algorithm
    from shac.core.normalizer import RunningStatistics
    from shac.run.serialization import load_policy
    from shac.tools import diagnostics

    out = Path(HydraConfig.get().runtime.output_dir)
    env = make_env(config.env, config.randomization, config.smoothing)
    shac = make_algorithm(config.algo, env)
    key = jax.random.key(config.seed)
    actor_params = shac.actor.init(key, jax.numpy.zeros(env.observation_size))
    normalizer = RunningStatistics.create(env.observation_size)
    if options.run_dir:
        template = jax.jit(shac.init)(key)
        actor_params, normalizer = load_policy(Path(options.run_dir), template.actor_params, template.normalizer)

    print(f"jacobian check of one control step of {config.env.name} ({config.smoothing.mode})", flush=True)
    report = {
        "env": config.env.name,
        "policy": options.run_dir or "random initialisation",
        "jacobian": diagnostics.jacobian_check(env, diagnostics.initial_state(env, config.seed)),
    }
    modes = ("none", "soft", "straight_through") if options.compare_smoothing else (config.smoothing.mode,)
    report["sweeps"] = {}
    decay = config.algo.state_grad_decay
    decayed = f", the state's gradient decayed by {decay:g} per step" if decay != 1.0 else ""
    for mode in modes:
        print(f"horizon sweep, smoothing={mode}: horizons {list(options.horizons)}{decayed}", flush=True)
        smoothed = make_env(config.env, config.randomization, dataclasses.replace(config.smoothing, mode=mode))
        sweep = diagnostics.horizon_sweep(
            smoothed,
            shac.actor,
            actor_params,
            normalizer,
            options.horizons,
            options.num_envs,
            options.seeds,
            key,
            state_grad_decay=decay,
        )
        sweep["suggested_horizon"], sweep["reasoning"] = diagnostics.suggest_horizon(sweep)
        report["sweeps"][mode] = sweep
    if options.env_shares:
        print(f"env shares of the actor gradient: groups of {config.algo.num_envs} envs, h={config.algo.horizon}")
        report["env_shares"] = diagnostics.env_share_agreement(config.algo, env, actor_params, normalizer, key)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    diagnostics.plot_sweeps(report["sweeps"], config.env.name, out / "gradients.png")

    errors = report["jacobian"]["finite_difference"]
    print("one-step Jacobian vs finite differences: " + ", ".join(f"{k} {v:.2e}" for k, v in errors.items()))
    for mode, sweep in report["sweeps"].items():
        print(f"[{mode}] {sweep['reasoning']}")
    if options.env_shares:
        shares = report["env_shares"]
        print(
            f"[env shares] largest / median norm {shares['max_over_median']:.3g}; agreement between "
            f"{shares['groups']} groups " + ", ".join(f"q={q} {a:.2f}" for q, a in shares["agreement"].items())
        )
    print(f"report: {out / 'report.json'}, figure: {out / 'gradients.png'}")


if __name__ == "__main__":
    headless_rendering()  # before anything imports mujoco (shac.config imports the envs)
    from shac.run.hydra_config import register_configs, with_implied_env_config

    sys.argv[1:] = with_implied_env_config(sys.argv[1:], Path(__file__).resolve().parents[1] / "configs")
    register_configs()
    main()
