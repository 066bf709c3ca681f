"""The environment contract: a differentiable MJX environment and its state.

Every environment is a `MjxEnv`: an MJCF model, a control period made of
`n_substeps` physics steps rolled with `lax.scan`, and four task hooks
(initial state, observation, reward, termination). The class also satisfies
brax's `Env` interface (`reset`, `step`, `observation_size`, `action_size`,
`backend`), so brax's training wrappers and its PPO/APG train the very same
object.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from brax.envs.base import Env as BraxEnv
from flax import struct
from mujoco import mjx

from envs.physics.mjx_math import with_contractions
from envs.physics.model_options import apply_options, compile_model
from envs.physics.parameters import ModelParameter, parse_all, write_all
from envs.physics.smoothing import Smoothing, clip_gradient, scale_gradient

ASSETS = Path(__file__).parent / "assets"


@struct.dataclass
class State:
    """One environment's state (add a leading [N] axis to every leaf for a batch).

    Attributes:
        pipeline_state: the `mjx.Data` after the last control step (brax's name
            for the simulator state, so brax's wrappers can reset it).
        obs: float32 [obs_dim] observation of `pipeline_state`.
        reward: float32 [] reward of the last control step.
        done: float32 [] 1.0 when the episode ended at this step
            (`terminated` or `truncated`).
        terminated: float32 [] 1.0 on early termination (the task failed; no
            value after this step).
        truncated: float32 [] 1.0 when the time limit cut the episode (the
            future still has value).
        metrics: per-step scalars, e.g. the reward terms.
        info: auxiliary values that travel with the state.
    """

    pipeline_state: mjx.Data
    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    metrics: dict[str, jax.Array] = struct.field(default_factory=dict)
    info: dict[str, Any] = struct.field(default_factory=dict)


class NotDifferentiableError(ValueError):
    """The MJCF model's solver settings make MJX reverse-mode fail."""


def check_differentiable(model: mujoco.MjModel, name: str) -> None:
    """Fails unless MJX can run reverse-mode differentiation through `model`.

    MJX's constraint solver uses a `lax.while_loop` (which has no reverse-mode
    rule) unless it runs exactly one iteration, and its smooth line search is
    only implemented for the Newton and CG solvers.
    """
    problems = []
    if model.opt.iterations != 1:
        problems.append(f'opt.iterations is {model.opt.iterations}, must be 1 (<option iterations="1"/>)')
    if model.opt.solver not in (mujoco.mjtSolver.mjSOL_NEWTON, mujoco.mjtSolver.mjSOL_CG):
        problems.append(f"opt.solver is {mujoco.mjtSolver(model.opt.solver).name}, must be Newton or CG")
    if problems:
        raise NotDifferentiableError(
            f"model '{name}' is not reverse-mode differentiable in MJX: " + "; ".join(problems)
        )


class MjxEnv(BraxEnv, abc.ABC):
    """Base class of all environments: MJX physics with a fixed control period.

    Subclasses implement `initial_data`, `observation`, `reward` and, if the
    task can fail early, `terminated`, and pass their constructor's other
    keyword arguments (`**options`) on to this one. An environment is built once
    with everything that changes its physics and is not changed afterwards.

    Attributes:
        max_velocity: bound on every entry of `qvel` (rad/s or m/s); a state
            past it is exploding physics, which training resets like a
            non-finite one (`too_fast`). Far above what any task's actuators
            produce; a task class may set its own, and the `max_velocity`
            argument overrides it for one environment.

    Args:
        xml: MJCF file name under `envs/assets/`, or the absolute path of one
            (an environment in another package).
        ctrl_dt: control period in seconds; must be a multiple of the model's
            physics time step.
        episode_length: control steps per episode before time-limit truncation.
        substeps: physics steps per control period (the model's time step becomes
            `ctrl_dt / substeps`); None keeps the MJCF's time step.
        physics: MJCF values changed before the model compiles,
            `element:name:attribute` -> value (see `envs.physics.model_options`).
        smoothing: how contacts are simulated and differentiated (see
            `envs.physics.smoothing`); with `state_grad_clip`, the gradient
            flowing back through the state is clipped at every control step.
        randomization: `element:name:attribute` -> (low, high) (see
            `envs.physics.parameters`): these model parameters are sampled per
            episode at reset, uniformly; the values travel in
            `state.info["model_params"]` (float32 [P]) and every step simulates
            with them, so gradients still flow through the physics. None or
            empty: the nominal model. Raises ValueError for an unknown parameter
            or a range that is not physically valid (`ModelParameter.check_range`).
        unroll_substeps: unroll the substep loop (faster on the ant, slower on
            the hopper: `EnvConfig.unroll_substeps`).
        max_velocity: this environment's bound on `qvel` (see Attributes); None
            keeps the class's.
    """

    max_velocity: float = 1000.0
    mjcf_source: tuple[Path, dict[str, float], int | None] | None = None
    """(MJCF file, physics options, substeps) the model was compiled from; None for a model built
    elsewhere (a Playground task): see `mjcf_spec`."""

    def __init__(
        self,
        xml: str,
        *,
        ctrl_dt: float,
        episode_length: int,
        substeps: int | None = None,
        physics: Mapping[str, float] | None = None,
        smoothing: Smoothing = Smoothing(),
        randomization: Mapping[str, tuple[float, float]] | None = None,
        unroll_substeps: bool = False,
        max_velocity: float | None = None,
    ):
        spec = mujoco.MjSpec.from_file(str(ASSETS / xml))
        mj_model = compile_model(spec, physics or {}, substeps, ctrl_dt)
        check_differentiable(mj_model, xml)
        self.mjcf_source = (ASSETS / xml, dict(physics or {}), substeps)
        self._set_model(
            mj_model,
            ctrl_dt=ctrl_dt,
            episode_length=episode_length,
            smoothing=smoothing,
            randomization=randomization,
            unroll_substeps=unroll_substeps,
            max_velocity=max_velocity,
        )

    def _set_model(
        self,
        mj_model: mujoco.MjModel,
        *,
        ctrl_dt: float,
        episode_length: int,
        smoothing: Smoothing,
        randomization: Mapping[str, tuple[float, float]] | None,
        unroll_substeps: bool,
        max_velocity: float | None,
    ) -> None:
        """Sets the physics of this environment from a compiled, differentiable model (see the class's Args)."""
        n_substeps = round(ctrl_dt / mj_model.opt.timestep)
        if n_substeps < 1 or abs(n_substeps * mj_model.opt.timestep - ctrl_dt) > 1e-9:
            raise ValueError(f"ctrl_dt={ctrl_dt} is not a multiple of the model time step {mj_model.opt.timestep}")
        if episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {episode_length}")
        self.mj_model = mj_model
        self.mjx_model = mjx.put_model(mj_model, impl="jax")
        self.ctrl_dt = ctrl_dt
        self.n_substeps = n_substeps
        self.episode_length = episode_length
        self.smoothing = smoothing
        self.unroll_substeps = unroll_substeps
        if max_velocity is not None:
            if not max_velocity > 0:
                raise ValueError(f"max_velocity must be > 0, got {max_velocity}")
            self.max_velocity = max_velocity
        ranges = dict(randomization or {})
        self.randomized: tuple[ModelParameter, ...] = parse_all(list(ranges), mj_model)
        for parameter in self.randomized:
            parameter.check_range(*ranges[parameter.key], mj_model)
        self.randomization_ranges = np.array(list(ranges.values()), np.float32).reshape(-1, 2)

    def mjcf_spec(self) -> mujoco.MjSpec:
        """A fresh, uncompiled spec of this environment's model: its MJCF file with the same physics
        options and time step applied before compiling, so `spec.compile()` gives `mj_model`.

        Raises:
            ValueError: the model was not compiled from an MJCF file here (a Playground task).
        """
        if self.mjcf_source is None:
            raise ValueError(
                f"{type(self).__name__}'s model was not compiled from an MJCF file by MjxEnv (a Playground task's "
                "is built by Playground), so there is no MJCF file to write it back to"
            )
        path, physics, substeps = self.mjcf_source
        spec = mujoco.MjSpec.from_file(str(path))
        apply_options(spec, physics, substeps, self.ctrl_dt)
        return spec

    def model(self, state: State) -> mjx.Model:
        """The MJX model that simulates `state`: the nominal one, with its sampled parameters if randomised."""
        return self._model_with(state.info)

    def _model_with(self, info: Mapping[str, Any]) -> mjx.Model:
        """The MJX model of an episode whose state carries `info`: with its sampled parameters if randomised."""
        if not self.randomized:
            return self.mjx_model
        return write_all(self.mjx_model, self.randomized, info["model_params"])

    def _sample_model_params(self, rng: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The key left for the reset, and the state's info with an episode's model parameters if randomised."""
        if not self.randomized:
            return rng, {}
        rng, param_key = jax.random.split(rng)
        low, high = self.randomization_ranges.T
        return rng, {"model_params": jax.random.uniform(param_key, low.shape, minval=low, maxval=high)}

    # ----------------------------------------------------------- task hooks

    @abc.abstractmethod
    def initial_data(self, rng: jax.Array) -> mjx.Data:
        """A randomised initial simulator state (`mjx.forward` already applied)."""

    @abc.abstractmethod
    def observation(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        """float32 [obs_dim] observation of `data`; `action` is the last action."""

    @abc.abstractmethod
    def reward(self, data: mjx.Data, action: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The reward of arriving in `data` under `action`, and its named terms."""

    def terminated(self, data: mjx.Data) -> jax.Array:
        """bool [] whether the task has failed in `data` (never, by default)."""
        del data
        return jnp.array(False)

    def too_fast(self, state: State) -> jax.Array:
        """bool [] whether any velocity of `state` is past `max_velocity` (finite but exploding physics)."""
        return jnp.abs(state.pipeline_state.qvel).max() > self.max_velocity

    # ------------------------------------------------------------ interface

    def reset(self, rng: jax.Array) -> State:
        """A fresh episode from a randomised initial state (and model parameters, if randomised)."""
        rng, info = self._sample_model_params(rng)
        data = self.initial_data(rng)
        action = jnp.zeros(self.action_size)
        _, metrics = self.reward(data, action)
        zero = jnp.zeros(())
        return State(
            pipeline_state=data,
            obs=self.observation(data, action),
            reward=zero,
            done=zero,
            terminated=zero,
            truncated=zero,
            metrics=jax.tree.map(jnp.zeros_like, metrics),
            info=info,
        )

    def step(self, state: State, action: jax.Array) -> State:
        """Advances one control period under `action` (float32 [action_dim] in [-1, 1]).

        Never resets: the caller decides what follows a done step. The elapsed
        step count is read from the simulator clock, so wrappers that reset
        `pipeline_state` (brax's auto-reset) also reset the time limit.
        Metrics keys the state arrives with (brax's evaluation wrapper adds
        `reward` at reset) are kept, so the state's structure never changes;
        the reward terms are overwritten with this step's values.
        """
        action = jnp.clip(action, -1.0, 1.0)
        data = self.physics_step(state.pipeline_state, action, self.model(state))
        obs = self.observation(data, action)
        reward, metrics = self.reward(data, action)
        terminated = self.terminated(data)
        steps = jnp.round(data.time / self.ctrl_dt)
        truncated = (steps >= self.episode_length) & ~terminated
        return state.replace(
            pipeline_state=data,
            obs=obs,
            reward=reward,
            done=(terminated | truncated).astype(state.done.dtype),
            terminated=terminated.astype(state.done.dtype),
            truncated=truncated.astype(state.done.dtype),
            metrics={**state.metrics, **metrics},
        )

    def physics_step(self, data: mjx.Data, action: jax.Array, model: mjx.Model) -> mjx.Data:
        """`n_substeps` MJX steps of `model` with the control held at `action`.

        Contacts follow `self.smoothing`; with `state_grad_clip` the gradient
        flowing back into `data` is clipped to that norm, with `state_grad_decay`
        scaled by that factor.
        """
        data = self._shape_state_gradient(data).replace(ctrl=action)

        def substep(data: mjx.Data, _: None) -> tuple[mjx.Data, None]:
            return self.smoothing.step(model, data), None

        data, _ = jax.lax.scan(substep, data, None, length=self.n_substeps, unroll=self.unroll_substeps)
        return data

    def _shape_state_gradient(self, data: mjx.Data) -> mjx.Data:
        """`data`, its gradient clipped (`state_grad_clip`) and scaled (`state_grad_decay`) as `self.smoothing` says."""
        if self.smoothing.state_grad_clip > 0:
            data = clip_gradient(data, self.smoothing.state_grad_clip)
        if self.smoothing.state_grad_decay < 1:
            data = scale_gradient(data, self.smoothing.state_grad_decay)
        return data

    @with_contractions
    def data_from_qpos_qvel(self, qpos: jax.Array, qvel: jax.Array) -> mjx.Data:
        """A simulator state at time 0 with the given coordinates, kinematics computed."""
        data = mjx.make_data(self.mjx_model).replace(qpos=qpos, qvel=qvel)
        return mjx.forward(self.mjx_model, data)

    @functools.cached_property
    def observation_size(self) -> int:
        """obs_dim, traced once per env (tracing a reset of a large model takes seconds)."""
        data = jax.eval_shape(self.initial_data, jax.random.key(0))
        obs = jax.eval_shape(self.observation, data, jnp.zeros(self.action_size))
        return obs.shape[-1]

    @property
    def action_size(self) -> int:
        return self.mj_model.nu

    @property
    def backend(self) -> str:
        return "mjx"

    @property
    def dt(self) -> float:
        """Control period in seconds (brax's name)."""
        return self.ctrl_dt
