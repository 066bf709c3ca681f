"""Levenberg-Marquardt for least squares with shared and per-block variables (numpy, float64).

The problem: minimise 1/2 sum_s |r_s(theta, x_s)|^2 over shared variables
theta [P] and one block of local variables x_s [n] per residual block s (in
system identification: the model parameters, and each segment's start state).
Block s's residuals depend on theta and x_s only, so the normal matrix is an
arrow: a dense P x P corner, S dense n x n diagonal blocks and P x n couplings.
Steps and covariances eliminate the local blocks by their Schur complement, at
a cost linear in S.

Convergence is judged by the Gauss-Newton step's length in the metric of the
normal matrix, sqrt(d^T H d) = sqrt(g^T H^-1 g): with residuals weighted by
their noise level, H is the inverse covariance of the variables, so this is the
remaining step in standard errors; below `tolerance` further steps cannot move
any estimate by a meaningful fraction of its uncertainty.

Simulations with constraints (friction, contacts) are only piecewise smooth:
the solver's discrete choices make the cost jump by tiny amounts, so near the
minimum the linear model promises decreases the cost cannot deliver. When the
cost has stopped decreasing (by less than `stall_decrease` over `patience`
iterations; a step of one standard error is worth 0.5) the iteration stops.
This counts as converged only if the remaining Gauss-Newton step is under
`stall_tolerance` standard errors, or if the step would move no shared variable
by `tolerance` of its own standard error (from the Schur complement: the local
variables free). Then what is left to move is local variables (in system
identification: start states of segments where a joint sticks), and no shared
estimate would change by a meaningful fraction of its uncertainty if they did.
The result says that it stalled, how long the step was and how far it would
move the shared variables.

A Jacobian can cost many simulations (one or two per variable by finite
differences). Near the minimum, where the Gauss-Newton step is shorter than
`secant_below` standard errors, an accepted step updates the Jacobian by
Broyden's secant rule instead (block by block, from the residuals the trial
already computed); the iteration ends only on a computed Jacobian, so the tests
and the covariance never rest on a secant one.

Shared variables may have box bounds (`lower`, `upper`; a control delay of 0 is
a value the fit must be able to take). A step is the linearised model's best
within the box (`projected_step`): a variable at a bound that the step would
carry outside is held there, one that the step carries across a bound from
inside is held at that bound, and the step is solved again for the others.
Convergence is judged on that projected Gauss-Newton step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Normal:
    """Normal equations J^T J d = -J^T r of an arrow-structured problem.

    Attributes:
        tt: [P, P]; tx: [S, P, n]; xx: [S, n, n] blocks of J^T J.
        gt: [P] and gx: [S, n] blocks of the gradient J^T r.
    """

    tt: np.ndarray
    tx: np.ndarray
    xx: np.ndarray
    gt: np.ndarray
    gx: np.ndarray

    @classmethod
    def build(cls, residuals: np.ndarray, shared: np.ndarray, local: np.ndarray) -> Normal:
        """From residuals [S, R] and their Jacobians: shared [S, R, P] (d/d theta), local [S, R, n] (d/d x_s)."""
        return cls(
            tt=np.einsum("srp,srq->pq", shared, shared),
            tx=np.einsum("srp,srn->spn", shared, local),
            xx=np.einsum("srn,srm->snm", local, local),
            gt=np.einsum("srp,sr->p", shared, residuals),
            gx=np.einsum("srn,sr->sn", local, residuals),
        )

    def reduced(self, damping: float = 0.0) -> Reduced:
        """The damped system (H + damping diag(H)) d = -g with the local blocks eliminated."""
        xx = self.xx + damping * _diagonal_matrix(self.xx)
        tt = self.tt + damping * np.diag(np.diag(self.tt))
        xx_inv_xt = np.linalg.solve(xx, np.swapaxes(self.tx, 1, 2))  # [S, n, P]
        xx_inv_gx = np.linalg.solve(xx, self.gx[..., None])[..., 0]  # [S, n]
        return Reduced(
            matrix=tt - np.einsum("spn,snq->pq", self.tx, xx_inv_xt),
            rhs=-self.gt + np.einsum("spn,sn->p", self.tx, xx_inv_gx),
            xx_inv_xt=xx_inv_xt,
            xx_inv_gx=xx_inv_gx,
        )

    def solve(self, damping: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """The step (d_theta [P], d_x [S, n]) solving (H + damping diag(H)) d = -g (`Reduced.step`)."""
        return self.reduced(damping).step()

    def product(self, d_theta: np.ndarray, d_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """H d for a step d = (d_theta [P], d_x [S, n])."""
        return (
            self.tt @ d_theta + np.einsum("spn,sn->p", self.tx, d_x),
            np.einsum("spn,p->sn", self.tx, d_theta) + np.einsum("snm,sm->sn", self.xx, d_x),
        )

    def decrease(self, d_theta: np.ndarray, d_x: np.ndarray) -> float:
        """The decrease of the cost 1/2 |r|^2 that the linearised model predicts for step d."""
        h_theta, h_x = self.product(d_theta, d_x)
        linear = self.gt @ d_theta + np.sum(self.gx * d_x)
        return float(-linear - 0.5 * (d_theta @ h_theta + np.sum(d_x * h_x)))

    def covariance(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Blocks of H^-1: theta-theta [P, P], theta-x [S, P, n], x-x [S, n, n].

        The theta block is the inverse of the Schur complement (the information
        about theta with every local block free), pseudo-inverted where singular.
        """
        xx_inv = np.linalg.inv(self.xx)
        xx_inv_xt = xx_inv @ np.swapaxes(self.tx, 1, 2)  # [S, n, P]
        reduced = self.tt - np.einsum("spn,snq->pq", self.tx, xx_inv_xt)
        tt = np.linalg.pinv(reduced, hermitian=True)
        tx = -np.einsum("pq,sqn->spn", tt, np.swapaxes(xx_inv_xt, 1, 2))
        xx = xx_inv + np.einsum("snp,pq,sqm->snm", xx_inv_xt, tt, np.swapaxes(xx_inv_xt, 1, 2))
        return tt, tx, xx

    def information(self) -> np.ndarray:
        """[P, P] the Schur complement: information about theta with the local blocks free."""
        return self.reduced().matrix


