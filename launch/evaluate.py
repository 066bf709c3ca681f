"""Evaluate a trained policy: `python launch/evaluate.py run_dir=<dir> episodes=16 seed=0`.

Runs the deterministic policy (mean action) for full episodes on the run's
environment and prints one JSON line: {"mean_return", "std_return", "episodes"}.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException


@dataclass
class EvaluateArgs:
    run_dir: str = MISSING
    """Run directory written by launch/train.py."""
    episodes: int = 16
    """Episodes to run (in parallel)."""
    seed: int = 0
    """Seed of the initial-state noise."""


def main(argv: list[str]) -> None:
    try:
        args = OmegaConf.merge(OmegaConf.structured(EvaluateArgs), OmegaConf.from_dotlist(argv))
        run_dir, episodes, seed = Path(args.run_dir), args.episodes, args.seed
    except OmegaConfBaseException as e:
        sys.exit(f"usage: python launch/evaluate.py run_dir=<dir> [episodes=16] [seed=0]\nerror: {e}")
    if episodes < 1:
        sys.exit(f"episodes must be >= 1, got {episodes}")

    from launch.runtime import configure_runtime

    configure_runtime()
    import jax

    from shac.algorithm import Shac
    from shac.config import make_env
    from shac.evaluate import evaluate, summarize
    from shac.serialization import load_config, load_policy

    try:
        config = load_config(run_dir)
    except FileNotFoundError as e:
        sys.exit(str(e))
    env = make_env(config.env, config.randomization, config.smoothing)
    shac = Shac(config.algo, env)
    template = shac.init(jax.random.key(0))
    try:
        actor_params, normalizer = load_policy(run_dir, template.actor_params, template.normalizer)
    except FileNotFoundError as e:
        sys.exit(str(e))
    returns = jax.jit(evaluate, static_argnums=(0, 1, 5))(
        env, shac.actor, actor_params, normalizer, jax.random.key(seed), episodes
    )
    print(json.dumps(summarize(returns)))


if __name__ == "__main__":
    main(sys.argv[1:])
