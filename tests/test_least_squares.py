"""The arrow-structured Levenberg-Marquardt against dense linear algebra, and on a nonlinear fit."""

import warnings

import numpy as np
import pytest

from shac.sysid import least_squares


def arrow_problem(seed=0, blocks=4, rows=6, shared=2, local=3):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(blocks, rows, shared))
    b = rng.normal(size=(blocks, rows, local))
    r = rng.normal(size=(blocks, rows))
    dense = np.zeros((blocks * rows, shared + blocks * local))
    for s in range(blocks):
        dense[s * rows : (s + 1) * rows, :shared] = a[s]
        dense[s * rows : (s + 1) * rows, shared + s * local : shared + (s + 1) * local] = b[s]
    return r, a, b, dense


def test_schur_steps_covariance_and_leverages_match_dense_algebra():
    r, a, b, dense = arrow_problem()
    normal = least_squares.Normal.build(r, a, b)
    d_theta, d_x = normal.solve()
    expected = np.linalg.lstsq(dense, -r.reshape(-1), rcond=None)[0]
    np.testing.assert_allclose(np.concatenate([d_theta, d_x.reshape(-1)]), expected, atol=1e-10)
    hessian = dense.T @ dense
    inverse = np.linalg.inv(hessian)
    tt, tx, xx = normal.covariance()
    np.testing.assert_allclose(tt, inverse[:2, :2], atol=1e-10)
    np.testing.assert_allclose(tx[1], inverse[:2, 5:8], atol=1e-10)
    np.testing.assert_allclose(xx[2], inverse[8:11, 8:11], atol=1e-10)
    np.testing.assert_allclose(np.linalg.inv(normal.information()), inverse[:2, :2], atol=1e-10)
    hat = dense @ inverse @ dense.T
    np.testing.assert_allclose(least_squares.leverages(a, b, normal).reshape(-1), np.diag(hat), atol=1e-10)
    # the leverages sum to the number of variables, 2 + 4 * 3
    assert least_squares.leverages(a, b, normal).sum() == pytest.approx(14.0)
    # the predicted decrease of the full Gauss-Newton step is 1/2 g^T H^-1 g
    gradient = dense.T @ r.reshape(-1)
    assert normal.decrease(d_theta, d_x) == pytest.approx(0.5 * gradient @ inverse @ gradient)
    # damping shortens the step
    damped = np.concatenate([p.reshape(-1) for p in normal.solve(10.0)])
    assert np.linalg.norm(damped) < np.linalg.norm(expected)


def test_levenberg_marquardt_fits_a_shared_rate_and_per_block_amplitudes():
    # y_s(t) = c_s exp(-k t): a shared decay rate k = 0.7 and one amplitude c_s per block
    t = np.linspace(0, 3, 20)
    amplitudes = np.array([[1.0], [2.0], [-0.5]])
    data = amplitudes * np.exp(-0.7 * t)[None]

    def residuals_fn(theta, x):
        return x * np.exp(-theta[0] * t)[None] - data

    def jacobian_fn(theta, x):
        decay = np.exp(-theta[0] * t)[None]
        return (
            residuals_fn(theta, x),
            (-t[None] * x * decay)[..., None],
            np.broadcast_to(decay, x.shape[:1] + t.shape)[..., None],
        )

    solution = least_squares.levenberg_marquardt(
        residuals_fn, jacobian_fn, np.array([3.0]), np.ones((3, 1)), max_steps=30, tolerance=1e-8
    )
    assert solution.converged and solution.steps < 30
    assert solution.theta[0] == pytest.approx(0.7, abs=1e-8)
    np.testing.assert_allclose(solution.x, amplitudes, atol=1e-8)
    assert solution.costs[-1] < 1e-16 and np.all(np.diff(solution.costs) < 0)
    stopped = least_squares.levenberg_marquardt(
        residuals_fn, jacobian_fn, np.array([3.0]), np.ones((3, 1)), max_steps=1, tolerance=1e-8
    )
    assert not stopped.converged and stopped.steps == 1 and stopped.step_length > 1e-8

    # Broyden's secant updates in place of most Jacobians: the same fit, fewer Jacobians, and the
    # solution's Jacobian a computed one
    calls = []

    def counted(theta, x):
        calls.append(theta.copy())
        return jacobian_fn(theta, x)

    secant = least_squares.levenberg_marquardt(
        residuals_fn, counted, np.array([3.0]), np.ones((3, 1)), max_steps=30, tolerance=1e-8, secant_below=np.inf
    )
    assert secant.converged and secant.theta[0] == pytest.approx(0.7, abs=1e-8)
    assert len(calls) <= len(solution.costs) // 2  # without them, one call per accepted step and the start
    np.testing.assert_array_equal(calls[-1], secant.theta)
    for got, want in zip(
        (secant.residuals, secant.shared, secant.local), jacobian_fn(secant.theta, secant.x), strict=True
    ):
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_the_secant_update_matches_the_step_and_leaves_other_directions_alone():
    r, a, b, _ = arrow_problem(seed=1)
    rng = np.random.default_rng(2)
    d_theta, d_x, new = rng.normal(size=2), rng.normal(size=(4, 3)), rng.normal(size=r.shape)
    shared, local = least_squares.secant_update(r, a, b, new, d_theta, d_x)
    # each block's updated Jacobian maps its step (d_theta, d_x_s) to the change of its residuals
    moved = np.einsum("srp,p->sr", shared, d_theta) + np.einsum("srn,sn->sr", local, d_x)
    np.testing.assert_allclose(moved, new - r, atol=1e-12)
    # and is unchanged along any direction orthogonal to that step
    s = 3
    step = np.concatenate([d_theta, d_x[s]])
    other = rng.normal(size=5)
    other -= step * (other @ step) / (step @ step)
    before = np.concatenate([a[s], b[s]], axis=1) @ other
    after = np.concatenate([shared[s], local[s]], axis=1) @ other
    np.testing.assert_allclose(after, before, atol=1e-12)
    # residuals linear in the variables: their Jacobian is already the secant, so nothing changes
    linear = r + np.einsum("srp,p->sr", a, d_theta) + np.einsum("srn,sn->sr", b, d_x)
    unchanged = least_squares.secant_update(r, a, b, linear, d_theta, d_x)
    np.testing.assert_allclose(unchanged[0], a, atol=1e-12)
    np.testing.assert_allclose(unchanged[1], b, atol=1e-12)


