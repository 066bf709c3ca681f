"""Three candidate savings in SHAC's epoch, each timed against the current code in one process, calls alternating.

    python docs/benchmarks/epoch_levers/epoch_levers.py ant

1. The critic's Adam over one flattened parameter vector (`optax.flatten`) instead of leaf by leaf:
   `fit_critic` on the env's default number of samples, and the largest parameter difference.
2. The actor gradient without the zero state probes that give `actor/state_grad_growth`.
3. The constraint solver's line search held (`smoothing.hold_linesearch=true`): the gradient of a window of
   fixed actions (`launch/profile_gradient.py`'s) and SHAC's actor gradient, each exact and held, beside the
   forward window and the actor's objective without its gradient.

Prints the median of 9 calls of each (ms).
"""

import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import optax

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import envs
from envs.physics.smoothing import Smoothing
from launch.benchmark import env_algo
from shac.core.algorithm import Shac
from shac.core.rollout import window_rewards, zero_probes


class FlatAdamShac(Shac):
    def critic_transform(self, learning_rate):
        return optax.flatten(super().critic_transform(learning_rate))


def medians(calls: dict, repeats: int = 9) -> dict:
    for fn, args in calls.values():
        jax.block_until_ready(fn(*args))
    laps = {name: [] for name in calls}
    for _ in range(repeats):
        for name, (fn, args) in calls.items():
            tic = time.perf_counter()
            jax.block_until_ready(fn(*args))
            laps[name].append(time.perf_counter() - tic)
    return {name: statistics.median(times) * 1e3 for name, times in laps.items()}


def critic_levers(env, config) -> None:
    samples = config.num_envs * config.horizon
    key = jax.random.key(1)
    obs = jax.random.normal(key, (samples, env.observation_size))
    targets = 10 * jax.random.normal(jax.random.key(2), (samples,))
    weights = jnp.ones((samples,))
    calls, params = {}, {}
    for label, cls in (("Adam leaf by leaf", Shac), ("Adam on one flattened vector", FlatAdamShac)):
        shac = cls(config, env)
        init = shac.critic.init(jax.random.key(0), obs[0])
        fn = jax.jit(lambda p, o, s=shac: s.fit_critic(p, o, obs, targets, weights, key)[0])
        calls[f"critic fit, {label}"] = (fn, (init, shac.critic_optimizer.init(init)))
        params[label] = fn(init, shac.critic_optimizer.init(init))
    for name, ms in medians(calls).items():
        print(f"{name}: {ms:.1f} ms")
    a, b = params.values()
    largest = max(float(jnp.abs(x - y).max()) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))
    print(f"largest parameter difference: {largest:.1e}")


def actor_calls(env, config):
    """The start state and the actor's objective and gradient (without state probes) of SHAC's first window."""
    shac = Shac(config, env)
    state = jax.jit(shac.init)(jax.random.key(0))
    _, reset_key, rollout_key, _ = jax.random.split(state.key, 4)
    resets = jax.vmap(env.reset)(jax.random.split(reset_key, config.num_envs))

    def objective(state):
        return shac.actor_objective(state.actor_params, state, resets, rollout_key)

    def gradient(state):
        loss = lambda p: shac.actor_objective(p, state, resets, rollout_key)  # noqa: E731
        return jax.value_and_grad(loss, has_aux=True)(state.actor_params)

    return shac, state, resets, rollout_key, jax.jit(objective), jax.jit(gradient)


def probe_lever(env, config) -> None:
    shac, state, resets, rollout_key, _, without_probes = actor_calls(env, config)
    probes = zero_probes(state.env_state.pipeline_state, config.horizon)

    def with_probes(state, probes):
        return shac.actor_gradient(state, resets, rollout_key, probes)

    calls = {
        "actor gradient with state probes": (jax.jit(with_probes), (state, probes)),
        "actor gradient without": (without_probes, (state,)),
    }
    for name, ms in medians(calls).items():
        print(f"{name}: {ms:.1f} ms")


def linesearch_lever(name, config) -> None:
    calls = {}
    for label, hold in (("exact", False), ("line search held", True)):
        env = envs.make(name, unroll_substeps=name == "ant", smoothing=Smoothing(hold_linesearch=hold))
        _, state, _, _, objective, gradient = actor_calls(env, config)

        def window(actions, env=env, start=state.env_state):
            return window_rewards(jax.vmap(env.step), start, actions).sum()

        actions = 0.3 * jnp.ones((config.horizon, config.num_envs, env.action_size))
        if not hold:
            calls["forward window"] = (jax.jit(window), (actions,))
            calls["the actor's objective"] = (objective, (state,))
        calls[f"window gradient, {label}"] = (jax.jit(jax.grad(window)), (actions,))
        calls[f"actor gradient, {label}"] = (gradient, (state,))
    times = medians(calls)
    forward = times["forward window"]
    for label, ms in times.items():
        print(f"{label}: {ms:.1f} ms, {ms / forward:.2f} times the forward window")


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "ant"
    config = env_algo(name)
    env = envs.make(name, unroll_substeps=name == "ant")
    print(f"{name}, N={config.num_envs}, h={config.horizon}")
    critic_levers(env, config)
    probe_lever(env, config)
    linesearch_lever(name, config)