@dataclass(frozen=True)
class Reduced:
    """Damped normal equations with the local blocks eliminated by their Schur complement: the shared step
    solves matrix d_theta = rhs, and the local steps follow, d_x = -xx_inv_gx - xx_inv_xt d_theta.

    Attributes:
        matrix: [P, P]; rhs: [P]; xx_inv_xt: [S, n, P]; xx_inv_gx: [S, n].
    """

    matrix: np.ndarray
    rhs: np.ndarray
    xx_inv_xt: np.ndarray
    xx_inv_gx: np.ndarray

    def step(
        self, held: np.ndarray | None = None, held_step: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The step (d_theta [P], d_x [S, n]).

        The shared system is solved by least squares, so directions the data does not determine get no
        step instead of an infinite one.

        Args:
            held: bool [P], shared variables whose step is given (`held_step`, default 0; the others are
                solved for); default none.
            held_step: [P] the held variables' steps (the others' entries are ignored).
        """
        free = np.ones(len(self.rhs), bool) if held is None else ~held
        d_theta = np.zeros(len(self.rhs)) if held_step is None else np.where(free, 0.0, held_step)
        if free.any():
            rhs_free = self.rhs[free] - self.matrix[np.ix_(free, ~free)] @ d_theta[~free]
            d_theta[free] = np.linalg.lstsq(self.matrix[np.ix_(free, free)], rhs_free, rcond=1e-12)[0]
        return d_theta, -self.xx_inv_gx - np.einsum("snp,p->sn", self.xx_inv_xt, d_theta)


def leverages(shared: np.ndarray, local: np.ndarray, normal: Normal) -> np.ndarray:
    """[S, R] diagonal of the hat matrix J H^-1 J^T: how much of each residual the fit absorbs.

    With correctly weighted residuals E[r_i^2] = 1 - leverage_i, which is what
    an unbiased noise estimate divides by.
    """
    tt, tx, xx = normal.covariance()
    return (
        np.einsum("srp,pq,srq->sr", shared, tt, shared)
        + 2 * np.einsum("srp,spn,srn->sr", shared, tx, local)
        + np.einsum("srn,snm,srm->sr", local, xx, local)
    )


@dataclass(frozen=True)
class Solution:
    """Outcome of `levenberg_marquardt`.

    Attributes:
        theta: [P] and x: [S, n] the final variables.
        residuals: [S, R], shared: [S, R, P], local: [S, R, n] at the final variables.
        costs: 1/2 |r|^2 at the start and after every accepted step.
        steps: iterations taken (accepted or not).
        converged: the Gauss-Newton step fell below `tolerance`, or the cost
            stalled with the step below `stall_tolerance` or its change to every shared variable
            below `tolerance` of that variable's standard error.
        stalled: the iteration stopped because the cost stopped decreasing.
        step_length: the last Gauss-Newton step's length sqrt(g^T H^-1 g).
        shared_step_errors: the largest change that step makes to one shared variable, in that
            variable's standard errors (from the Schur complement H / H_xx) <= step_length.
    """

    theta: np.ndarray
    x: np.ndarray
    residuals: np.ndarray
    shared: np.ndarray
    local: np.ndarray
    costs: list[float]
    steps: int
    converged: bool
    stalled: bool
    step_length: float
    shared_step_errors: float


def projected_step(
    normal: Normal, theta: np.ndarray, lower: np.ndarray, upper: np.ndarray, damping: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """The damped step (d_theta [P], d_x [S, n]) of the model's least cost within lower <= theta + d_theta <= upper.

    An active set: of the variables the step would carry out of the box (or further out, from a bound), the
    one that leaves it first (the shortest fraction of its step) is held at that bound and the step is solved
    again for the others; once none leaves, a held variable whose model cost would fall if it moved back
    inside is released, the most downhill first, and so on. Shortening the leaving variables alone would keep
    the others' steps, which were solved for a step outside the box (a friction below 0 paid for by a damping
    4 times too large).
    """
    system = normal.reduced(damping)
    held, held_step = np.zeros(len(theta), bool), np.zeros(len(theta))
    for _ in range(4 * len(theta) + 4):  # each pass holds or releases one variable; cycling is not expected
        d_theta, d_x = system.step(held, held_step)
        target = np.clip(theta + d_theta, lower, upper)
        leaving = ~held & (target != theta + d_theta)
        if leaving.any():
            fraction = np.where(leaving, np.abs(target - theta) / np.maximum(np.abs(d_theta), 1e-300), np.inf)
            first = int(np.argmin(fraction))
            held[first], held_step[first] = True, target[first] - theta[first]
            continue
        downhill = system.matrix @ d_theta - system.rhs  # the model cost's gradient in d_theta, the locals following
        rounding = 1e-9 * (np.abs(system.matrix) @ np.abs(d_theta) + np.abs(system.rhs))  # below this a gradient is 0
        at_lower = theta + held_step <= lower
        wrong = held & np.where(at_lower, downhill < -rounding, downhill > rounding)
        if not wrong.any():
            break
        release = int(np.argmax(np.where(wrong, np.abs(downhill), -np.inf)))
        held[release], held_step[release] = False, 0.0
    return d_theta, d_x


def levenberg_marquardt(
    residuals_fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
    jacobian_fn: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
    theta: np.ndarray,
    x: np.ndarray,
    max_steps: int,
    tolerance: float = 0.1,
    on_step: Callable[[int, float, np.ndarray], None] | None = None,
    patience: int = 8,
    stall_decrease: float = 0.01,
    stall_tolerance: float = 1.0,
    lower: np.ndarray | None = None,
    upper: np.ndarray | None = None,
    secant_below: float = 0.0,
) -> Solution:
    """Minimises 1/2 |r(theta, x)|^2 by Levenberg-Marquardt with Marquardt's diagonal scaling.

    Each iteration first tests convergence (the Gauss-Newton step shorter than
    `tolerance` in the metric of H), then tries the damped step; it is accepted
    when the cost decreases, and the damping follows the ratio of actual to
    predicted decrease (Nielsen's rule).

    Args:
        residuals_fn: (theta [P], x [S, n]) -> residuals [S, R].
        jacobian_fn: (theta, x) -> (residuals [S, R], d/d theta [S, R, P], d/d x_s [S, R, n]).
        max_steps: iterations allowed; 0 only evaluates the start.
        tolerance: converged when the Gauss-Newton step is shorter than this (standard errors); where the
            cost stalled, also when it would move no shared variable by this many of its standard errors.
        on_step: called with (step, cost, theta) after each iteration.
        patience, stall_decrease, stall_tolerance: the stall rule (module docstring).
        lower, upper: [P] bounds of theta (default: none, -inf and inf); theta must start within them.
        secant_below: after an accepted step from where the Gauss-Newton step was shorter than this many
            standard errors, update the Jacobian by Broyden's secant rule (`secant_update`) instead of
            calling `jacobian_fn`; 0 (the default) always calls it. The tests that end the iteration are
            taken again on a computed Jacobian, so the result's Jacobian is always a computed one.
    """
    lower = np.full(len(theta), -np.inf) if lower is None else np.asarray(lower, np.float64)
    upper = np.full(len(theta), np.inf) if upper is None else np.asarray(upper, np.float64)
    residuals, shared, local = jacobian_fn(theta, x)
    cost = 0.5 * float(np.sum(residuals**2))
    costs, damping, growth, step = [cost], 1e-3, 2.0, 0
    history = [cost]  # the cost after every iteration, accepted or not
    normal, computed = Normal.build(residuals, shared, local), True
    while True:
        gn_theta, gn_x = projected_step(normal, theta, lower, upper)
        step_length = float(np.sqrt(max(2 * normal.decrease(gn_theta, gn_x), 0.0)))
        shared_step_errors = _largest_in_errors(gn_theta, normal)
        stalled = len(history) > patience and history[-patience - 1] - cost < stall_decrease
        settled = stalled and (step_length < stall_tolerance or shared_step_errors < tolerance)
        converged = step_length < tolerance or settled
        if converged or stalled or step >= max_steps:
            if computed:
                break
            residuals, shared, local = jacobian_fn(theta, x)  # the tests again, on a computed Jacobian
            normal, computed = Normal.build(residuals, shared, local), True
            continue
        step += 1
        d_theta, d_x = projected_step(normal, theta, lower, upper, damping)
        trial_theta = np.clip(theta + d_theta, lower, upper)  # exactly on a bound the step stops at
        with np.errstate(over="ignore", invalid="ignore"):  # a trial that overflows is rejected below, as any worse one
            trial = residuals_fn(trial_theta, x + d_x)
            trial_cost = 0.5 * float(np.sum(trial**2))
        predicted = normal.decrease(d_theta, d_x)
        ratio = (cost - trial_cost) / predicted if predicted > 0 else -1.0
        if np.isfinite(trial_cost) and ratio > 0:
            computed = step_length >= secant_below
            if computed:
                residuals, shared, local = jacobian_fn(trial_theta, x + d_x)
            else:
                shared, local = secant_update(residuals, shared, local, trial, trial_theta - theta, d_x)
                residuals = trial
            theta, x, cost = trial_theta, x + d_x, trial_cost
            normal = Normal.build(residuals, shared, local)
            costs.append(cost)
            damping *= max(1 / 3, 1 - (2 * ratio - 1) ** 3)
            growth = 2.0
        else:
            damping *= growth
            growth *= 2
        history.append(cost)
        if on_step is not None:
            on_step(step, cost, theta)
    return Solution(
        theta=theta,
        x=x,
        residuals=residuals,
        shared=shared,
        local=local,
        costs=costs,
        steps=step,
        converged=converged,
        stalled=stalled,
        step_length=step_length,
        shared_step_errors=shared_step_errors,
    )


def secant_update(
    residuals: np.ndarray, shared: np.ndarray, local: np.ndarray, new: np.ndarray, d_theta: np.ndarray, d_x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Broyden's rank-one update of each block's Jacobian to the secant of a step: (shared [S, R, P],
    local [S, R, n]) changed least (Frobenius) such that J_s d_s = new_s - residuals_s, for the residuals
    [S, R] before and `new` [S, R] after the step d_s = (d_theta [P], d_x [S, n])."""
    predicted = np.einsum("srp,p->sr", shared, d_theta) + np.einsum("srn,sn->sr", local, d_x)
    squared = d_theta @ d_theta + np.sum(d_x**2, axis=1)  # [S]
    miss = np.divide(new - residuals - predicted, squared[:, None], out=np.zeros_like(new), where=squared[:, None] > 0)
    return shared + miss[..., None] * d_theta, local + miss[..., None] * d_x[:, None, :]


def _largest_in_errors(d_theta: np.ndarray, normal: Normal) -> float:
    """max_i |d_theta_i| / se_i, with se_i from `normal`'s covariance of theta (0 where d_theta_i and se_i
    are both 0: a direction the data do not determine gets no step)."""
    errors = np.sqrt(np.clip(np.diag(np.linalg.pinv(normal.information(), hermitian=True)), 0.0, None))
    change = np.abs(d_theta)
    ratio = np.divide(change, errors, out=np.where(change > 0, np.inf, 0.0), where=errors > 0)
    return float(ratio.max(initial=0.0))


def _diagonal_matrix(blocks: np.ndarray) -> np.ndarray:
    """[S, n, n] the diagonals of `blocks` as diagonal matrices."""
    return np.einsum("sij,ij->sij", blocks, np.eye(blocks.shape[-1]))