def test_a_bounded_variable_stops_at_its_bound_and_the_fit_converges_there():
    # linear residuals whose unconstrained optimum has theta_0 = -0.3; theta_0 is bounded to [0, 1]
    r, a, b, dense = arrow_problem(seed=1)
    # residuals offset + a theta + b x, shifted from the random ones so that the optimum is at theta = (-0.3, 0.5)
    optimum = np.linalg.lstsq(dense, -r.reshape(-1), rcond=None)[0][:2]
    offset = r + np.einsum("srp,p->sr", a, optimum - np.array([-0.3, 0.5]))

    def jacobian_fn(theta, x):
        return offset + np.einsum("srp,p->sr", a, theta) + np.einsum("srn,sn->sr", b, x), a, b

    np.testing.assert_allclose(np.linalg.lstsq(dense, -offset.reshape(-1), rcond=None)[0][:2], [-0.3, 0.5])
    lower, upper = np.array([0.0, -np.inf]), np.array([1.0, np.inf])
    solution = least_squares.levenberg_marquardt(
        lambda theta, x: jacobian_fn(theta, x)[0],
        jacobian_fn,
        np.array([0.8, 0.0]),
        np.zeros((4, 3)),
        50,
        tolerance=1e-9,
        lower=lower,
        upper=upper,
    )
    assert solution.converged and solution.theta[0] == 0.0
    # the others are the least-squares fit with theta_0 held at 0
    held = np.linalg.lstsq(np.delete(dense, 0, axis=1), -offset.reshape(-1), rcond=None)[0]
    np.testing.assert_allclose(np.concatenate([solution.theta[1:], solution.x.reshape(-1)]), held, atol=1e-8)


@pytest.mark.parametrize("damping", [0.0, 0.5])
def test_a_step_that_leaves_the_box_is_the_bounded_least_squares_step(damping):
    """The projected step of linear residuals is the box-constrained least-squares step, against scipy's
    bounded-variable least squares on the dense problem (the damping as extra rows sqrt(damping H_ii) d_i):
    bounds cutting the unconstrained step of some variables, some variables starting at a bound."""
    from scipy.optimize import lsq_linear

    for seed in range(60):
        r, a, b, dense = arrow_problem(seed=seed, shared=4)
        rng = np.random.default_rng(seed)
        unconstrained = np.linalg.lstsq(dense, -r.reshape(-1), rcond=None)[0][:4]
        lower, upper = np.full(4, -np.inf), np.full(4, np.inf)
        for i in range(4):
            if rng.random() < 0.5:  # the bound cuts the variable's unconstrained step short
                (lower if unconstrained[i] < 0 else upper)[i] = unconstrained[i] * rng.uniform(0, 1)
            if rng.random() < 0.2:  # the variable starts at its lower bound
                lower[i] = 0.0
        normal = least_squares.Normal.build(r, a, b)
        d_theta, d_x = least_squares.projected_step(normal, np.zeros(4), lower, upper, damping)
        hessian = dense.T @ dense
        rows = np.vstack([dense, np.diag(np.sqrt(damping * np.diag(hessian)))])
        target = np.concatenate([-r.reshape(-1), np.zeros(len(hessian))])
        free = np.full(len(hessian) - 4, np.inf)
        bounds = (np.concatenate([lower, -free]), np.concatenate([upper, free]))
        expected = lsq_linear(rows, target, bounds=bounds, method="bvls", tol=1e-14).x
        np.testing.assert_allclose(np.concatenate([d_theta, d_x.reshape(-1)]), expected, atol=1e-7, err_msg=seed)


