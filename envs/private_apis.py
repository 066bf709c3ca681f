"""Every use of another library's private API in this repository, in one place.

Each entry names the version it was checked against (the pinned versions of
pyproject.toml) and the test that fails if an upgrade removes it or takes away
its effect. Everything else in the repository goes through public APIs; a new
private use belongs here, with its version and its test.

The libraries are imported inside the functions, so importing this module
imports none of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any


@contextlib.contextmanager
def mjx_math_swapped(replacements: Mapping[str, Callable]) -> Iterator[None]:
    """Within the block, MJX's small-vector math functions are `replacements` (name -> function).

    Private: `mujoco.mjx._src.math` (checked: mujoco-mjx 3.17.0). MJX's step
    looks these functions up in that module when it is traced, so a step traced
    inside the block uses the replacements; MJX's own are restored afterwards.
    Test: tests/test_private_apis.py counts the replacements' calls while
    `mjx.step` is traced.
    """
    from mujoco.mjx._src import math as mjx_math

    originals = {name: getattr(mjx_math, name) for name in replacements}
    for name, fn in replacements.items():
        setattr(mjx_math, name, fn)
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(mjx_math, name, fn)


def mjx_math_function(name: str) -> Callable:
    """MJX's own small-vector math function `name` (e.g. `quat_mul`), as MJX's step would call it.

    Private: `mujoco.mjx._src.math` (checked: mujoco-mjx 3.17.0). Test: tests/test_mjx_math.py.
    """
    from mujoco.mjx._src import math as mjx_math

    return getattr(mjx_math, name)


def contact_distances(data: Any) -> Any:
    """float [..., ncon] signed distances of the model's contact candidates in an `mjx.Data`.

    Negative where two geoms penetrate (the contact is active). Private:
    `mjx.Data._impl.contact` (checked: mujoco-mjx 3.17.0, JAX implementation;
    the public `mjx.Data` has no contact field). Test: tests/test_private_apis.py.
    """
    return data._impl.contact.dist


@contextlib.contextmanager
def brax_apg_evaluations(callback: Callable[[Any, Callable, dict], None]) -> Iterator[None]:
    """Within, brax's APG calls `callback(params, make_policy, training_metrics)` where it would evaluate.

    brax's APG has no parameter callback. Private: `brax.training.agents.apg.train`
    builds its evaluator as `acting.Evaluator(eval_env, eval_policy_fn=functools.partial(
    make_policy, deterministic=...), ...)` and calls `run_evaluation(params,
    training_metrics)` (checked: brax 0.14.2). The evaluator is replaced for the
    duration only by one that hands over the parameters, `make_policy` and the
    training metrics (`training/walltime`, ...; empty before the first epoch),
    and runs no evaluation of its own. Test: tests/test_private_apis.py.
    """
    from unittest import mock

    from brax.training.agents.apg import train as apg_train

    class Evaluator:
        def __init__(self, eval_env, eval_policy_fn, **kwargs):
            del eval_env, kwargs
            self.make_policy = eval_policy_fn.func

        def run_evaluation(self, params, training_metrics, aggregate_episodes=True):
            del aggregate_episodes
            callback(params, self.make_policy, training_metrics)
            return training_metrics

    with mock.patch.object(apg_train.acting, "Evaluator", Evaluator):
        yield


def parse_hydra_overrides(overrides: Sequence[str]) -> list:
    """Hydra's parse of command-line overrides (`key=value`, `+key=value`, `~key`, `group=option`).

    Private: `hydra.core.override_parser.overrides_parser.OverridesParser`
    (checked: hydra-core 1.3.8; Hydra's own command line uses it, but it is not
    part of its documented API). Raises `hydra.errors.HydraException` on a
    malformed override. Test: tests/test_config.py (resuming with overrides).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(list(overrides))


