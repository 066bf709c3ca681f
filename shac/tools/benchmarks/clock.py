"""A training clock with a wall-clock budget, that leaves out evaluation and compilation.

Every method is timed the same way: the clock runs between two evaluations
(one lap each), so evaluation time is never counted. Each method does the same
work in every lap; the first lap also compiles, and the second can still be
slower (brax's APG: about 20 s more on ant, 8 s on the cart-pole, on a 2-core
CPU), so the first two laps count as long as the third at most, and their
excess is reported as compile time.
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

    def counted(self) -> list[float]:
        """Each lap's training seconds: once three laps are known, the first two count at most
        as long as the third (the rest of them is compilation)."""
        if len(self.laps) < 3:
            return list(self.laps)
        clean = self.laps[2]
        return [min(lap, clean) for lap in self.laps[:2]] + self.laps[2:]

    @property
    def compile_s(self) -> float | None:
        """The first two laps' excess over the third (their compilation); None before three laps."""
        if len(self.laps) < 3:
            return None
        return sum(self.laps[:2]) - sum(self.counted()[:2])

    def elapsed(self, laps: int | None = None) -> float:
        """Training seconds of the first `laps` laps (all by default), compilation excluded once known."""
        return sum(self.counted()[: len(self.laps) if laps is None else laps])

    def spent(self) -> bool:
        """Whether the budget is used up (never before the compile time is known, i.e. three laps)."""
        return self.compile_s is not None and self.elapsed() >= self.budget_s
