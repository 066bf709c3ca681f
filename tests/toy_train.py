"""`launch/train.py` on the toy env registered as `line` (compiles in seconds): `python -m tests.toy_train <overrides>`.

`env.name=line_nan` trains on its variant whose every step is non-finite.

The run is `ARGS` followed by the given overrides; flags such as `-m` go first.
"""

import runpy
import sys
from pathlib import Path

import envs
from tests.toy_env import NonFiniteLineEnv, RegisteredLineEnv

ARGS = [
    "env.name=line",
    "env.episode_length=4",
    "algo.num_envs=4",
    "algo.horizon=4",
    "algo.max_epochs=2",
    "algo.actor_hidden=[8]",
    "algo.critic_hidden=[8]",
    "algo.critic_iterations=2",
    "algo.critic_minibatches=2",
    "eval.episodes=2",
    "logger.mode=disabled",
    "logger.progress=false",
]
"""A tiny run of the toy env (key=value overrides only, so a resume may repeat them)."""


def register() -> None:
    """Registers the toy env as `line` and its non-finite variant as `line_nan` (once per process)."""
    if "line" not in envs.names():
        envs.register("line", RegisteredLineEnv)
        envs.register("line_nan", NonFiniteLineEnv)


if __name__ == "__main__":
    register()
    script = Path(__file__).resolve().parents[1] / "launch" / "train.py"
    flags = [a for a in sys.argv[1:] if a.startswith("-")]  # e.g. -m: Hydra's parser wants them first
    sys.argv = [str(script), *flags, *ARGS, *(a for a in sys.argv[1:] if a not in flags)]
    runpy.run_path(str(script), run_name="__main__")
