"""The algorithms by name: `algo.name` (chosen with `algo=shac|ahac|sapo`) -> its class."""

from __future__ import annotations

from envs import MjxEnv
from shac.config import AlgoConfig
from shac.core.ahac import Ahac
from shac.core.algorithm import Shac
from shac.core.sapo import Sapo

ALGORITHMS: dict[str, type[Shac]] = {"shac": Shac, "ahac": Ahac, "sapo": Sapo}


def make_algorithm(config: AlgoConfig, env: MjxEnv) -> Shac:
    """The algorithm `config.name` names, for `env`.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if config.name not in ALGORITHMS:
        raise ValueError(f"unknown algo.name '{config.name}'; available: {', '.join(ALGORITHMS)}")
    return ALGORITHMS[config.name](config, env)