@pytest.mark.parametrize("shared_kinked", [False, True])
def test_a_stall_with_only_local_variables_left_to_move_counts_as_converged(shared_kinked):
    """Each of 2 blocks has a shared residual (theta - 1, or a constant 0.5 whose Jacobian says it moves) and a
    local residual 2 that the Jacobian says x moves and no step does: the cost stalls with the Gauss-Newton
    step sqrt(2 * 1/2 * (2^2 + 2^2)) = sqrt(8) long. It moves theta by about 0 once theta is about 1 (converged);
    with the kinked shared residual by -1/2, against theta's standard error 1/sqrt(2) (information 2): by
    sqrt(1/2) standard errors (not converged)."""

    def residuals_fn(theta, x):
        shared = np.full(2, 0.5) if shared_kinked else np.full(2, theta[0] - 1.0)
        return np.stack([shared, np.full(2, 2.0)], axis=1)  # [S=2, R=2]

    def jacobian_fn(theta, x):
        return residuals_fn(theta, x), np.tile([[1.0], [0.0]], (2, 1, 1)), np.tile([[0.0], [1.0]], (2, 1, 1))

    solution = least_squares.levenberg_marquardt(residuals_fn, jacobian_fn, np.array([3.0]), np.zeros((2, 1)), 50)
    assert solution.stalled and solution.steps < 50
    if shared_kinked:
        assert not solution.converged
        assert solution.shared_step_errors == pytest.approx(np.sqrt(0.5))
        assert solution.step_length == pytest.approx(np.sqrt(8.0 + 0.5))
    else:
        assert solution.converged and solution.theta[0] == pytest.approx(1.0)
        assert solution.shared_step_errors < 1e-6
        assert solution.step_length == pytest.approx(np.sqrt(8.0))


def test_the_largest_step_in_standard_errors_by_hand():
    def largest(d_theta, information):  # a normal matrix without local variables: its Schur complement is tt
        empty = np.zeros((0, 2, 0))
        normal = least_squares.Normal(information, empty, np.zeros((0, 0, 0)), np.zeros(2), np.zeros((0, 0)))
        return least_squares._largest_in_errors(np.array(d_theta), normal)

    # standard errors 0.5 and 2 (independent): steps of 0.1 and -1 are 0.2 and 0.5 of them
    assert largest([0.1, -1.0], np.diag([4.0, 0.25])) == pytest.approx(0.5)
    # correlated: information [[2, 1], [1, 1]] has covariance [[1, -1], [-1, 2]], standard errors 1 and sqrt(2)
    assert largest([0.3, 0.6], np.array([[2.0, 1.0], [1.0, 1.0]])) == pytest.approx(0.6 / np.sqrt(2))
    # a direction without information gets no step and does not count
    assert largest([0.5, 0.0], np.diag([1.0, 0.0])) == pytest.approx(0.5)


def test_a_trial_whose_cost_overflows_is_rejected_without_a_warning():
    """r = theta - 1 for theta < 2, and 1e300 past it (a simulation that blew up: its square overflows). From
    theta = 0.5 the Jacobian says 1/4 of the truth's slope, so the first Gauss-Newton trial lands near 2.5; it is
    rejected quietly, the damping grows, and shorter steps bring theta towards 1."""

    def residuals_fn(theta, x):  # [S=1, R=2]: the shared residual, and x's own (x - 0)
        return np.array([[theta[0] - 1.0 if theta[0] < 2.0 else 1e300, x[0, 0]]])

    def jacobian_fn(theta, x):
        return residuals_fn(theta, x), np.array([[[0.25], [0.0]]]), np.array([[[0.0], [1.0]]])

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solution = least_squares.levenberg_marquardt(residuals_fn, jacobian_fn, np.array([0.5]), np.zeros((1, 1)), 50)
    assert solution.costs[0] == pytest.approx(0.125)  # 1/2 (0.5 - 1)^2
    assert solution.costs[-1] < 0.05 * solution.costs[0] and 0.8 < solution.theta[0] < 2.0  # never accepted past 2
