"""The parameters a fit estimates, as far as they are specific to system identification.

Parameters are named `element:name:attribute` (e.g. `joint:hinge:damping`) and
resolved, read and written on MuJoCo and MJX models by `envs.physics.parameters`,
which domain randomisation shares. Here: values given as `element:name:attribute=value`
(`parse_assignments`), and where a parameter may lie (`Bounds`), which maps each
value to the variable the fit steps in: a log above a lower bound (down to a
floor), or the value itself in a unit, kept within its bounds by the solver
(between two bounds, and for a parameter whose bound is a value it may take,
like a control delay of 0).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

LOG_FLOOR = 1e-6
"""Above a lower bound alone, the least distance to it the fit allows, as a fraction of the initial one."""
FLOOR_REACH = 10.0
"""A parameter within this factor of its floor counts as at it (`Bounds.at_floor`)."""


@dataclass(frozen=True)
class Bounds:
    """Where a parameter may lie: (lower, upper), upper may be inf.

    Above a lower bound alone the fit steps in theta = log(value - lower), so steps are relative, and
    the solver keeps value - lower >= `floor` (`theta_limits`). The log flattens toward the bound: a
    parameter that the first steps carry toward it would otherwise sink without end, with a derivative
    that vanishes and no standard error; at the floor the derivative is `floor`, so the parameter
    leaves it as soon as the data pull it back, and a true value at the bound is estimated within
    `floor` of it. Between two bounds it steps in theta = value / unit and the solver keeps
    lower <= value <= upper, bounds included, where a logistic map of the interval would flatten
    at both ends and hold a parameter that reached one.

    Attributes:
        unit: the unit of theta between two bounds (default: upper - lower); with an infinite upper
            bound, a unit makes theta = value / unit with only the lower bound enforced.
        floor: above a lower bound alone, the least value - lower (0: none; `with_floor` sets it
            from the initial value).
    """

    lower: float = 0.0
    upper: float = float("inf")
    unit: float | None = None
    floor: float = 0.0

    def with_floor(self, initial: float) -> Bounds:
        """These bounds with `floor` at LOG_FLOOR of `initial`'s distance to a lower bound alone."""
        if self.scale is not None or not initial > self.lower:
            return self
        return replace(self, floor=LOG_FLOOR * (initial - self.lower))

    def at_floor(self, value: float) -> bool:
        """Whether `value` is at the floor: within `FLOOR_REACH` of it, where a fit that approaches it in ever
        shorter steps stops, as good as 0 next to its initial value."""
        return self.floor > 0 and value - self.lower <= FLOOR_REACH * self.floor

    @property
    def scale(self) -> float | None:
        """The unit theta is measured in, or None for a log above the lower bound."""
        if self.unit is not None:
            return self.unit
        return None if np.isinf(self.upper) else self.upper - self.lower

    def to_value(self, theta: np.ndarray) -> np.ndarray:
        """theta -> value: exp above a lower bound, or theta * unit."""
        scale = self.scale
        return self.lower + np.exp(theta) if scale is None else theta * scale

    def derivative(self, theta: np.ndarray) -> np.ndarray:
        """d value / d theta."""
        scale = self.scale
        return np.exp(theta) if scale is None else np.full_like(np.asarray(theta, np.float64), scale)

    def theta_limits(self) -> tuple[float, float]:
        """(lower, upper) of theta that the solver enforces: the bounds in units, or the floor's log."""
        scale = self.scale
        if scale is None:
            return (np.log(self.floor) if self.floor > 0 else -np.inf), np.inf
        return self.lower / scale, self.upper / scale

    def to_theta(self, value: float) -> float:
        scale = self.scale
        if scale is not None:
            if not self.lower <= value <= self.upper:
                raise ValueError(f"initial value {value} is outside the bounds [{self.lower}, {self.upper}]")
            return float(value / scale)
        if not self.lower < value:
            raise ValueError(f"initial value {value} is outside the bounds ({self.lower}, {self.upper})")
        return float(np.log(value - self.lower))


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
