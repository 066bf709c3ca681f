"""The training loop: the jitted epoch (SHAC, AHAC or SAPO), with logging, evaluation, videos and checkpoints."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import jax
import numpy as np
from jax.experimental import multihost_utils

from shac.config import ConfigError, TrainConfig, make_env
from shac.core.algorithm import Shac, TrainState
from shac.core.algorithms import make_algorithm
from shac.run import parallel
from shac.run.budget import TrainingClock
from shac.run.checkpoint import Checkpointer
from shac.run.evaluate import evaluate, run_episode, summarize
from shac.run.run_dir import RunLock, check_fresh
from shac.run.serialization import CONFIG_FILE, POLICY_FILE, save_config, save_policy
from shac.run.tracking import Tracker
from shac.run.video import episode_video

log = logging.getLogger(__name__)
VIDEO_DIR = "videos"


class TrainingInterrupted(Exception):
    """SIGINT or SIGTERM stopped training; the state of `epoch` was checkpointed first.

    Attributes:
        signal_number: the signal received.
        epoch: the last epoch completed (and checkpointed, unless its state was non-finite).
    """

    def __init__(self, signal_number: int, epoch: int, run_dir: Path):
        self.signal_number = signal_number
        self.epoch = epoch
        super().__init__(
            f"stopped by {signal.Signals(signal_number).name} after epoch {epoch}; "
            f"continue with: python launch/train.py resume={run_dir}"
        )


class TrainingDiverged(Exception):
    """Too many bad epochs in a row (`train.max_bad_epochs`); the last good state, if any, was checkpointed first.

    Attributes:
        epoch: the last epoch run.
        good_epoch: the epoch of the last good state (0: there was none).
    """

    def __init__(self, epoch: int, bad_epochs: int, good_epoch: int, saved: bool):
        self.epoch, self.good_epoch = epoch, good_epoch
        if saved:
            kept = f"the last good state (epoch {good_epoch}) is the newest checkpoint"
        else:
            kept = "no epoch of this launch was good, so nothing was checkpointed"
        super().__init__(
            f"stopped after epoch {epoch}: {bad_epochs} epochs in a row skipped their actor update or reset more "
            f"than half the envs as non-finite or too fast (train.max_bad_epochs); {kept}. The physics or the "
            "learning rate is likely wrong: check randomization ranges, env.max_velocity, smoothing, algo.actor_lr"
        )


def bad_epoch_reason(metrics: dict, num_envs: int) -> str:
    """Why an epoch's metrics make it a bad epoch, or "" for a good one.

    Args:
        metrics: the epoch's `actor/skipped` and `resets/nonfinite_envs`, as numbers.
        num_envs: N.
    """
    if metrics["actor/skipped"] > 0:
        return "actor update skipped (non-finite gradient)"
    if metrics["resets/nonfinite_envs"] > num_envs / 2:
        return f"{int(metrics['resets/nonfinite_envs'])} of {num_envs} envs reset as non-finite or too fast"
    return ""


class _StopSignals:
    """While active, SIGINT and SIGTERM ask the loop to stop after the current epoch; a second one stops at once.

    At once means `os._exit(128 + signal)` after one line on stderr: no
    checkpoint, no cleanup (a save in flight stays a temporary directory, which
    the next writer deletes). Only the main thread can install signal handlers;
    elsewhere it does nothing.
    """

    def __init__(self):
        self.received: int | None = None
        self._previous = {}

    def _handle(self, signal_number: int, frame) -> None:
        del frame
        if self.received is not None:
            name = signal.Signals(signal_number).name
            print(
                f"second {name}: stopped at once without a checkpoint; resume continues from the last complete one",
                file=sys.stderr,
                flush=True,
            )
            os._exit(128 + signal_number)
        self.received = signal_number
        log.warning(
            "received %s: saving a checkpoint after this epoch, then stopping (send it again to stop at once)",
            signal.Signals(signal_number).name,
        )

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)


def train(config: TrainConfig, run_dir: Path, resume: bool = False) -> tuple[TrainState, dict]:
    """Trains `config.algo.name` (SHAC, AHAC or SAPO) as `config` says, writing everything into `run_dir`.

    Writes `config.json`, `metrics.jsonl` (one record per logged epoch, with
    `eval/*` entries after each evaluation), checkpoints (see
    `shac.run.checkpoint`), videos, W&B files (unless disabled) and, at the end,
    `policy.msgpack`. Every random stream is in the checkpointed state or
    derived from the seed and the epoch, so a resumed run continues exactly as
    the uninterrupted run would have.

    The environments are split over all devices (`shac.run.parallel`). In a
    multi-process run (`jax.distributed` initialised) every process calls this
    with the same arguments; each simulates the environments of its devices,
    all take part in checkpoints, and only process 0 writes the config,
    metrics, videos, W&B files and policy.

    Args:
        config: the run's config.
        run_dir: the run directory.
        resume: continue from the newest good checkpoint in `run_dir` (its
            shapes must match `config`) instead of starting afresh.

    Raises:
        TrainingInterrupted: SIGINT or SIGTERM arrived; a checkpoint was saved.
        TrainingDiverged: `train.max_bad_epochs` bad epochs in a row; the last
            good state was checkpointed.
        RunDirectoryInUseError: another live process writes `run_dir` (`shac.run.run_dir`).
        CheckpointError: `resume` and no readable checkpoint.
        IncompatibleCheckpointError: `resume` with a config that changes the
            state's shapes (raised before anything compiles).
        ConfigError: `resume` with `algo.max_epochs` below the checkpoint's epoch, or
            `algo.num_envs` not a multiple of the device count (before anything compiles).
        FileExistsError: not `resume`, and `run_dir` already holds checkpoints or metrics.

    Returns:
        The final training state and the last logged record.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    with RunLock(run_dir) if jax.process_index() == 0 else nullcontext():
        if not resume:
            check_fresh(run_dir)
        return _train(config, run_dir, resume)