@contextlib.contextmanager
def mjx_linesearch_step_held() -> Iterator[None]:
    """Within the block, MJX's solver differentiates its line search with the step length held constant.

    The values are MJX's own (to float rounding); only the derivative changes. MJX's
    one-iteration Newton solver moves the acceleration by `alpha * search` and
    finds `alpha` as a Newton step `-deriv_0 / deriv_1` along `search`. Where the
    start is already the solution to float precision (no constraint active:
    `search` is rounding noise near 1e-10), the derivative of that ratio
    overflows float32 and the backward pass turns it into NaN, although `alpha *
    search` is tiny and smooth (docs/playground.md, "The NaN gradient"). Held, the
    step contributes `alpha * d(search)`: exact where `alpha` is the solution of a
    quadratic piece (no contact changes along the line), an approximation where
    it is not.

    Private: `mujoco.mjx._src.solver._linesearch` (looked up by `solve` when a
    step is traced), `mujoco.mjx._src.support.mul_m` and `Data._impl.efc_J`
    (checked: mujoco-mjx 3.17.0). Test: tests/test_private_apis.py counts the NaN
    Jacobians of one step over random states of a cart-pole with a slider limit,
    with and without the block.
    """
    import jax
    import jax.numpy as jnp
    from mujoco.mjx._src import solver, support

    original = solver._linesearch

    def held(m, d, ctx):
        searched = jax.lax.stop_gradient(original(m, d, ctx))
        search = jax.lax.stop_gradient(ctx.search)
        squared = jnp.dot(search, search)
        moved = jnp.dot(searched.qacc - jax.lax.stop_gradient(ctx.qacc), search)
        alpha = jnp.where(squared > 0, moved / jnp.where(squared > 0, squared, 1.0), 0.0)
        return ctx.replace(
            qacc=ctx.qacc + alpha * ctx.search,
            Ma=ctx.Ma + alpha * support.mul_m(m, d, ctx.search),
            Jaref=ctx.Jaref + alpha * (d._impl.efc_J @ ctx.search),
        )

    solver._linesearch = held
    try:
        yield
    finally:
        solver._linesearch = original


def playground_with_model(env: Any, mjx_model: Any) -> Any:
    """A shallow copy of the MuJoCo Playground environment `env` that simulates `mjx_model`.

    Private: Playground's environments keep their MJX model in `_mjx_model` and
    read it through the `mjx_model` property in `step` (checked: playground 0.2.0,
    dm_control suite). Values a task derived from its model in its constructor
    keep the constructor's. Test: tests/test_playground.py (a heavier pendulum
    falls differently).
    """
    import copy

    clone = copy.copy(env)
    clone._mjx_model = mjx_model
    return clone


def playground_menagerie_path(playground: Any) -> Any:
    """Where MuJoCo Playground (the module `playground`) looks for MuJoCo Menagerie's robot models (an `epath.Path`).

    Private: `mujoco_playground._src.mjx_env.MENAGERIE_PATH`; Playground git-clones
    Menagerie there the first time a locomotion or manipulation task loads
    (checked: playground 0.2.0). Test: tests/test_playground.py (a missing path fails in one line).
    """
    return playground._src.mjx_env.MENAGERIE_PATH


@contextlib.contextmanager
def playground_tolerance_wrapped(playground: Any, wrap: Callable[[Callable], Callable]) -> Iterator[None]:
    """Within the block, MuJoCo Playground's (the module `playground`) reward `tolerance` is `wrap(tolerance)`.

    Private: `mujoco_playground._src.reward.tolerance`, which Playground's dm_control
    tasks look up as `reward.tolerance` when their step is traced (checked: playground
    0.2.0). Test: tests/test_playground.py (an infinite bound's NaN gradient, gone
    inside the block).
    """
    module = playground._src.reward
    original = module.tolerance
    module.tolerance = wrap(original)
    try:
        yield
    finally:
        module.tolerance = original


@contextlib.contextmanager
def mjspec_find_body() -> Iterator[None]:
    """Within the block, `mujoco.MjSpec.find_body(name)` is `MjSpec.body(name)` where MuJoCo has no `find_body`.

    MuJoCo Playground's Reacher tasks pick between the two by comparing version
    strings (`mujoco.__version__ >= "3.3.0"`, False for "3.17.0") and so call
    `find_body`, which MuJoCo's `MjSpec` no longer has (checked: playground 0.2.0,
    mujoco 3.17.0). Test: tests/test_playground.py (ReacherHard builds, and
    `MjSpec` is as before after the block).
    """
    import mujoco

    if hasattr(mujoco.MjSpec, "find_body"):
        yield
        return
    mujoco.MjSpec.find_body = mujoco.MjSpec.body
    try:
        yield
    finally:
        del mujoco.MjSpec.find_body


def set_xla_log_level(level: int) -> None:
    """XLA's C++ log shows messages of `level` and above (0 info, 1 warning, 2 error, 3 fatal) from now on.

    Private: `jax._src.lib.utils.absl_set_min_log_level` (checked: jax 0.9.2); the
    public `TF_CPP_MIN_LOG_LEVEL` is read only when jaxlib is first imported, and
    `jax_logging_level` also sets the level of JAX's Python loggers. Test:
    tests/test_runtime.py (a load from the compilation cache logs nothing at 3).
    """
    from jax._src.lib import utils

    utils.absl_set_min_log_level(level)
