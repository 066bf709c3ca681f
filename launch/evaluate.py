"""Evaluate a trained policy: `python launch/evaluate.py run_dir=<dir> [checkpoint=<epoch>] episodes=16 video=true`.

Runs the deterministic policy (mean action) for full episodes on the run's
environment and prints one JSON line: {"mean_return", "std_return", "episodes"}
(and "video", the mp4's path, with video=true). The policy is the run's
checkpoint `checkpoint` if given, else its final `policy.msgpack`, else its
newest checkpoint (a run still training or interrupted).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from launch.runtime import configure_runtime

USAGE = "usage: python launch/evaluate.py run_dir=<dir> [checkpoint=<epoch>] [episodes=16] [seed=0] [video=false]"


@dataclass
class EvaluateArgs:
    run_dir: str = MISSING
    """Run directory written by launch/train.py."""
    checkpoint: int | None = None
    """Epoch of the checkpoint to evaluate; None: policy.msgpack, else the newest checkpoint."""
    episodes: int = 16
    """Episodes to run (in parallel)."""
    seed: int = 0
    """Seed of the initial-state noise."""
    video: bool = False
    """Also render the first episode's initial state, under the same policy, to an mp4."""
    video_path: str | None = None
    """Where the mp4 goes; None: <run_dir>/videos/evaluate_<checkpoint or final>_seed<seed>.mp4."""


def main(argv: list[str]) -> None:
    try:
        args = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(EvaluateArgs), OmegaConf.from_dotlist(argv)))
    except OmegaConfBaseException as e:
        sys.exit(f"{USAGE}\nerror: {e}")
    if args.episodes < 1:
        sys.exit(f"episodes must be >= 1, got {args.episodes}")

    configure_runtime()  # before anything imports mujoco
    import jax

    from shac.config import ConfigError
    from shac.run.checkpoint import CheckpointError
    from shac.run.evaluate import evaluate, run_episode, summarize
    from shac.run.serialization import DamagedFileError, load_run_policy
    from shac.run.video import episode_video

    run_dir = Path(args.run_dir)
    try:
        policy = load_run_policy(run_dir, args.checkpoint)
    except (FileNotFoundError, ConfigError, DamagedFileError, CheckpointError) as e:
        sys.exit(f"error: {e}")
    env, key = policy.env, jax.random.key(args.seed)
    returns = jax.jit(evaluate, static_argnums=(0, 1, 5))(
        env, policy.actor, policy.actor_params, policy.normalizer, key, args.episodes
    )
    summary = summarize(returns)
    if args.video:
        # evaluate() resets episode i from split(key, episodes)[i]: the video replays episode 0
        episode = jax.jit(run_episode, static_argnums=(0, 1))(
            env, policy.actor, policy.actor_params, policy.normalizer, jax.random.split(key, args.episodes)[0]
        )
        name = f"evaluate_{args.checkpoint if args.checkpoint is not None else 'final'}_seed{args.seed}.mp4"
        path = Path(args.video_path) if args.video_path else run_dir / "videos" / name
        summary["video"] = str(episode_video(path, env.mj_model, episode, env.ctrl_dt))
    print(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1:])
