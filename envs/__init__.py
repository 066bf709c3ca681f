"""Registered MJX environments: `envs.make(name, **overrides)`.

The lowest layer: the environment contract (`base.py`), one file per task, what the
locomotion tasks share (`locomotion.py`), the physics helpers (`physics/`) and every use
of another library's private API (`private_apis.py`). A new task goes here as a module
(and an entry in `_REGISTRY`). Modules here may import JAX, MuJoCo, MJX and brax's `Env`
interface, never `shac` or `launch`.
"""

from __future__ import annotations

from envs.ant import Ant
from envs.base import MjxEnv, NotDifferentiableError, State, check_differentiable
from envs.cartpole_swingup import CartPoleSwingUp
from envs.half_cheetah import HalfCheetah
from envs.hopper import Hopper
from envs.humanoid import Humanoid
from envs.pendulum_swingup import PendulumSwingUp

_REGISTRY: dict[str, type[MjxEnv]] = {
    "ant": Ant,
    "cartpole_swingup": CartPoleSwingUp,
    "half_cheetah": HalfCheetah,
    "hopper": Hopper,
    "humanoid": Humanoid,
    "pendulum_swingup": PendulumSwingUp,
}


def names() -> list[str]:
    """The registered environment names, sorted."""
    return sorted(_REGISTRY)


def make(name: str, **overrides) -> MjxEnv:
    """Builds the environment registered as `name`.

    Args:
        name: a registered name (see `names()`).
        **overrides: constructor arguments of that environment, e.g.
            `episode_length=100`.

    Raises:
        ValueError: unknown name or override.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown env '{name}'; available: {', '.join(names())}")
    try:
        return _REGISTRY[name](**overrides)
    except TypeError as e:
        raise ValueError(f"bad overrides {overrides} for env '{name}': {e}") from None


def register(name: str, env_class: type[MjxEnv]) -> None:
    """Adds `env_class` to the registry under `name` (for user environments)."""
    if name in _REGISTRY:
        raise ValueError(f"env '{name}' is already registered")
    _REGISTRY[name] = env_class


__all__ = ["MjxEnv", "NotDifferentiableError", "State", "check_differentiable", "make", "names", "register"]
