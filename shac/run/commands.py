"""What `launch/evaluate.py` and `launch/export.py` do with a run directory, as library functions.

Each takes the script's arguments as keyword arguments (the launch script's
dataclass has the same fields) and returns what the script prints.
"""

from __future__ import annotations

from pathlib import Path

import jax

from shac.config import make_env
from shac.run.evaluate import evaluate, run_episode, summarize
from shac.run.real import load_real, real_env
from shac.run.serialization import CONFIG_FILE, load_run_policy
from shac.run.tracking import log_artifact
from shac.run.video import episode_video


def evaluate_run(
    run_dir: str,
    checkpoint: int | None = None,
    episodes: int = 16,
    seed: int = 0,
    video: bool = False,
    video_path: str | None = None,
    physical: bool = False,
    real: str | None = None,
    episode_length: int | None = None,
    nominal: bool = False,
) -> dict:
    """The deterministic policy's returns over `episodes` full episodes of the run's environment.

    Args:
        run_dir: run directory written by launch/train.py.
        checkpoint: epoch of the checkpoint to evaluate; None: `policy.msgpack`,
            else the newest checkpoint.
        episodes: episodes to run in parallel (>= 1).
        seed: seed of the initial-state noise.
        video: also render episode 0 (same initial state, same policy) to an mp4.
        video_path: where the mp4 goes; None:
            `<run_dir>/videos/evaluate_<checkpoint or final>_seed<seed>.mp4`.
        physical: simulate the physical contact model (`smoothing.mode=none`) even if
            the run trained with a softened one.
        real: a real file (`shac.run.real`): the episodes run on the run's model with its
            values written in, without the run's randomisation.
        episode_length: steps per episode (>= 1); None: those of the run's own evaluations
            (`eval.episode_length`, else `env.episode_length`; a run trained on short episodes is
            evaluated on the task's full ones so).
        nominal: the episodes run on the run's nominal model, without its randomisation.

    Returns:
        {"mean_return", "std_return", "episodes", "mean_length", "terminated", "exploded"} (`summarize`),
        with `real`, "real" (its path), with `nominal`, "nominal": true, and, with `video`, "video" (the
        mp4's path).

    Raises:
        ValueError: episodes or episode_length < 1, `real` and `nominal` both given, or a real file that
            does not fit the run's model.
        FileNotFoundError, CheckpointError: no policy or no real file to load.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if episode_length is not None and episode_length < 1:
        raise ValueError(f"episode_length must be >= 1 (or null: the run's own), got {episode_length}")
    if real and nominal:
        raise ValueError(f"real={real} and nominal=true exclude each other: evaluate on one model at a time")
    real_values = load_real(real) if real else None  # its form, before the run is loaded
    policy = load_run_policy(Path(run_dir), checkpoint, physical, episode_length)
    env, key = policy.env, jax.random.key(seed)
    if real_values is not None:
        env = real_env(policy.config, real_values, policy.env.mj_model, real, episode_length)
    if nominal:
        env = make_env(policy.config.evaluation_env(episode_length), smoothing=policy.config.smoothing)
    evaluation = jax.jit(evaluate, static_argnums=(0, 1, 5))(
        env, policy.actor, policy.actor_params, policy.normalizer, key, episodes
    )
    summary = summarize(evaluation)
    if real:
        summary["real"] = real
    if nominal:
        summary["nominal"] = True
    if video:
        # evaluate() resets episode i from split(key, episodes)[i]: the video replays episode 0
        episode = jax.jit(run_episode, static_argnums=(0, 1))(
            env, policy.actor, policy.actor_params, policy.normalizer, jax.random.split(key, episodes)[0]
        )
        name = f"evaluate_{checkpoint if checkpoint is not None else 'final'}_seed{seed}.mp4"
        path = Path(video_path) if video_path else Path(run_dir) / "videos" / name
        summary["video"] = str(episode_video(path, env.mj_model, episode, env.ctrl_dt))
    return summary


def export_run(run_dir: str, checkpoint: int | None = None, out_dir: str | None = None, seed: int = 0) -> str:
    """Exports the run's policy (ONNX, `jax.export`, JSON spec; see `shac.run.export`) and logs it to W&B.

    Args:
        run_dir: run directory written by launch/train.py.
        checkpoint: epoch of the checkpoint to export; None: `policy.msgpack`,
            else the newest checkpoint.
        out_dir: where the files go; None: the run directory.
        seed: seed of the observations the export is checked on.

    Returns:
        The path of `policy.json`.

    Raises:
        ImportError: the `export` extra is not installed. FileNotFoundError,
            CheckpointError: no policy to load. ExportError: an artifact does
            not reproduce the JAX policy.
    """
    try:
        from shac.run.export import export_policy
    except ImportError as e:
        raise ImportError(f"export needs its extra dependencies ({e}); pip install -e '.[export]'") from None
    policy = load_run_policy(Path(run_dir), checkpoint)
    paths = export_policy(policy, Path(out_dir) if out_dir else Path(run_dir), jax.random.key(seed))
    log_artifact(policy.config, Path(run_dir), "policy", "model", [*paths.values(), Path(run_dir) / CONFIG_FILE])
    return str(paths["spec"])
