"""A training clock with a wall-clock budget, that leaves out evaluation and compilation.

Every method is timed the same way: the clock runs between two evaluations
(one lap each), so evaluation time is never counted. Each method does the same
work in every lap, and the first lap also compiles, so its compile time is
estimated as the first lap's excess over the second and left out as well.
"""

from __future__ import annotations

import time


class BudgetSpent(Exception):
    """Raised from a training callback to stop a method whose budget is spent."""


class BudgetClock:
    """Training time of one run, lap by lap, against a budget.

    Args:
        budget_s: seconds of training (compile and evaluation excluded) the run may use.
    """

    def __init__(self, budget_s: float):
        if not budget_s > 0:
            raise ValueError(f"budget must be > 0 seconds, got {budget_s}")
        self.budget_s = budget_s
        self.laps: list[float] = []
        self._started: float | None = None

    def resume(self) -> None:
        """Starts a lap (after an evaluation)."""
        self._started = time.perf_counter()

    def lap(self) -> None:
        """Ends the running lap (before an evaluation)."""
        if self._started is None:
            raise RuntimeError("BudgetClock.lap() without a running lap; call resume() first")
        self.laps.append(time.perf_counter() - self._started)
        self._started = None

    @property
    def compile_s(self) -> float | None:
        """The first lap's excess over the second (its compilation); None before two laps."""
        if len(self.laps) < 2:
            return None
        return max(self.laps[0] - self.laps[1], 0.0)

    def elapsed(self, laps: int | None = None) -> float:
        """Training seconds of the first `laps` laps (all by default), compilation excluded once known."""
        counted = self.laps[: len(self.laps) if laps is None else laps]
        return sum(counted) - (self.compile_s or 0.0) * (len(counted) > 0)

    def spent(self) -> bool:
        """Whether the budget is used up (never before the compile time is known, i.e. two laps)."""
        return self.compile_s is not None and self.elapsed() >= self.budget_s
