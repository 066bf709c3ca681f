"""Export of a trained policy for deployment without this package.

The exported function maps raw observations float32 [batch, obs_dim] to actions
float32 [batch, action_dim] in [-1, 1]: observation normalisation (the run's
statistics, baked in), the actor's mean, tanh. It is written three ways:

- `policy.onnx`: ONNX (opset 17), input `obs`, output `action`, converted with
  jax2onnx; runs in onnxruntime and most inference engines.
- `policy.jaxexport`: a serialized `jax.export` artifact (StableHLO) for CPU
  and CUDA; `jax.export.deserialize(bytes).call(obs)` runs it without the model code.
- `policy.json`: sizes, action bounds, the env and its actuators, and the check below.

Both artifacts are checked against the JAX policy on random and on real
observations before anything is written; a difference above `TOLERANCE` fails
the export.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime
from jax2onnx import to_onnx

from shac.core.networks import act
from shac.run.evaluate import run_episode
from shac.run.serialization import RunPolicy

ONNX_FILE = "policy.onnx"
JAX_EXPORT_FILE = "policy.jaxexport"
SPEC_FILE = "policy.json"
ONNX_OPSET = 17
TOLERANCE = 1e-5
"""Largest absolute action difference accepted between an artifact and the JAX policy."""
RANDOM_OBSERVATIONS = 512
CHECK_EPISODES = 2

PolicyFn = Callable[[jax.Array], jax.Array]


class ExportError(RuntimeError):
    """An exported artifact does not reproduce the JAX policy."""


def policy_function(policy: RunPolicy) -> PolicyFn:
    """Raw obs float32 [batch, obs_dim] -> action float32 [batch, action_dim]: normalise, actor mean, tanh."""

    return partial(act, policy.actor, policy.actor_params, policy.normalizer)


def to_onnx_bytes(fn: PolicyFn, obs_dim: int) -> bytes:
    """The ONNX model of `fn` with a dynamic batch dimension, serialized."""
    model = to_onnx(
        fn,
        inputs=[("batch", obs_dim)],
        input_names=["obs"],
        output_names=["action"],
        model_name="shac_policy",
        opset=ONNX_OPSET,
    )
    return model.SerializeToString()


def to_jax_export_bytes(fn: PolicyFn, obs_dim: int) -> bytes:
    """`fn` lowered by `jax.export` for CPU and CUDA with a symbolic batch dimension, serialized."""
    spec = jax.ShapeDtypeStruct((*jax.export.symbolic_shape("batch"), obs_dim), jnp.float32)
    return bytes(jax.export.export(jax.jit(fn), platforms=("cpu", "cuda"))(spec).serialize())


def run_onnx(model: bytes, obs: np.ndarray) -> np.ndarray:
    """Actions of an ONNX policy for float32 [batch, obs_dim] observations, with onnxruntime on the CPU."""
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(["action"], {"obs": np.asarray(obs, np.float32)})[0]


def run_jax_export(artifact: bytes, obs: np.ndarray) -> np.ndarray:
    """Actions of a serialized `jax.export` policy for float32 [batch, obs_dim] observations."""
    return np.asarray(jax.export.deserialize(bytearray(artifact)).call(jnp.asarray(obs, jnp.float32)))


_run_episodes = jax.jit(jax.vmap(run_episode, in_axes=(None, None, None, None, 0)), static_argnums=(0, 1))
"""`run_episode` over a batch of keys, compiled once per env and actor."""


def check_observations(policy: RunPolicy, key: jax.Array) -> np.ndarray:
    """float32 [M, obs_dim] observations to compare artifacts on.

    Random ones, normal at twice the spread of the run's statistics, and real
    ones, every observation the policy acted on in `CHECK_EPISODES` deterministic
    episodes until each ended (none from past a step whose physics exploded).
    """
    random_key, episode_key = jax.random.split(key)
    normalizer, obs_dim = policy.normalizer, policy.env.observation_size
    noise = jax.random.normal(random_key, (RANDOM_OBSERVATIONS, obs_dim))
    random_obs = normalizer.mean + 2.0 * jnp.sqrt(normalizer.var) * noise
    episodes = _run_episodes(
        policy.env, policy.actor, policy.actor_params, normalizer, jax.random.split(episode_key, CHECK_EPISODES)
    )
    real_obs = np.asarray(episodes.obs).reshape(-1, obs_dim)[np.asarray(episodes.alive).reshape(-1) > 0]
    return np.concatenate([np.asarray(random_obs), real_obs]).astype(np.float32)


def export_policy(policy: RunPolicy, out_dir: Path, key: jax.Array) -> dict[str, Path]:
    """Writes `policy.onnx`, `policy.jaxexport` and `policy.json` into `out_dir`, after checking them.

    Raises:
        ExportError: an artifact's actions differ from the JAX policy's by more
            than `TOLERANCE` on the check observations (nothing is written).

    Returns:
        The written files by kind: onnx, jax_export, spec.
    """
    fn = policy_function(policy)
    obs_dim, env = policy.env.observation_size, policy.env
    onnx_model = to_onnx_bytes(fn, obs_dim)
    jax_export = to_jax_export_bytes(fn, obs_dim)
    obs = check_observations(policy, key)
    expected = np.asarray(jax.jit(fn)(obs))
    errors = {
        "onnx": float(np.max(np.abs(run_onnx(onnx_model, obs) - expected))),
        "jax_export": float(np.max(np.abs(run_jax_export(jax_export, obs) - expected))),
    }
    for kind, error in errors.items():
        if not error <= TOLERANCE:
            raise ExportError(f"the {kind} policy differs from the JAX policy by {error:.3g} > {TOLERANCE:g}")
    mj_model = env.mj_model
    spec = {
        "env": policy.config.env.name,
        "obs_size": obs_dim,
        "action_size": env.action_size,
        "action_low": [-1.0] * env.action_size,
        "action_high": [1.0] * env.action_size,
        "actuators": [mj_model.actuator(i).name for i in range(mj_model.nu)],
        "actuator_gear": [float(mj_model.actuator_gear[i, 0]) for i in range(mj_model.nu)],
        "control_period_s": env.ctrl_dt,
        "inputs": {"obs": ["batch", obs_dim]},
        "outputs": {"action": ["batch", env.action_size]},
        "includes": "observation normalisation (the run's statistics) and tanh squashing of the mean action",
        "files": {"onnx": ONNX_FILE, "jax_export": JAX_EXPORT_FILE},
        "source": str(policy.source),
        "check": {"observations": len(obs), "tolerance": TOLERANCE, "max_abs_error": errors},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"onnx": out_dir / ONNX_FILE, "jax_export": out_dir / JAX_EXPORT_FILE, "spec": out_dir / SPEC_FILE}
    paths["onnx"].write_bytes(onnx_model)
    paths["jax_export"].write_bytes(jax_export)
    paths["spec"].write_text(json.dumps(spec, indent=2) + "\n")
    return paths
