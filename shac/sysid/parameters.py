"""The parameters a fit estimates, as far as they are specific to system identification.

Parameters are named `element:name:attribute` (e.g. `joint:hinge:damping`) and
resolved, read and written on MuJoCo and MJX models by `envs.physics.parameters`,
which domain randomisation shares. Here: values given as `element:name:attribute=value`
(`parse_assignments`), and where a parameter may lie (`Bounds`), which maps each
value to the variable the fit steps in: unconstrained (a log or logistic map),
or the value itself in a unit, kept within its bounds by the solver (for a
parameter whose bound is a value it may take, like a control delay of 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Bounds:
    """Where a parameter may lie: (lower, upper), upper may be inf.

    Attributes:
        unit: None: the fit steps in an unconstrained theta (log above a lower
            bound, logistic between two), so the value stays strictly inside.
            A positive number: the fit steps in theta = value / unit, and the
            solver keeps lower <= value <= upper (`theta_limits`), bounds included;
            the upper bound must then be finite.
    """

    lower: float = 0.0
    upper: float = float("inf")
    unit: float | None = None

    def to_value(self, theta: np.ndarray) -> np.ndarray:
        """theta -> value: exp above a lower bound, logistic between two, or theta * unit."""
        if self.unit is not None:
            return theta * self.unit
        if np.isinf(self.upper):
            return self.lower + np.exp(theta)
        return self.lower + (self.upper - self.lower) / (1.0 + np.exp(-theta))

    def derivative(self, theta: np.ndarray) -> np.ndarray:
        """d value / d theta."""
        if self.unit is not None:
            return np.full_like(np.asarray(theta, np.float64), self.unit)
        if np.isinf(self.upper):
            return np.exp(theta)
        s = 1.0 / (1.0 + np.exp(-theta))
        return (self.upper - self.lower) * s * (1 - s)

    def theta_limits(self) -> tuple[float, float]:
        """(lower, upper) of theta that the solver enforces: the bounds in units, or none (-inf, inf)."""
        if self.unit is None:
            return -np.inf, np.inf
        return self.lower / self.unit, self.upper / self.unit

    def to_theta(self, value: float) -> float:
        if self.unit is not None:
            if not self.lower <= value <= self.upper:
                raise ValueError(f"initial value {value} is outside the bounds [{self.lower}, {self.upper}]")
            return float(value / self.unit)
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
