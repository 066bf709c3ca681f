"""The parameters a fit estimates, as far as they are specific to system identification.

Parameters are named `element:name:attribute` (e.g. `joint:hinge:damping`) and
resolved, read and written on MuJoCo and MJX models by `envs.physics.parameters`,
which domain randomisation shares. Here: values given as `element:name:attribute=value`
(`parse_assignments`), and where a parameter may lie (`Bounds`), which maps each
value to the unconstrained variable the fit steps in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Bounds:
    """Where a parameter may lie: (lower, upper), upper may be inf."""

    lower: float = 0.0
    upper: float = float("inf")

    def to_value(self, theta: np.ndarray) -> np.ndarray:
        """Unconstrained theta -> value in (lower, upper): exp above a lower bound, logistic between two."""
        if np.isinf(self.upper):
            return self.lower + np.exp(theta)
        return self.lower + (self.upper - self.lower) / (1.0 + np.exp(-theta))

    def derivative(self, theta: np.ndarray) -> np.ndarray:
        """d value / d theta."""
        if np.isinf(self.upper):
            return np.exp(theta)
        s = 1.0 / (1.0 + np.exp(-theta))
        return (self.upper - self.lower) * s * (1 - s)

    def to_theta(self, value: float) -> float:
        if not self.lower < value < self.upper:
            raise ValueError(f"initial value {value} is outside the bounds ({self.lower}, {self.upper})")
        if np.isinf(self.upper):
            return float(np.log(value - self.lower))
        u = (value - self.lower) / (self.upper - self.lower)
        return float(np.log(u / (1.0 - u)))


def parse_assignments(items: list[str] | tuple[str, ...]) -> dict[str, float]:
    """`["joint:hinge:damping=0.1", ...]` -> {"joint:hinge:damping": 0.1, ...}.

    Raises:
        ValueError: an item without `=value` or with a non-numeric value.
    """
    values = {}
    for item in items:
        key, sep, value = item.rpartition("=")
        try:
            values[key] = float(value)
        except ValueError:
            sep = ""
        if not sep or not key:
            raise ValueError(f"'{item}' is not element:name:attribute=value")
    return values
