"""The training loop: the jitted SHAC epoch, with logging, evaluation and saving around it."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import jax

from shac.algorithm import Shac, TrainState
from shac.config import TrainConfig, make_env
from shac.evaluate import evaluate, summarize
from shac.serialization import save_config, save_policy
from shac.tracking import Tracker


def train(config: TrainConfig, run_dir: Path) -> tuple[TrainState, dict]:
    """Trains SHAC as `config` says, writing everything into `run_dir`.

    Writes `config.json`, `metrics.jsonl` (one record per logged epoch, with
    `eval/*` entries after each evaluation), W&B files (unless disabled) and,
    at the end, `policy.msgpack`.

    Returns:
        The final training state and the last logged record.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(run_dir, config)
    env = make_env(config.env, config.randomization, config.smoothing)
    shac = Shac(config.algo, env)
    key, eval_key = jax.random.split(jax.random.key(config.seed))
    epoch_fn = jax.jit(shac.epoch)
    eval_fn = jax.jit(partial(evaluate, env, shac.actor, episodes=config.eval.episodes))

    state = shac.init(key)
    max_epochs, every = config.algo.max_epochs, config.eval.every
    record = {}
    with Tracker(config, run_dir) as tracker:
        for epoch in range(1, max_epochs + 1):
            state, metrics = epoch_fn(state)
            last = epoch == max_epochs
            if (every and epoch % every == 0) or last:
                eval_key, key_now = jax.random.split(eval_key)
                returns = eval_fn(state.actor_params, state.normalizer, key_now)
                metrics = {**metrics, **{f"eval/{k}": v for k, v in summarize(returns).items()}}
            if epoch % config.logger.log_every == 0 or last or "eval/mean_return" in metrics:
                metrics = jax.device_get(metrics)
                record = tracker.log(epoch, int(state.env_steps), metrics)
    save_policy(run_dir, state.actor_params, state.normalizer)
    return state, record
