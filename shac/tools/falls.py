"""Why episodes end in a fall: what the robot and the policy did in the steps before each one.

`launch/falls.py run_dir=<dir> [episodes=64] [before=30]` calls `fall_report_of_run`. It runs the
run's deterministic policy for full episodes (from the initial states `launch/evaluate.py` draws for
the same seed), records per step the root body's height, uprightness (the z component of its up axis:
1 upright, 0 on its side), forward speed (x velocity), whether any geoms touch, and the actions'
saturation (the fraction of components with |a| > 0.95), and compares the `before` steps preceding
each fall with the steps of the episodes that did not fall. It reports the same episodes' returns and
terminations as `launch/evaluate.py` summarises them: the two commands compile different programs, and
a long locomotion episode is chaotic at float32, so after a few hundred steps the same initial state
can end differently in each (docs/locomotion.md), and only one command's counts describe its episodes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from envs import MjxEnv
from shac.core.networks import act
from shac.core.rollout import in_contact
from shac.run.evaluate import Evaluation, episode_step, summarize
from shac.run.serialization import load_run_policy

SIGNALS = ("height", "uprightness", "forward_speed", "in_contact", "saturation", "action_norm")
"""The per-step quantities recorded, in the order of `record_episodes`'s last axis."""


def root_body(env: MjxEnv, body: str | None) -> int:
    """Index of `body` in the env's model, or of its first body (the robot's root) when None.

    Raises:
        ValueError: no body of that name; the message lists the model's bodies.
    """
    model = env.mj_model
    if body is None:
        return 1
    index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    if index < 0:
        names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(1, model.nbody)]
        raise ValueError(f"no body '{body}' in the model; its bodies: {', '.join(names)}")
    return index


