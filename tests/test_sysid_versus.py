"""shac/sysid/versus_mujoco.py: this project's fit and mujoco.sysid on one short pendulum recording, the
coverage arithmetic, and suite=sysid's bad-input errors."""

import pytest

from shac.config import ConfigError
from shac.sysid import versus_mujoco
from shac.tools.benchmarks.config import validate_benchmark
from tests.forked_python import run_python
from tests.test_benchmark import benchmark_config


@pytest.mark.parametrize(
    ("method", "joined"), [("autodiff", False), ("finite_difference", False), ("finite_difference", True)]
)
def test_both_tools_recover_damping_on_a_short_recording(method, joined):
    """4 s of the pendulum at damping 0.137 with little noise, both fits from 0.05: within 1% of the truth,
    with this project's Jacobians from MJX or from MuJoCo's C rollouts, and its fit ending in single shooting."""
    import envs

    env = envs.make("pendulum_swingup")
    keys = ("joint:hinge:damping",)
    models = versus_mujoco.models(env, {keys[0]: 0.137}, {}, 10.0)
    (comparison,), compile_s = versus_mujoco.run(
        env,
        *models,
        keys,
        1,
        4.0,
        0.01,
        1.0,
        (1e-4, 1e-4),
        (1e-3, 1e-3),
        50,
        10.0,
        0,
        method=method,
        join_segments=joined,
    )
    assert comparison.fits["shac"].status == "converged" + (" (segments joined: kept)" if joined else "")
    assert comparison.truth == pytest.approx([0.137])
    assert compile_s > 0
    assert set(comparison.fits) == set(versus_mujoco.TOOLS)
    for tool, fit in comparison.fits.items():
        assert fit.converged, (tool, fit.status)
        assert fit.relative_errors[0] < 0.01, (tool, fit.estimates)
        lower, upper = fit.ci95[0]
        assert lower <= fit.estimates[0] <= upper
        assert fit.covered == [lower <= 0.137 <= upper]
        assert fit.steps >= 1 and fit.fit_seconds > 0


def test_coverage_arithmetic():
    """Covered: converged, the interval bounded and holding the truth; the summary's medians and fractions by hand."""
    truth = [1.0, 2.0]
    fits = [
        versus_mujoco.scored([1.1, 2.0], [0.9, 1.9], [1.2, 2.1], truth, True, "ok", 3, 1.0),  # both covered
        versus_mujoco.scored([1.5, 2.2], [1.4, 2.1], [1.6, 2.3], truth, True, "ok", 3, 2.0),  # neither
        versus_mujoco.scored([1.0, 2.0], [0.0, 1.0], [2.0, 3.0], truth, False, "limit", 9, 4.0),  # not converged
    ]
    assert [f.covered for f in fits] == [[True, True], [False, False], [False, False]]
    unbounded = versus_mujoco.scored([1.0, 2.0], [0.0, -float("inf")], [float("inf")] * 2, truth, True, "ok", 3, 1.0)
    assert unbounded.covered == [False, False]  # an interval that does not end says nothing
    assert fits[1].relative_errors == pytest.approx([0.5, 0.1])
    both = [dict.fromkeys(versus_mujoco.TOOLS, f) for f in fits]
    comparisons = [versus_mujoco.Comparison(0.01, 1e-3, 1e-2, truth, fit) for fit in both]
    summary = versus_mujoco.summarize(comparisons, ("a", "b"))
    for stats in summary.values():
        assert (stats["datasets"], stats["converged"], stats["median_fit_seconds"]) == (3, 2, 2.0)
        assert stats["a"]["coverage"] == pytest.approx(1 / 3)
        assert stats["a"]["median_relative_error"] == pytest.approx(0.1)
        assert stats["b"]["median_relative_error"] == pytest.approx(0.0)
        assert stats["lower_median_error"] == 0  # the same fits for both tools: a tie on every dataset