def _train(config: TrainConfig, run_dir: Path, resume: bool) -> tuple[TrainState, dict]:
    """`train` once the run directory is ours."""
    env = make_env(config.env, config.randomization, config.smoothing)
    shac = make_algorithm(config.algo, env)
    mesh = parallel.make_mesh(config.algo.num_envs)
    key, eval_key = _seed_keys(config.seed, mesh)
    max_epochs = config.algo.max_epochs
    with Checkpointer(run_dir, config.checkpoint) as checkpointer:
        if resume:
            state = checkpointer.restore_latest(parallel.abstract_state(shac, mesh), config)
            if int(state.epoch) > max_epochs:
                raise ConfigError(
                    f"algo.max_epochs={max_epochs} is below the epoch of the checkpoint to resume ({int(state.epoch)})"
                )
        else:
            # jitted: eager, each of MJX's many small ops compiles on its own, which takes longer than
            # compiling init whole, and only whole compilations go into the persistent cache
            state = parallel.sharded_init(shac, mesh)(key)
        if jax.process_index() == 0:
            save_config(run_dir, config)
        return _loop(config, run_dir, shac, mesh, state, eval_key, checkpointer)


def _seed_keys(seed: int, mesh: jax.sharding.Mesh) -> jax.Array:
    """The keys of the training state and of the evaluations, [2], whole on every device of `mesh`.

    Replicated over the mesh, every process holds them as one global array.
    """
    keys = np.asarray(jax.random.key_data(jax.random.split(jax.random.key(seed))))
    return jax.random.wrap_key_data(jax.device_put(keys, parallel.replicated(mesh)))


def _process_zero(value: float) -> float:
    """Process 0's `value` on every process (one clock decides for all of them)."""
    if jax.process_count() == 1:
        return value
    return float(multihost_utils.broadcast_one_to_all(np.float32(value)))


def _any_process(signal_number: int | None) -> int | None:
    """The stop signal if any process received one (every process gets the same answer), else None."""
    if jax.process_count() == 1:
        return signal_number
    received = multihost_utils.process_allgather(np.int32(signal_number or 0))
    return int(received.max()) or None


