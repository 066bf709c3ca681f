"""MuJoCo Playground's tasks as environments of this project: `envs.make("playground/<Name>")`.

The one place that imports `mujoco_playground` (the optional extra
`pip install "shac[playground]"`). A Playground task keeps its own model, reset,
reward and observation; this bridge makes it differentiable and speaks this
project's `State`:

- MJX's pure-JAX implementation (`impl="jax"`), the only one with gradients:
  Playground's configs say `warp`, which has none. Said once per task, in a warning.
- The model is checked as this project's own are (`check_differentiable`): a
  constraint solver of more than one iteration (most dm_control tasks run 2 to
  4) is set to one, and each change is reported (`model_changes`, a warning).
- The line search of MJX's solver is differentiated with its step length held
  (`Smoothing.hold_linesearch`, set for every Playground task): without it, about 1% of the
  states of a model with an inactive constraint give NaN gradients
  (docs/playground.md, "The NaN gradient").
- Playground's `done` is a failure (`terminated`: NaN physics, a fall); the time
  limit is this project's `truncated`, so it bootstraps.
- A dictionary observation is read at `obs_key` (default `state`).
- The reward terms Playground logs as `reward/<term>` become this project's
  metrics `<term>` (logged as `reward/<term>`).
- Optionally (`reward_margin` > 0), a reward `tolerance` that Playground calls
  without a margin, flat outside its bounds, keeps its value and takes the
  gradient of a long-tailed tolerance with a margin (`surrogate_margin_tolerance`).

Options: `episode_length`, `substeps` (Playground's `sim_dt` becomes `ctrl_dt /
substeps`), `reward_margin`, `smoothing` (all modes: the softened model runs Playground's own
step), `randomization` (Playground's step simulates the episode's sampled
model; values a task derived from its model in its constructor keep the
nominal ones), `max_velocity` and `config_overrides` (Playground's config keys).
`physics` (MJCF values before compiling) and `unroll_substeps` fail in one line:
Playground compiles its XML and rolls its substeps inside its own code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import importlib
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

from envs.base import MjxEnv, State, check_differentiable
from envs.physics.mjx_math import contractions
from envs.physics.smoothing import Smoothing
from envs.private_apis import (
    mjspec_find_body,
    playground_menagerie_path,
    playground_tolerance_wrapped,
    playground_with_model,
)

PREFIX = "playground/"
"""Environment names of the form `playground/<Name>` come through this bridge."""
DEFAULT_OBS_KEY = "state"
"""The entry of a dictionary observation that the policy sees unless `obs_key` says otherwise."""
INSTALL = 'pip install "shac[playground]"'


def _playground():
    """The `mujoco_playground` module, or an ImportError that says how to install it."""
    try:
        import mujoco_playground
    except ImportError:
        raise ImportError(f"Playground tasks need MuJoCo Playground: {INSTALL}") from None
    return mujoco_playground


def task_names(suite: str | None = None) -> list[str]:
    """The tasks of Playground's registry, as `playground/<Name>`: all, or those of one `suite`
    (`dm_control_suite`, `locomotion` or `manipulation`)."""
    registry = _playground().registry
    return [PREFIX + name for name in (registry.ALL_ENVS if suite is None else getattr(registry, suite).ALL_ENVS)]


def published_ppo_config(name: str) -> dict[str, Any]:
    """Playground's own brax PPO hyperparameters for the task `name` (its `config/<suite>_params.py`
    `brax_ppo_config`, per-task values included), as a plain dict."""
    task = name.removeprefix(PREFIX)
    task_class(task)  # an unknown name fails here, naming the close matches
    registry = _playground().registry
    suite = next(s for s in ("dm_control_suite", "locomotion", "manipulation") if task in getattr(registry, s).ALL_ENVS)
    params = importlib.import_module(f"mujoco_playground.config.{suite}_params")
    return params.brax_ppo_config(task).to_dict()


@functools.cache
def task_class(name: str) -> type[PlaygroundEnv]:
    """The environment class of the Playground task `name` (`playground/<Name>` or `<Name>`).

    Its constructor declares the task's episode length (so a config's horizon is
    checked without building a model) and takes the options of `PlaygroundEnv`.

    Raises:
        ValueError: an unknown task, naming the close matches.
        ImportError: MuJoCo Playground is not installed.
    """
    task = name.removeprefix(PREFIX)
    registry = _playground().registry
    if task not in registry.ALL_ENVS:
        close = difflib.get_close_matches(task, registry.ALL_ENVS, n=5, cutoff=0.5)
        hint = f"close matches: {', '.join(PREFIX + c for c in close)}" if close else "see envs.playground.task_names()"
        raise ValueError(f"unknown Playground task '{task}'; {hint}")
    declared = int(registry.get_default_config(task).episode_length)

    def __init__(self, episode_length: int = declared, **options):
        PlaygroundEnv.__init__(self, task, episode_length=episode_length, **options)

    return type(f"Playground{task}", (PlaygroundEnv,), {"__init__": __init__, "__module__": __name__})


class PlaygroundEnv(MjxEnv):
    """A MuJoCo Playground task with this project's `State`, differentiable end to end.

    Args:
        task: the name in Playground's registry, e.g. `CartpoleSwingup`.
        episode_length: control steps before time-limit truncation; None keeps the task's.
        obs_key: the entry of a dictionary observation the policy sees; None: `state`.
            Refused for an array observation.
        substeps: physics steps per control step; None keeps the task's `sim_dt`.
        config_overrides: values of the task's Playground config (`ctrl_dt`,
            reward scales, ...); `impl` may only be `jax`.
        reward_margin: > 0: each reward `tolerance` the task calls without a margin
            is differentiated as a long-tailed one with this margin, in the units of
            the tolerance's argument (see `surrogate_margin_tolerance`); its value is
            unchanged. 0: off, the gradient is 0 outside those bounds.
        smoothing, randomization, max_velocity: as for `MjxEnv`.
        physics, unroll_substeps: refused (see the module docstring).

    Attributes:
        task: the Playground name.
        model_changes: what the bridge changed in the task's model to make it
            differentiable, one line each (empty if nothing).
    """

    def __init__(
        self,
        task: str,
        *,
        episode_length: int | None = None,
        obs_key: str | None = None,
        substeps: int | None = None,
        config_overrides: Mapping[str, Any] | None = None,
        reward_margin: float = 0.0,
        physics: Mapping[str, float] | None = None,
        smoothing: Smoothing = Smoothing(),
        randomization: Mapping[str, tuple[float, float]] | None = None,
        unroll_substeps: bool = False,
        max_velocity: float | None = None,
    ):
        playground = _playground()
        if physics:
            raise ValueError(
                f"env.physics is not supported for Playground task '{task}': Playground compiles its own XML "
                "inside its constructor; use randomization ranges or env.config_overrides instead"
            )
        if unroll_substeps:
            raise ValueError(
                f"env.unroll_substeps is not supported for Playground task '{task}': Playground rolls its "
                "substeps inside its own step"
            )
        if not (math.isfinite(reward_margin) and reward_margin >= 0):
            raise ValueError(f"reward_margin must be a finite number >= 0 (0: off), got {reward_margin}")
        config = playground.registry.get_default_config(task)
        overrides = dict(config_overrides or {})
        if overrides.get("impl", "jax") != "jax":
            raise ValueError(
                f"impl='{overrides['impl']}' for Playground task '{task}': only impl='jax' (MJX's pure-JAX "
                "implementation) has gradients"
            )
        if substeps is not None:
            if substeps < 1:
                raise ValueError(f"substeps must be >= 1, got {substeps}")
            overrides["sim_dt"] = overrides.get("ctrl_dt", config.ctrl_dt) / substeps
        if config.get("impl", "jax") != "jax":
            warnings.warn(
                f"Playground task '{task}': impl='jax' (MJX's differentiable implementation) instead of its "
                f"config's '{config.impl}', which has no gradients",
                stacklevel=3,
            )
        overrides["impl"] = "jax"
        if task in (*playground.registry.locomotion.ALL_ENVS, *playground.registry.manipulation.ALL_ENVS):
            menagerie = playground_menagerie_path(playground)
            if not menagerie.exists():
                raise FileNotFoundError(
                    f"Playground task '{task}' needs MuJoCo Menagerie's robot models at {menagerie}, which are "
                    "missing: Playground git-clones github.com/google-deepmind/mujoco_menagerie there on first use "
                    "(run `python -c \"from mujoco_playground import registry; registry.load('" + task + "')\"` "
                    "once with network access, or clone it there yourself)"
                )
        try:
            with mjspec_find_body():  # the Reacher tasks' version check calls a removed method
                env = playground.registry.load(task, config_overrides=overrides)
        except Exception as e:  # Playground's constructors raise anything: say which task and why
            raise ValueError(f"Playground task '{task}' cannot be built: {type(e).__name__}: {e}") from None

        mj_model = env.mj_model
        if episode_length is None:
            episode_length = int(overrides.get("episode_length", config.episode_length))
        self.task = task
        self.reward_margin = float(reward_margin)
        self.model_changes = tuple(_make_differentiable(mj_model))
        if self.model_changes:
            warnings.warn(f"Playground task '{task}': {'; '.join(self.model_changes)}", stacklevel=3)
        check_differentiable(mj_model, task)
        self._set_model(
            mj_model,
            ctrl_dt=float(env.dt),
            episode_length=episode_length,
            smoothing=dataclasses.replace(smoothing, hold_linesearch=True),
            randomization=randomization,
            unroll_substeps=False,
            max_velocity=max_velocity,
        )
        self.playground_env = playground_with_model(env, self.mjx_model)
        self.state_class = playground.State

        first = jax.eval_shape(self.playground_env.reset, jax.random.key(0))
        self._dict_obs = isinstance(first.obs, Mapping)
        if self._dict_obs:
            self.obs_key = DEFAULT_OBS_KEY if obs_key is None else obs_key
            if self.obs_key not in first.obs:
                raise ValueError(
                    f"env.obs_key '{self.obs_key}' is not an observation of Playground task '{task}'; "
                    f"its observations: {', '.join(first.obs)}"
                )
        elif obs_key is not None:
            raise ValueError(
                f"env.obs_key='{obs_key}' given, but Playground task '{task}' observes one array, not a dictionary"
            )
        self._reward_terms = {key: key.removeprefix("reward/") for key in first.metrics if key.startswith("reward/")}
        self._keys_in_info = jax.tree.map(_is_key, first.info)
        self._observation_size = int(self._policy_obs(first.obs).shape[-1])

    # ----------------------------------------------------------- interface

    def reset(self, rng: jax.Array) -> State:
        """A fresh episode from Playground's reset (and this episode's model parameters, if randomised)."""
        rng, info = self._sample_model_params(rng)
        inner = playground_with_model(self.playground_env, self._model_with(info)).reset(rng)
        zero = jnp.zeros(())
        return State(
            pipeline_state=inner.data,
            obs=self._policy_obs(inner.obs),
            reward=zero,
            done=zero,
            terminated=zero,
            truncated=zero,
            metrics={term: jnp.zeros(()) for term in self._reward_terms.values()},
            info={**info, "playground": self._carried(inner)},
        )

    def step(self, state: State, action: jax.Array) -> State:
        """One control step of Playground's own step under `action` (float32 [action_dim] in [-1, 1]).

        Playground's `done` (NaN physics, a fall) is `terminated`; reaching
        `episode_length` steps is `truncated`. Never resets.
        """
        action = jnp.clip(action, -1.0, 1.0)
        carried = state.info["playground"]
        inner = self.state_class(
            data=self._shape_state_gradient(state.pipeline_state),
            obs=carried.get("obs", state.obs),
            reward=state.reward,
            done=state.terminated,
            metrics=carried["metrics"],
            info=jax.tree.map(_from_key_data, self._keys_in_info, carried["info"]),
        )
        inner = self._step_function(state.info)(inner, action)
        terminated = inner.done > 0
        steps = jnp.round(inner.data.time / self.ctrl_dt)
        truncated = (steps >= self.episode_length) & ~terminated
        terms = {term: inner.metrics[key] for key, term in self._reward_terms.items()}
        return state.replace(
            pipeline_state=inner.data,
            obs=self._policy_obs(inner.obs),
            reward=inner.reward.astype(state.reward.dtype),
            done=(terminated | truncated).astype(state.done.dtype),
            terminated=terminated.astype(state.done.dtype),
            truncated=truncated.astype(state.done.dtype),
            metrics={**state.metrics, **terms},
            info={**state.info, "playground": self._carried(inner)},
        )

    def initial_data(self, rng: jax.Array) -> mjx.Data:
        """The simulator state of Playground's reset from `rng`."""
        return self.playground_env.reset(rng).data

    def observation(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        """Not available: a Playground task computes its observation inside its own `reset` and `step`."""
        raise NotImplementedError(f"Playground task '{self.task}' observes inside its own reset and step")

    def reward(self, data: mjx.Data, action: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        """Not available: a Playground task computes its reward inside its own `step`."""
        raise NotImplementedError(f"Playground task '{self.task}' computes its reward inside its own step")

    @property
    def observation_size(self) -> int:
        """obs_dim, from the trace of Playground's reset at construction (a trace takes seconds)."""
        return self._observation_size

    # ------------------------------------------------------------- helpers

    def _policy_obs(self, obs: Any) -> jax.Array:
        """float32 [obs_dim]: the array the policy sees of Playground's observation."""
        return obs[self.obs_key] if self._dict_obs else obs

    def _carried(self, inner: Any) -> dict[str, Any]:
        """What Playground's next step needs beyond the simulator state: its info (PRNG keys as their key
        data, which checkpoints hold), metrics and dictionary observation."""
        carried = {"info": jax.tree.map(_to_key_data, inner.info), "metrics": inner.metrics}
        if self._dict_obs:
            carried["obs"] = inner.obs
        return carried

    def _tolerance(self) -> contextlib.AbstractContextManager:
        """Playground's reward `tolerance` with a finite gradient at infinite bounds (`safe_tolerance`) and,
        if `reward_margin` > 0, a gradient where it is flat (`surrogate_margin_tolerance`)."""

        def wrap(original: Callable) -> Callable:
            safe = functools.partial(safe_tolerance, original)
            if self.reward_margin == 0:
                return safe
            return functools.partial(surrogate_margin_tolerance, safe, self.reward_margin)

        return playground_tolerance_wrapped(_playground(), wrap)

    def _step_function(self, info: Mapping[str, Any]) -> Callable[[Any, jax.Array], Any]:
        """Playground's step for an episode with `info` (its model parameters, if randomised), contacts as
        `self.smoothing` says."""
        model = self._model_with(info)

        def step(model: mjx.Model, inner: Any, action: jax.Array) -> Any:
            with contractions(), self.smoothing.linesearch(), self._tolerance():
                return playground_with_model(self.playground_env, model).step(inner, action)

        if self.smoothing.mode == "none":
            return functools.partial(step, model)
        if self.smoothing.mode == "soft":
            return functools.partial(step, self.smoothing.soften(model))
        return functools.partial(_straight_through, step, self.smoothing.soften, model)


def safe_tolerance(
    tolerance: Callable, x: jax.Array, bounds: tuple[float, float] = (0.0, 0.0), margin: float = 0.0, **options
) -> jax.Array:
    """Playground's `tolerance(x, bounds, margin, ...)` (1 inside `bounds`, a sigmoid of the distance
    outside), with a finite gradient where a bound is infinite.

    Playground computes the sigmoid of the distance to the far bound too and selects
    it away with `where`: at an infinite bound (the walker's and the humanoid's
    standing height, `(h, inf)`) that distance is infinite, the sigmoid's derivative
    there is NaN, and the `where` passes the NaN back. Here the sigmoid only ever
    sees `x` from outside the bounds.
    """
    lower, upper = bounds
    inside = (lower <= x) & (x <= upper)
    outside = lower - 1.0 if math.isfinite(lower) else upper + 1.0  # a finite point beyond a finite bound
    if not math.isfinite(outside):  # (-inf, inf): always inside
        return jnp.ones_like(x)
    value = tolerance(jnp.where(inside, outside, x), bounds=bounds, margin=margin, **options)
    return jnp.where(inside, 1.0, value)


def surrogate_margin_tolerance(
    tolerance: Callable,
    margin_if_flat: float,
    x: jax.Array,
    bounds: tuple[float, float] = (0.0, 0.0),
    margin: float = 0.0,
    **options,
) -> jax.Array:
    """`tolerance(x, bounds, margin, ...)`'s value; where `margin` is 0 (exactly 0 outside `bounds`, so a
    zero gradient), the gradient of `tolerance(x, bounds, margin_if_flat, sigmoid="long_tail")`.

    `margin_if_flat` is in `x`'s own units (metres, a cosine, ...; the dm_control
    suite's are of order 1). The long tail, `1 / (1 + (3 d / margin_if_flat)^2)` at a
    distance `d` outside the bounds, is never exactly 0, so the gradient points
    towards the bounds from any distance. The value stays the task's (`value + (s -
    stop_gradient(s))`), so returns are unchanged; a product of two such terms that
    are both 0 still has a zero gradient.
    """
    value = tolerance(x, bounds=bounds, margin=margin, **options)
    if not isinstance(margin, int | float) or margin > 0:
        return value
    surrogate = tolerance(x, bounds=bounds, margin=margin_if_flat, sigmoid="long_tail")
    return value + (surrogate - jax.lax.stop_gradient(surrogate))


def _is_key(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _to_key_data(x: jax.Array) -> jax.Array:
    return jax.random.key_data(x) if _is_key(x) else x  # brax's wrappers reset with raw uint32 keys


def _from_key_data(is_key: bool, x: jax.Array) -> jax.Array:
    return jax.random.wrap_key_data(x) if is_key else x


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _straight_through(step: Callable, soften: Callable, model: mjx.Model, inner: Any, action: jax.Array) -> Any:
    """`step(model, inner, action)`, differentiated as `step(soften(model), inner, action)`.

    The model is an argument rather than a closure: a custom VJP's backward pass
    cannot close over values traced outside it (a randomised model, or the
    softened one computed under `jit`), which MJX's contact code then meets as
    constants.
    """
    return step(model, inner, action)


def _straight_through_forward(step, soften, model, inner, action):
    return step(model, inner, action), (model, inner, action)


def _straight_through_backward(step, soften, inputs, cotangent):
    _, pullback = jax.vjp(lambda m, i, a: step(soften(m), i, a), *inputs)
    return pullback(cotangent)


_straight_through.defvjp(_straight_through_forward, _straight_through_backward)


def _make_differentiable(mj_model: mujoco.MjModel) -> list[str]:
    """Sets `mj_model`'s solver so that MJX can differentiate it in reverse mode; returns what changed."""
    changes = []
    if mj_model.opt.iterations != 1:
        changes.append(f"opt.iterations {mj_model.opt.iterations} -> 1 (MJX's reverse mode needs one solver iteration)")
        mj_model.opt.iterations = 1
    if mj_model.opt.solver not in (mujoco.mjtSolver.mjSOL_NEWTON, mujoco.mjtSolver.mjSOL_CG):
        solver = mujoco.mjtSolver(mj_model.opt.solver).name
        changes.append(f"opt.solver {solver} -> mjSOL_NEWTON (MJX's smooth line search)")
        mj_model.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    return changes
