"""Time and memory of one SHAC epoch against the forward rollout it differentiates, and against brax APG.

At one point (N envs, horizon h) of one environment, measured in one process
so the ratios compare like with like:

- compile_s: compiling the jitted SHAC epoch;
- forward_s: the forward-only window (resets and the N x h steps of the
  policy and physics, with the target critic's values; no gradient);
- epoch_s: the full SHAC epoch (that window with its gradient, the actor step,
  critic fitting, target update); overhead = epoch_s / forward_s;
- the epoch's parts, each compiled and timed on its own: gradient_s (the window
  with its gradient; backward_s = gradient_s - forward_s), actor_update_s (clip
  and Adam step), critic_fit_s (targets and every critic minibatch update),
  target_update_s, and rest_s = epoch_s minus the parts (negative where XLA
  overlaps or fuses parts inside the one epoch);
- steps_per_s and forward_steps_per_s: N * h env steps over epoch_s and over forward_s;
- apg_update_s: one update of brax's APG at the same N and h (its own
  training loop, timed by brax; its first two epochs, which compile, are left out);
- epoch_memory_bytes: XLA's buffer assignment for the compiled epoch
  (arguments + outputs + temporaries - aliased), from `memory_analysis()`; on
  accelerators the device's peak bytes in use so far is added.

The calls alternate, and the median of `repeats` calls of each is kept.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import jax
import jax.numpy as jnp
import optax
from brax.training.agents.apg import train as apg_train

from envs import MjxEnv
from envs.private_apis import brax_apg_evaluations
from shac.config import AlgoConfig
from shac.core.algorithm import Shac, TrainState
from shac.core.rollout import zero_probes
from shac.tools.benchmarks.config import APGConfig
from shac.tools.benchmarks.learning import apg_arguments


def at_point(config: AlgoConfig, num_envs: int, horizon: int) -> AlgoConfig:
    """`config` at N envs and horizon h (critic minibatches reduced until they divide N * h)."""
    minibatches = config.critic_minibatches
    while (num_envs * horizon) % minibatches:
        minibatches -= 1
    return replace(config, num_envs=num_envs, horizon=horizon, critic_minibatches=minibatches)


def forward_window(shac: Shac, state: TrainState) -> jax.Array:
    """The epoch's window without its gradient: the same resets and N x h steps; returns the actor loss."""
    _, reset_key, rollout_key, _ = jax.random.split(state.key, 4)
    reset_states = jax.vmap(shac.env.reset)(jax.random.split(reset_key, shac.config.num_envs))
    loss, _ = shac.actor_objective(state.actor_params, state, reset_states, rollout_key)
    return loss


def _timed(fn, *args):
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - start


def median_seconds(calls: dict, repeats: int) -> dict[str, float]:
    """{name: (compiled function, args)} -> {name: median seconds of `repeats` calls}, after one
    warm-up call of each; the calls alternate, so a slower spell of a noisy machine falls on all of them."""
    for fn, args in calls.values():
        jax.block_until_ready(fn(*args))
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, (fn, args) in calls.items():
            times[name].append(_timed(fn, *args)[1])
    return {name: statistics.median(laps) for name, laps in times.items()}


def epoch_gradient(shac: Shac, state: TrainState) -> tuple[Callable, tuple]:
    """The epoch's actor gradient as a function of (state, state probes), with the resets and the
    rollout key the epoch draws from `state.key` fixed, and its arguments."""
    _, reset_key, rollout_key, _ = jax.random.split(state.key, 4)
    # jitted: MJX run op by op compiles each of its operations on its own
    reset_states = jax.jit(jax.vmap(shac.env.reset))(jax.random.split(reset_key, shac.config.num_envs))
    probes = zero_probes(state.env_state.pipeline_state, shac.config.horizon)

    def gradient(state, probes):
        return shac.actor_gradient(state, reset_states, rollout_key, probes)

    return gradient, (state, probes)


def epoch_parts(shac: Shac, state: TrainState) -> dict:
    """The epoch's parts as separately compiled functions of `state`, each with its arguments:
    {name: (compiled function, args)} for gradient, actor_update, critic_fit and target_update."""
    critic_key = jax.random.split(state.key, 4)[3]
    gradient, (_, probes) = epoch_gradient(shac, state)

    def actor_update(state, grads):
        updates, opt_state = shac.actor_optimizer.update(grads, state.actor_opt_state, state.actor_params)
        return optax.apply_updates(state.actor_params, updates), opt_state

    def critic_fit(state, window):
        return shac.critic_step(state, window, critic_key, jnp.float32(shac.config.critic_lr))

    def target_update(state):
        return shac.target_update(state.target_critic_params, state.critic_params)

    (_, (_, window)), (grads, _) = jax.jit(gradient)(state, probes)
    window = jax.lax.stop_gradient(window)
    arguments = {
        "gradient": (gradient, (state, probes)),
        "actor_update": (actor_update, (state, grads)),
        "critic_fit": (critic_fit, (state, window)),
        "target_update": (target_update, (state,)),
    }
    return {name: (jax.jit(fn).lower(*args).compile(), args) for name, (fn, args) in arguments.items()}


