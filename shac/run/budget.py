"""A run's training time against its budget (`algo.budget_minutes`): the clock that stops the run and
that its learning rates decay on (`Shac.decay_position` reads it from `TrainState.train_seconds`)."""

from __future__ import annotations


class TrainingClock:
    """Training seconds of a run, counted epoch by epoch: each epoch's wall time, except the first of each
    launch (it compiles). Counts nothing without a budget.

    Args:
        budget_minutes: the run's budget, or None.
        trained_s: training seconds before this launch (a resumed checkpoint's `train_seconds`).
    """

    def __init__(self, budget_minutes: float | None, trained_s: float = 0.0):
        self.budget_s = None if budget_minutes is None else 60.0 * budget_minutes
        self.trained_s = trained_s
        self._compiled = False

    def epoch_done(self, seconds: float) -> None:
        """Counts an epoch that took `seconds` of wall time (the launch's first: not counted)."""
        if self.budget_s is not None and self._compiled:
            self.trained_s += seconds
        self._compiled = True

    @property
    def spent(self) -> bool:
        """Whether the budget is used up (never without one)."""
        return self.budget_s is not None and self.trained_s >= self.budget_s

    @property
    def seconds_left(self) -> float | None:
        """Training seconds left of the budget; None without one."""
        return None if self.budget_s is None else max(self.budget_s - self.trained_s, 0.0)