def record_episodes(
    env: MjxEnv,
    policy: Callable[[jax.Array], jax.Array],
    key: jax.Array,
    episodes: int,
    body: int,
    qvel_perturbation: jax.Array | float = 0.0,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """Full deterministic episodes from `jax.random.split(key, episodes)`, as `evaluate_policy` runs them.

    Args:
        policy: raw observations float32 [episodes, obs_dim] -> actions float32 [episodes, action_dim].
        body: index of the body whose height, uprightness and speed are recorded.
        qvel_perturbation: each initial velocity coordinate moves by a uniform draw from [-p, p] (the
            same draws for any p; 0 leaves the initial states exactly as they are).

    Returns:
        signals float32 [T, episodes, len(SIGNALS)] after each step; alive float32 [T, episodes]
        (1.0 up to and including the step at which the episode ended); terminated float32
        [T, episodes] (1.0 at the step that ended it by termination); rewards float32 [T, episodes]
        (0 after the end, and at a step whose physics exploded, which ends it too); exploded float32
        [T, episodes] (1.0 at that step, see `evaluate_policy`). T = env.episode_length.
    """
    states = jax.vmap(env.reset)(jax.random.split(key, episodes))
    data = states.pipeline_state
    draws = jax.random.uniform(jax.random.fold_in(key, 1), data.qvel.shape, minval=-1.0, maxval=1.0)
    states = states.replace(pipeline_state=data.replace(qvel=data.qvel + qvel_perturbation * draws))
    step_env = jax.vmap(env.step)

    def step(carry, _):
        state, alive = carry
        action = policy(state.obs)
        x_before = state.pipeline_state.xpos[:, body, 0]
        state = step_env(state, action)
        data = state.pipeline_state
        signals = jnp.stack(
            [
                data.xpos[:, body, 2],
                data.xmat[:, body, 2, 2],
                (data.xpos[:, body, 0] - x_before) / env.ctrl_dt,
                jax.vmap(in_contact)(data).astype(jnp.float32),
                jnp.mean(jnp.abs(action) > 0.95, axis=-1),
                jnp.linalg.norm(action, axis=-1),
            ],
            axis=-1,
        )
        counted, blown, still_alive = episode_step(env, state, alive)
        terminated, reward = (jnp.where(counted, x, 0.0) for x in (state.terminated, state.reward))
        return (state, still_alive), (signals, alive, terminated, reward, blown)

    _, recorded = jax.lax.scan(step, (states, jnp.ones(episodes)), None, length=env.episode_length)
    return recorded


def fall_report(signals: np.ndarray, alive: np.ndarray, terminated: np.ndarray, before: int) -> dict:
    """The falls among the episodes and what preceded them (see `record_episodes` for the arrays).

    Args:
        signals: float [T, E, len(SIGNALS)]; alive, terminated: float [T, E].
        before: steps before each fall to average over (fewer where the episode was shorter).

    Returns:
        {"episodes", "falls", "fall_fraction", "fall_steps" (the step index of each fall, sorted),
        "before_fall": {signal: mean over the `before` steps up to and including each fall's step},
        "at_fall": {signal: mean at the falling step}, "no_fall": {signal: mean over every step of
        the episodes that did not fall} (None where no episode is of that kind)}.
    """
    fell = terminated.max(axis=0) > 0
    fall_steps = terminated.argmax(axis=0)
    windows, last = [], []
    for episode in np.flatnonzero(fell):
        step = fall_steps[episode]
        windows.append(signals[max(0, step - before + 1) : step + 1, episode])
        last.append(signals[step, episode])
    stayed = signals[:, ~fell][alive[:, ~fell] > 0] if (~fell).any() else None

    def means(rows: np.ndarray | None) -> dict | None:
        if rows is None or len(rows) == 0:
            return None
        return {name: round(float(v), 4) for name, v in zip(SIGNALS, rows.mean(axis=0), strict=True)}

    return {
        "episodes": int(fell.size),
        "falls": int(fell.sum()),
        "fall_fraction": float(fell.mean()),
        "fall_steps": sorted(int(fall_steps[e]) for e in np.flatnonzero(fell)),
        "before_fall": means(np.concatenate(windows) if windows else None),
        "at_fall": means(np.stack(last) if last else None),
        "no_fall": means(stayed),
    }


def fall_report_of_run(
    run_dir: str,
    checkpoint: int | None = None,
    episodes: int = 64,
    before: int = 30,
    seed: int = 0,
    body: str | None = None,
    perturb: float = 0.0,
) -> dict:
    """`fall_report` of a run's deterministic policy over `episodes` full episodes, with "evaluation": the
    same episodes' returns and terminations as `launch/evaluate.py` summarises them (`summarize`).

    With `perturb` > 0 the same episodes run again with every initial velocity coordinate moved by at most
    `perturb` (`record_episodes`), and "perturbed" says how many of them then ended otherwise: a fall that a
    perturbation of 1e-6 undoes, or causes, is not decided by the initial state but by the chaos of the
    episode (float32 rounding moves a trajectory as much).

    Args:
        run_dir: run directory written by launch/train.py.
        checkpoint: epoch of the checkpoint; None: `policy.msgpack`, else the newest checkpoint.
        episodes: episodes to run in parallel (>= 1).
        before: steps before each fall to average over (>= 1).
        seed: seed of the initial-state noise (the initial states of `launch/evaluate.py seed=...`).
        body: the body whose height, uprightness and speed are recorded; None: the model's first body.
        perturb: the largest initial velocity perturbation of the second pass (>= 0; 0: no second pass).

    Raises:
        ValueError: episodes or before < 1, perturb < 0, or an unknown body.
        FileNotFoundError, CheckpointError: no policy to load.
    """
    for name, value in {"episodes": episodes, "before": before}.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not perturb >= 0:
        raise ValueError(f"perturb must be >= 0 (0: no perturbed pass), got {perturb}")
    policy = load_run_policy(Path(run_dir), checkpoint)
    index = root_body(policy.env, body)

    def mean_action(obs):
        return act(policy.actor, policy.actor_params, policy.normalizer, obs)

    record = jax.jit(record_episodes, static_argnums=(0, 1, 3, 4))

    def episodes_of(perturbation: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, Evaluation]:
        recorded = record(policy.env, mean_action, jax.random.key(seed), episodes, index, jnp.float32(perturbation))
        signals, alive, terminated, rewards, blown = (np.asarray(x) for x in recorded)
        evaluation = Evaluation(
            returns=rewards.sum(axis=0),
            lengths=alive.sum(axis=0),
            terminated=terminated.sum(axis=0),
            exploded=blown.sum(axis=0),
        )
        return signals, alive, terminated, evaluation

    signals, alive, terminated, evaluation = episodes_of(0.0)
    report = {
        "run_dir": run_dir,
        "body": body or "first body",
        **fall_report(signals, alive, terminated, before),
        "evaluation": summarize(evaluation),
    }
    if perturb > 0:
        *_, moved = episodes_of(perturb)
        report["perturbed"] = {
            "qvel_perturbation": perturb,
            "falls": int(moved.terminated.sum()),
            "outcome_changed": int((moved.terminated != evaluation.terminated).sum()),
            "length_changed": int((moved.lengths != evaluation.lengths).sum()),
            "evaluation": summarize(moved),
        }
    return report