def measure_shac(env: MjxEnv, config: AlgoConfig, repeats: int) -> dict:
    """Everything the module docstring lists for SHAC with `config` on `env`, as a JSON-ready dict."""
    shac = Shac(config, env)
    state = jax.block_until_ready(jax.jit(shac.init)(jax.random.key(0)))
    start = time.perf_counter()
    epoch = jax.jit(shac.epoch).lower(state).compile()
    compile_s = time.perf_counter() - start
    forward = jax.jit(lambda s: forward_window(shac, s)).lower(state).compile()
    memory = epoch.memory_analysis()
    epoch_memory = (
        memory.argument_size_in_bytes
        + memory.output_size_in_bytes
        + memory.temp_size_in_bytes
        - memory.alias_size_in_bytes
    )
    state, _ = jax.block_until_ready(epoch(state))  # warm-up call; the parts are timed from its state
    parts = epoch_parts(shac, state)
    calls = {"forward": (forward, (state,)), **parts}
    for fn, args in calls.values():  # warm-up calls
        jax.block_until_ready(fn(*args))
    times = {name: [] for name in (*calls, "epoch")}
    for _ in range(repeats):
        for name, (fn, args) in calls.items():
            times[name].append(_timed(fn, *args)[1])
        (state, _), seconds = _timed(epoch, state)
        times["epoch"].append(seconds)
    median = {name: statistics.median(laps) for name, laps in times.items()}
    steps = config.num_envs * config.horizon
    parts_s = median["gradient"] + median["actor_update"] + median["critic_fit"] + median["target_update"]
    return {
        "compile_s": compile_s,
        "forward_s": median["forward"],
        "epoch_s": median["epoch"],
        "overhead": median["epoch"] / median["forward"],
        "gradient_s": median["gradient"],
        "backward_s": median["gradient"] - median["forward"],
        "actor_update_s": median["actor_update"],
        "critic_fit_s": median["critic_fit"],
        "target_update_s": median["target_update"],
        "rest_s": median["epoch"] - parts_s,
        "steps_per_s": steps / median["epoch"],
        "forward_steps_per_s": steps / median["forward"],
        "forward_times_s": times["forward"],
        "epoch_times_s": times["epoch"],
        "epoch_memory_bytes": int(epoch_memory),
    }


def measure_apg(env: MjxEnv, config: APGConfig, updates: int) -> dict:
    """apg_update_s and apg_compile_s of brax APG with `config` on `env`.

    Five epochs of `updates` updates: the first compiles, the second also runs
    slower (about 20 s more on ant, measured on a 2-core CPU), the median of
    the last three is the epoch time; the compile time is the first two
    epochs' excess over two such epochs.
    """
    walltimes = []

    def on_evaluation(params, make_policy, training_metrics):
        del params, make_policy
        if "training/walltime" in training_metrics:
            walltimes.append(float(training_metrics["training/walltime"]))

    with brax_apg_evaluations(on_evaluation):
        apg_train.train(**apg_arguments(env, config, seed=0), policy_updates=5 * updates, num_evals=6)
    epochs = [walltimes[0], *(b - a for a, b in itertools.pairwise(walltimes))]
    epoch_s = statistics.median(epochs[2:])
    return {
        "apg_update_s": epoch_s / updates,
        "apg_compile_s": max(epochs[0] + epochs[1] - 2 * epoch_s, 0.0),
        "apg_epoch_times_s": epochs,
    }


def measure_point(
    env_name: str,
    env: MjxEnv,
    config: AlgoConfig,
    num_envs: int,
    horizon: int,
    repeats: int,
    apg: APGConfig | None,
    apg_updates: int,
) -> dict:
    """Everything the module docstring lists at (N, h), as one JSON-ready dict."""
    point = {"env": env_name, "num_envs": num_envs, "horizon": horizon}
    point |= measure_shac(env, at_point(config, num_envs, horizon), repeats)
    if apg is not None:
        point |= measure_apg(env, replace(apg, num_envs=num_envs, horizon_length=horizon), apg_updates)
    stats = jax.devices()[0].memory_stats()
    if stats and "peak_bytes_in_use" in stats:
        point["device_peak_bytes_so_far"] = int(stats["peak_bytes_in_use"])
    return point