def _loop(
    config: TrainConfig,
    run_dir: Path,
    shac: Shac,
    mesh: jax.sharding.Mesh,
    state: TrainState,
    eval_key: jax.Array,
    checkpointer: Checkpointer,
) -> tuple[TrainState, dict]:
    """Runs the epochs after `state.epoch` up to `algo.max_epochs`, or until `algo.budget_minutes` of training
    or `algo.max_env_steps` are spent; raises TrainingInterrupted on SIGINT/SIGTERM after a checkpoint.

    The first epoch's call is timed on its own: its wall time, XLA compilation
    included, is reported as `compiled in 41 s` and kept out of the progress's
    steps/s and ETA (`Tracker.compiled`, `Tracker.epoch_done`).

    Each epoch is judged (`bad_epoch_reason`); a bad one warns in the log and
    the progress line, and no periodic checkpoint is written while bad epochs
    go on. After `train.max_bad_epochs` of them in a row, or when every epoch
    of this launch was bad, the last good state is checkpointed and
    TrainingDiverged raised (so one extra training state stays in device
    memory while bad epochs go on).

    Under a budget, each epoch's training time (`TrainingClock`, process 0's)
    goes into `state.train_seconds` before anything is checkpointed, so the
    learning rates' decay and a resumed run go on from it.
    """
    eval_env = shac.env  # the evaluations' and videos', with their own episode length if one is set
    if config.eval.episode_length is not None:
        eval_env = make_env(config.evaluation_env(), config.randomization, config.smoothing)
    primary = jax.process_index() == 0
    max_bad, num_envs = config.train.max_bad_epochs, config.algo.num_envs
    good_state, bad_epochs = state, 0
    epoch_fn = parallel.sharded_epoch(shac, mesh)
    eval_fn = jax.jit(partial(evaluate, eval_env, shac.actor, episodes=config.eval.episodes))
    episode_fn = jax.jit(partial(run_episode, eval_env, shac.actor))
    start, max_epochs, max_env_steps = int(state.epoch), config.algo.max_epochs, config.algo.max_env_steps
    clock = TrainingClock(config.algo.budget_minutes, float(state.train_seconds))
    steps_spent = max_env_steps is not None and int(state.env_steps) >= max_env_steps
    every, video_every, checkpoint_every = config.eval.every, config.logger.video_every, config.checkpoint.every
    with Tracker(config, run_dir, start_epoch=start, write=primary) as tracker, _StopSignals() as stop:
        epoch = start
        while epoch < max_epochs and not clock.spent and not steps_spent:
            epoch += 1
            began = time.perf_counter()
            state, metrics = epoch_fn(state)
            host_metrics = jax.device_get(metrics)  # waits for the epoch
            seconds = time.perf_counter() - began
            if epoch == start + 1:
                tracker.compiled(seconds)
            clock.epoch_done(seconds)
            if clock.budget_s is not None:
                clock.trained_s = _process_zero(clock.trained_s)
                trained = jax.device_put(np.float32(clock.trained_s), parallel.replicated(mesh))
                state = state.replace(train_seconds=trained)
            env_steps = int(state.env_steps)
            steps_spent = max_env_steps is not None and env_steps >= max_env_steps
            tracker.epoch_done(epoch, env_steps, host_metrics, clock.seconds_left)
            last = epoch == max_epochs or clock.spent or steps_spent
            reason = bad_epoch_reason(host_metrics, num_envs)
            if reason:
                bad_epochs += 1
                limit = f" (stopping at train.max_bad_epochs={max_bad})" if max_bad else ""
                warning = f"BAD EPOCH {epoch}: {reason}; {bad_epochs} in a row{limit}"
                log.warning(warning)
                tracker.warn(warning)
            else:
                good_state, bad_epochs = state, 0
                tracker.warn("")
            metrics = {**metrics, "train/bad_epochs": bad_epochs}
            if clock.budget_s is not None:
                metrics["train/seconds"] = clock.trained_s
            epoch_eval_key, video_key = jax.random.split(jax.random.fold_in(eval_key, epoch))
            if (every and epoch % every == 0) or last:
                evaluation = eval_fn(state.actor_params, state.normalizer, epoch_eval_key)
                metrics = {**metrics, **{f"eval/{k}": v for k, v in summarize(evaluation).items()}}
            if epoch % config.logger.log_every == 0 or last or "eval/mean_return" in metrics:
                tracker.log(epoch, env_steps, jax.device_get(metrics))
            if video_every and epoch % video_every == 0:
                episode = episode_fn(state.actor_params, state.normalizer, video_key)
                if primary:
                    path = run_dir / VIDEO_DIR / f"epoch_{epoch}.mp4"
                    tracker.log_video(epoch, episode_video(path, eval_env.mj_model, episode, eval_env.ctrl_dt))
            if max_bad and (bad_epochs >= max_bad or (last and bad_epochs == epoch - start)):
                _stop_diverged(checkpointer, config, good_state, epoch, bad_epochs, start)
            stopping = _any_process(stop.received)
            if stopping or last or (checkpoint_every and epoch % checkpoint_every == 0 and not bad_epochs):
                checkpointer.save(state, config)
            if stopping and not last:
                checkpointer.wait_until_finished()
                raise TrainingInterrupted(stopping, epoch, run_dir)
        checkpointer.wait_until_finished()
        if epoch in checkpointer.steps():
            tracker.log_artifact("checkpoint", "checkpoint", [checkpointer.path(epoch)])
        if primary:
            save_policy(run_dir, state.actor_params, state.normalizer)
        tracker.log_artifact("policy", "model", [run_dir / POLICY_FILE, run_dir / CONFIG_FILE])
    return state, tracker.last_record


def _stop_diverged(
    checkpointer: Checkpointer,
    config: TrainConfig,
    good_state: TrainState,
    epoch: int,
    bad_epochs: int,
    start: int,
) -> None:
    """Checkpoints `good_state` (unless it is on disk already or is a fresh run's initial state) and raises."""
    checkpointer.wait_until_finished()
    good_epoch = int(good_state.epoch)
    saved = good_epoch in checkpointer.steps()
    if not saved and good_epoch > start:
        saved = checkpointer.save(good_state, config)
        checkpointer.wait_until_finished()
    raise TrainingDiverged(epoch, bad_epochs, good_epoch, saved)
