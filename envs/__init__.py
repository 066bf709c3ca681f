"""MJX environments by name: `envs.make(name, **options)`.

The lowest layer: the environment contract (`base.py`), one file per task, what the
locomotion tasks share (`locomotion.py`), the physics helpers (`physics/`) and every use
of another library's private API (`private_apis.py`). A new task of this repository goes
here as a module and an entry in `_REGISTRY`; a task in another package needs no change
here (see `resolve`). MuJoCo Playground's tasks come in as `playground/<Name>` through
one file, `playground.py`, the only module that imports `mujoco_playground` (an
optional extra). Modules here may import JAX, MuJoCo, MJX and brax's `Env` interface,
never `shac` or `launch`.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from importlib.metadata import entry_points
from pathlib import Path

from envs.ant import Ant
from envs.arm_reach import ArmReach
from envs.base import MjxEnv, NotDifferentiableError, State, check_differentiable
from envs.cartpole_swingup import CartPoleSwingUp
from envs.half_cheetah import HalfCheetah
from envs.hopper import Hopper
from envs.humanoid import Humanoid
from envs.pendulum_swingup import PendulumSwingUp

ENTRY_POINT_GROUP = "shac.envs"
"""Python entry-point group through which installed packages add environments by name."""

_REGISTRY: dict[str, type[MjxEnv]] = {
    "ant": Ant,
    "arm_reach": ArmReach,
    "cartpole_swingup": CartPoleSwingUp,
    "half_cheetah": HalfCheetah,
    "hopper": Hopper,
    "humanoid": Humanoid,
    "pendulum_swingup": PendulumSwingUp,
}


_OTHER_NAMES = "playground/<Name> or package.module:Class"
"""The names `make` accepts that `names` cannot list."""


def names() -> list[str]:
    """The environment names `make` accepts besides `package.module:Class`, sorted: the
    registered ones and those of installed packages' `shac.envs` entry points."""
    return sorted({*_REGISTRY, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})


def resolve(name: str) -> type:
    """The environment class `name` stands for.

    Args:
        name: a registered name (`cartpole_swingup`), a MuJoCo Playground task
            (`playground/CartpoleSwingup`), the name of an entry point in the
            `shac.envs` group of an installed package, or `package.module:Class`
            (importable from the working directory or the environment).

    Raises:
        ValueError: naming what was not found and the names available (for a
            Playground task, the close matches; without Playground installed,
            the `pip install` that adds it).
    """
    if name in _REGISTRY:
        return _REGISTRY[name]
    if not name:
        raise ValueError(f"no env named (env.name is empty); available: {', '.join(names())}, {_OTHER_NAMES}")
    if name.startswith("playground/"):
        from envs import playground

        try:
            return playground.task_class(name)
        except ImportError as e:
            raise ValueError(f"env '{name}': {e}") from None
    if ":" in name:
        module_name, _, class_name = name.partition(":")
        if str(Path.cwd()) not in sys.path:
            sys.path.append(str(Path.cwd()))  # the working directory's packages, as `python -m` finds them
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ValueError(f"env '{name}': cannot import module '{module_name}' ({e})") from None
        if not isinstance(getattr(module, class_name, None), type):
            raise ValueError(f"env '{name}': module '{module_name}' has no class '{class_name}'")
        return getattr(module, class_name)
    for entry_point in entry_points(group=ENTRY_POINT_GROUP, name=name):
        return entry_point.load()
    raise ValueError(f"unknown env '{name}'; available: {', '.join(names())}, {_OTHER_NAMES}")


def declared_episode_length(name: str) -> int | None:
    """The default `episode_length` of the constructor of the class `name` stands for, without building it.

    None when the constructor declares no default episode length.
    """
    parameter = inspect.signature(resolve(name)).parameters.get("episode_length")
    if parameter is None or not isinstance(parameter.default, int):
        return None
    return parameter.default


def make(name: str, **options) -> MjxEnv:
    """Builds the environment `name` stands for (see `resolve`).

    Args:
        name: a registered name, an entry point's name or `package.module:Class`.
        **options: constructor arguments of that environment, e.g.
            `episode_length=100`, `smoothing=Smoothing(mode="soft")`,
            `randomization={"joint:hinge:damping": (0.02, 0.08)}`,
            `unroll_substeps=True` (see `MjxEnv`).

    Raises:
        ValueError: unknown name or option.
    """
    env_class = resolve(name)
    try:
        return env_class(**options)
    except TypeError as e:
        raise ValueError(f"bad options {options} for env '{name}': {e}") from None


def register(name: str, env_class: type[MjxEnv]) -> None:
    """Adds `env_class` to the registry under `name` (for environments defined in a running program)."""
    if name in _REGISTRY:
        raise ValueError(f"env '{name}' is already registered")
    _REGISTRY[name] = env_class


__all__ = [
    "ENTRY_POINT_GROUP",
    "MjxEnv",
    "NotDifferentiableError",
    "State",
    "check_differentiable",
    "declared_episode_length",
    "make",
    "names",
    "register",
    "resolve",
]