def test_a_fit_that_raises_is_scored_as_failed_and_the_benchmark_goes_on(monkeypatch):
    """mujoco.sysid raising on one dataset (as its time series does after an unstable trial model's rollout) is a
    failed fit of that dataset, counted against it, and the next dataset is fitted; a missing install still stops."""
    import envs

    env = envs.make("pendulum_swingup")
    keys = ("joint:hinge:damping",)
    models = versus_mujoco.models(env, {keys[0]: 0.137}, {}, 10.0)
    ours = versus_mujoco.scored([0.138], [0.136], [0.140], [0.137], True, "converged", 4, 0.5)
    monkeypatch.setattr(versus_mujoco, "fit_shac", lambda *args: ours)
    outcomes = iter([ValueError("times must be strictly increasing"), ours])

    def fit_mujoco(*args):
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(versus_mujoco, "fit_mujoco", fit_mujoco)
    comparisons, _ = versus_mujoco.run(
        env, *models, keys, 2, 1.0, 0.01, 1.0, (1e-4, 1e-4), (1e-3, 1e-3), 5, 10.0, 0, method="finite_difference"
    )
    raised = comparisons[0].fits["mujoco.sysid"]
    assert raised.status == "raised ValueError: times must be strictly increasing"
    assert not raised.converged and raised.covered == [False] and raised.relative_errors == [float("inf")]
    assert comparisons[1].fits["mujoco.sysid"] is ours
    summary = versus_mujoco.summarize(comparisons, keys)
    assert summary["mujoco.sysid"]["converged"] == 1 and summary["shac"]["converged"] == 2
    assert (summary["shac"]["lower_median_error"], summary["mujoco.sysid"]["lower_median_error"]) == (1, 0)
    assert "shac on 1, mujoco.sysid on 0 of 2." in versus_mujoco.table(summary, keys, {keys[0]: 0.137})

    def not_installed(*args):
        raise ImportError("no extra")

    monkeypatch.setattr(versus_mujoco, "fit_mujoco", not_installed)
    with pytest.raises(ImportError, match="no extra"):
        versus_mujoco.run(env, *models, keys, 1, 1.0, 0.01, 1.0, (1e-4, 1e-4), (1e-3, 1e-3), 5, 10.0, 0)


def test_delay_is_refused():
    with pytest.raises(ValueError, match=r"signal:ctrl:delay' cannot be fitted by mujoco\.sysid"):
        versus_mujoco.check_keys(("joint:hinge:damping", "signal:ctrl:delay"))


BAD_OPTIONS = [
    ("sysid.datasets=0", "sysid.datasets must be > 0, got 0"),
    ("sysid.qpos_noise=[1e-2,1e-3]", "sysid.qpos_noise must be [low,high] with 0 < low <= high"),
    ("sysid.true_params=['signal:ctrl:delay=0.02']", "'signal:ctrl:delay' is a signal parameter"),
    ("sysid.true_params=[joint:hinge:damping]", "is not element:name:attribute=value"),
    ("sysid.method=numeric", "sysid.method 'numeric' is unknown; accepted: autodiff, finite_difference"),
]
"""Options refused by the config's checks, before the model loads."""


@pytest.mark.parametrize(("override", "message"), BAD_OPTIONS)
def test_bad_options_are_refused_with_a_message_naming_the_value(override, message):
    with pytest.raises(ConfigError) as refused:
        validate_benchmark(benchmark_config("suite=sysid", override, "docs="))
    assert message in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        BAD_OPTIONS[0],  # refused by the config's checks
        ("sysid.true_params=['joint:nope:damping=0.1']", "no joint named 'nope' in the model"),  # once the model loads
    ],
)
def test_cli_bad_input_stops_in_one_line(override, message):
    """Bad sysid options stop launch/benchmark.py with one line naming the value, before anything compiles."""
    run = run_python("launch/benchmark.py", "suite=sysid", override, "docs=", timeout=120)
    assert run.returncode != 0
    lines = [line for line in run.stderr.strip().splitlines() if line]
    assert lines[-1].startswith("config error:") and message in lines[-1], run.stderr
