"""Can the gradient be trusted? Jacobian checks and gradient statistics over horizons.

Three instruments:
    jacobian_check: the autodiff Jacobian of one control step against central
        finite differences (and MuJoCo's `mjd_transitionFD` where the models match),
        as relative error per state block.
    horizon_sweep: for a policy, the norm of d(return)/d(actions) and
        d(return)/d(policy params) as the window grows, the spread of the policy
        gradient across seeds at each horizon, and how often the contact set changes.
    suggest_horizon: the longest horizon whose gradient is neither exploding nor noisy.
    env_share_agreement: at the training window, how unequal the envs' shares of the
        actor gradient are, and how well disjoint groups of envs agree on its direction
        when each share is clipped (`algo.actor_env_clip_quantile`).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from matplotlib.figure import Figure

from envs import MjxEnv, State
from envs.private_apis import contact_distances
from shac.config import AlgoConfig
from shac.core.algorithm import clipped_sum
from shac.core.algorithms import make_algorithm
from shac.core.networks import Actor
from shac.core.normalizer import RunningStatistics
from shac.core.rollout import decay_state_gradient, window_rewards, zero_probes


def step_function(env: MjxEnv, state: State):
    """One control step as a function of the flat vector [qpos, qvel, action] -> [qpos, qvel]."""
    nq, nv = env.mj_model.nq, env.mj_model.nv

    def f(x: jax.Array) -> jax.Array:
        data = state.pipeline_state.replace(qpos=x[:nq], qvel=x[nq : nq + nv])
        data = env.physics_step(data, x[nq + nv :], env.model(state))
        return jnp.concatenate([data.qpos, data.qvel])

    x = jnp.concatenate([state.pipeline_state.qpos, state.pipeline_state.qvel, jnp.zeros(env.action_size)])
    return f, x


def jacobian_check(env: MjxEnv, state: State, eps: float = 1e-4) -> dict:
    """Relative error of the autodiff Jacobian of one control step against central differences.

    Errors are ||J_autodiff - J_fd|| / ||J_fd|| per block of inputs (qpos,
    qvel, action) over all outputs. Where the model has no quaternion joints
    (nq == nv) and one control step is one physics step, MuJoCo's own
    `mjd_transitionFD` (C, float64) is compared too.
    """
    f, x = step_function(env, state)
    jac = np.asarray(jax.jit(jax.jacrev(f))(x), np.float64)
    f = jax.jit(f)
    columns = [(np.asarray(f(x + eps * e)) - np.asarray(f(x - eps * e))) / (2 * eps) for e in np.eye(len(x))]
    fd = np.stack(columns, axis=-1)
    nq, nv = env.mj_model.nq, env.mj_model.nv
    blocks = {"qpos": slice(0, nq), "qvel": slice(nq, nq + nv), "action": slice(nq + nv, len(x))}
    report = {
        "finite_difference": {name: _relative_error(jac[:, s], fd[:, s]) for name, s in blocks.items()},
        "eps": eps,
        "dtype": str(x.dtype),
    }
    if nq == nv and env.n_substeps == 1:
        report["mujoco_transition_fd"] = _compare_mujoco(env, state, jac)
    else:
        report["mujoco_transition_fd"] = (
            "skipped: needs nq == nv (no free or ball joints) and one physics step per control step"
        )
    return report


def _compare_mujoco(env: MjxEnv, state: State, jac: np.ndarray) -> dict:
    model = copy.deepcopy(env.mj_model)
    data = mujoco.MjData(model)
    data.qpos[:] = np.asarray(state.pipeline_state.qpos)
    data.qvel[:] = np.asarray(state.pipeline_state.qvel)
    nv, nu = model.nv, model.nu
    a = np.zeros((2 * nv + model.na, 2 * nv + model.na))
    b = np.zeros((2 * nv + model.na, nu))
    mujoco.mjd_transitionFD(model, data, 1e-6, True, a, b, None, None)
    ours_a, ours_b = jac[:, : 2 * nv], jac[:, 2 * nv :]
    return {"state": _relative_error(ours_a, a[: 2 * nv, : 2 * nv]), "action": _relative_error(ours_b, b[: 2 * nv])}


def _relative_error(ours: np.ndarray, reference: np.ndarray) -> float:
    return float(np.linalg.norm(ours - reference) / max(np.linalg.norm(reference), 1e-12))


def horizon_sweep(
    env: MjxEnv,
    actor: Actor,
    actor_params: dict,
    normalizer: RunningStatistics,
    horizons: tuple[int, ...],
    num_envs: int,
    seeds: int,
    key: jax.Array,
    state_grad_decay: float = 1.0,
) -> dict:
    """Gradient statistics of the undiscounted return as the window grows.

    One rollout of max(horizons) steps per seed (num_envs envs each, no
    resets). For each horizon H, the return of the first H steps is
    differentiated w.r.t. the policy parameters (closed loop) and w.r.t. the
    actions the policy took (open loop), in one vectorised backward pass.
    With `state_grad_decay` d < 1 the gradient flowing back from each step into
    the state it started from is multiplied by d, as in SHAC's window
    (`algo.state_grad_decay`); the forward values are unchanged.

    Returns:
        Per horizon lists: `action_grad_norm` and `param_grad_norm` (means over
        seeds), `param_grad_relative_variance` (E||g - mean g||^2 / ||mean g||^2
        across seeds), `nonfinite_fraction`; and `contact_change_fraction`, the
        fraction of env steps whose set of active contacts differs from the
        one before the step (the first step compares with the initial state).
    """
    length = max(horizons)
    masks = jnp.array([[1.0 if t < h else 0.0 for t in range(length)] for h in horizons])
    batched_step = jax.vmap(env.step)

    def step_env(state, action):
        return batched_step(decay_state_gradient(state, state_grad_decay), action)

    def closed_loop(params, states, noise):
        def step(state, eps):
            mean, log_std = actor.apply(params, normalizer.normalize(state.obs))
            action = jnp.tanh(mean + jnp.exp(log_std) * eps)
            next_state = step_env(state, action)
            return next_state, (next_state.reward, action, contact_distances(next_state.pipeline_state) < 0)

        _, (rewards, actions, contacts) = jax.lax.scan(step, states, noise)
        return rewards.sum(axis=1), (actions, contacts)

    def open_loop(actions, states):
        return window_rewards(step_env, states, actions).sum(axis=1)

    def per_seed(key):
        reset_key, noise_key = jax.random.split(key)
        states = jax.vmap(env.reset)(jax.random.split(reset_key, num_envs))
        noise = jax.random.normal(noise_key, (length, num_envs, env.action_size))
        _, param_vjp, (actions, contacts) = jax.vjp(lambda p: closed_loop(p, states, noise), actor_params, has_aux=True)
        (param_grads,) = jax.vmap(param_vjp)(masks)
        _, action_vjp = jax.vjp(lambda a: open_loop(a, states), actions)
        (action_grads,) = jax.vmap(action_vjp)(masks)
        flat = jax.vmap(lambda g: jnp.concatenate([x.ravel() for x in jax.tree.leaves(g)]))(param_grads)
        before = jnp.concatenate([contact_distances(states.pipeline_state)[None] < 0, contacts[:-1]])
        changes = jnp.any(contacts != before, axis=-1).mean()
        return flat, jnp.sqrt(jnp.sum(action_grads**2, axis=(1, 2, 3))), changes

    flat, action_norms, changes = jax.jit(jax.vmap(per_seed))(jax.random.split(key, seeds))
    flat, action_norms = np.asarray(flat, np.float64), np.asarray(action_norms, np.float64)  # [seeds, H, P], [seeds, H]
    finite = np.isfinite(flat).all(axis=-1)  # [seeds, H]
    count = np.maximum(finite.sum(0), 1)
    mean = np.where(finite[..., None], flat, 0.0).sum(0) / count[:, None]
    spread = np.where(finite[..., None], (flat - mean[None]) ** 2, 0.0).sum(axis=(0, 2)) / count
    return {
        "horizons": list(horizons),
        "state_grad_decay": state_grad_decay,
        "action_grad_norm": _finite_mean(action_norms),
        "param_grad_norm": _finite_mean(np.linalg.norm(flat, axis=-1)),
        "param_grad_relative_variance": [
            float(v / max(np.sum(m**2), 1e-30)) for v, m in zip(spread, mean, strict=True)
        ],
        "nonfinite_fraction": [float(1.0 - f) for f in finite.mean(0)],
        "contact_change_fraction": float(np.mean(np.asarray(changes))),
    }


def _finite_mean(values: np.ndarray) -> list[float]:
    """Per column of [seeds, H], the mean over finite entries (NaN if none)."""
    return [float(np.mean(v[np.isfinite(v)])) if np.isfinite(v).any() else float("nan") for v in values.T]


def suggest_horizon(sweep: dict, max_relative_variance: float = 1.0, max_growth: float = 100.0) -> tuple[int, str]:
    """The longest horizon whose policy gradient is finite, not exploding and not dominated by noise.

    A horizon qualifies when no seed's gradient was non-finite, its norm grew
    at most `max_growth` times over the shortest horizon's, and its relative
    variance across seeds is at most `max_relative_variance`.

    Returns:
        (horizon, the reasoning in one paragraph).
    """
    horizons = sweep["horizons"]
    base = sweep["param_grad_norm"][0]
    reasons, best = [], horizons[0]
    for i, h in enumerate(horizons):
        norm, variance = sweep["param_grad_norm"][i], sweep["param_grad_relative_variance"][i]
        if sweep["nonfinite_fraction"][i] > 0:
            reasons.append(f"h={h}: non-finite gradients in {100 * sweep['nonfinite_fraction'][i]:.0f}% of seeds")
            break
        if not norm <= max_growth * base:
            reasons.append(
                f"h={h}: gradient norm {norm:.3g} is over {max_growth:g}x that at h={horizons[0]} ({base:.3g})"
            )
            break
        if variance > max_relative_variance:
            reasons.append(f"h={h}: relative variance across seeds {variance:.3g} > {max_relative_variance:g}")
            break
        best = h
    qualifier = "; ".join(reasons) if reasons else "every horizon tried qualified"
    return best, (
        f"suggested horizon {best}: the longest with finite gradients, norm growth <= {max_growth:g}x and "
        f"relative variance <= {max_relative_variance:g} ({qualifier}); contacts change in "
        f"{100 * sweep['contact_change_fraction']:.1f}% of steps."
    )


ENV_CLIP_QUANTILES = (1.0, 0.9, 0.75, 0.5, 0.25, 0.1)
"""The clipping quantiles `env_share_agreement` compares (1.0: no clipping, the plain gradient)."""


def env_share_agreement(
    config: AlgoConfig,
    env: MjxEnv,
    actor_params: dict,
    normalizer: RunningStatistics,
    key: jax.Array,
    groups: int = 4,
    windows: int = 12,
    repeats: int = 3,
) -> dict:
    """The actor gradient of SHAC's window (`config`'s horizon), split into each env's share.

    `groups` disjoint groups of `config.num_envs` envs first run `windows` windows under the policy, so
    they spread over their episodes; then, `repeats` times (new action noise and resets), each env's
    share is computed and each group sums its shares, clipped at each of `ENV_CLIP_QUANTILES`.

    Returns:
        `norm_percentiles` of the share norms (10th, 50th, 90th, 99th and 100th, means over repeats),
        `max_over_median`, and `agreement`: per quantile, the mean cosine between one group's clipped
        sum and the other groups' together (1: every group points the same way; 0: unrelated).
    """
    num_envs = groups * config.num_envs
    shac = make_algorithm(dataclasses.replace(config, num_envs=num_envs, actor_env_clip_quantile=1.0), env)
    init_key, key = jax.random.split(key)
    state = jax.jit(shac.init)(init_key).replace(actor_params=actor_params, normalizer=normalizer)

    def resets(key):
        return jax.vmap(env.reset)(jax.random.split(key, num_envs))

    @jax.jit
    def advance(state, key):
        reset_key, rollout_key = jax.random.split(key)
        _, (env_state, _) = shac.actor_objective(state.actor_params, state, resets(reset_key), rollout_key)
        return state.replace(env_state=env_state)

    @jax.jit
    def clipped_group_sums(state, key):
        reset_key, rollout_key = jax.random.split(key)
        probes = zero_probes(state.env_state.pipeline_state, config.horizon)
        _, (shares, _) = shac.actor_gradient(state, resets(reset_key), rollout_key, probes)
        flat = jnp.concatenate([g.reshape(num_envs, -1) for g in jax.tree.leaves(shares)], axis=1)
        by_group = flat.reshape(groups, config.num_envs, -1)
        sums = [jax.vmap(lambda g, q=q: clipped_sum(g, q)[0])(by_group) for q in ENV_CLIP_QUANTILES]
        return jnp.linalg.norm(flat, axis=1), jnp.stack(sums)  # [groups * N], [quantiles, groups, P]

    for window_key in jax.random.split(key, windows):
        state = advance(state, window_key)
    percentiles, agreement = [], []
    for repeat_key in jax.random.split(jax.random.fold_in(key, 1), repeats):
        norms, sums = (np.asarray(x, np.float64) for x in clipped_group_sums(state, repeat_key))
        percentiles.append(np.percentile(norms, (10, 50, 90, 99, 100)))
        others = sums.sum(axis=1, keepdims=True) - sums
        cosines = np.sum(sums * others, -1) / np.maximum(
            np.linalg.norm(sums, axis=-1) * np.linalg.norm(others, axis=-1), 1e-300
        )
        agreement.append(cosines.mean(axis=1))
    percentiles, agreement = np.mean(percentiles, axis=0), np.mean(agreement, axis=0)
    return {
        "groups": groups,
        "envs_per_group": config.num_envs,
        "horizon": config.horizon,
        "norm_percentiles": dict(zip(("10", "50", "90", "99", "100"), percentiles.tolist(), strict=True)),
        "max_over_median": float(percentiles[-1] / percentiles[1]),
        "agreement": {str(q): float(a) for q, a in zip(ENV_CLIP_QUANTILES, agreement, strict=True)},
    }


def initial_state(env: MjxEnv, seed: int = 0) -> State:
    """A reset state to linearise around."""
    return jax.jit(env.reset)(jax.random.key(seed))


def plot_sweeps(sweeps: dict[str, dict], env_name: str, path: Path) -> None:
    """PNG: policy-gradient norm and its relative variance across seeds against the horizon, one line per mode."""
    figure = Figure(figsize=(10, 4), layout="constrained")
    norm_ax, variance_ax = figure.subplots(1, 2)
    for mode, sweep in sweeps.items():
        norm_ax.plot(sweep["horizons"], sweep["param_grad_norm"], marker="o", label=mode)
        variance_ax.plot(sweep["horizons"], sweep["param_grad_relative_variance"], marker="o", label=mode)
    for ax, label in ((norm_ax, "||d return / d params||"), (variance_ax, "relative variance across seeds")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("horizon (steps)")
        ax.set_ylabel(label)
        ax.legend()
    figure.suptitle(f"{env_name}: policy gradient against the horizon")
    figure.savefig(path, dpi=100)
