"""Coverage benchmark of system identification: how often the 95% interval holds the truth.

    nice -n 15 python launch/sysid_coverage.py datasets=50 out=docs/benchmarks/sysid_coverage_damping.json

simulates K datasets with MuJoCo's C simulator (smooth random excitation and
start state, random noise levels, the sampling rates in turn; optionally true
model values spread around `true_params` and a control delay drawn from
`delay=[low,high]`, fitted as `signal:ctrl:delay`), fits each
(shac/sysid/coverage.py), prints every fit with its wall time, then the coverage
of the 95% intervals, the median relative error (for the delay: the median error
in ms and how often it is within one sample spacing) and the median fit time,
overall and per sampling rate, and writes them with every dataset's fit to `out`
(JSON). `extend=<earlier out>` continues an earlier run of the same arguments: its datasets are
kept and the new ones start at the next index, so a long benchmark can be run in parts; with
`datasets=` its own count it fits nothing and summarizes its datasets again by today's rules. Bad
arguments stop with one line before anything compiles.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from launch import cli
from launch.sysid import METHODS


@dataclass
class CoverageArgs:
    env: str = "pendulum_swingup"
    """Registered environment whose model is simulated and fitted."""
    true_params: list[str] = field(default_factory=lambda: ["joint:hinge:damping=0.137"])
    """True values as element:name:attribute=value; these parameters are fitted."""
    init: list[str] = field(default_factory=list)
    """Initial guesses as element:name:attribute=value (default: the model's values, which must be > 0),
    and signal:ctrl:delay=<seconds> (default: delay's low end)."""
    datasets: int = 50
    """K, the number of simulated datasets."""
    seconds: float = 10.0
    """Length of each recording."""
    rates: list[float] = field(default_factory=lambda: [0.01, 0.02, 0.05])
    """Sample spacings (s), multiples of the model time step, used in turn."""
    max_hz: float = 1.0
    """Highest frequency of the random excitation (Hz)."""
    qpos_noise: list[float] = field(default_factory=lambda: [3e-4, 3e-3])
    """[low, high]: each dataset's position noise std is log-uniform in between."""
    qvel_noise: list[float] = field(default_factory=lambda: [3e-3, 3e-2])
    """[low, high]: each dataset's velocity noise std is log-uniform in between."""
    method: str = "autodiff"
    """Jacobian source of the fits: autodiff, finite_difference or forward_difference (`launch/sysid.py`)."""
    steps: int = 50
    """Maximum Levenberg-Marquardt iterations of each fit."""
    delay: list[float] = field(default_factory=list)
    """[low, high] seconds: each dataset's true control delay is uniform in between ([d, d]: fixed) and
    signal:ctrl:delay is fitted, from init's value or else low; empty: no delay."""
    spread: float = 0.0
    """Each dataset multiplies every value of true_params by exp(U(-spread, spread)); 0: them as given."""
    seed: int = 0
    out: str = ""
    """JSON file for the summary and every dataset's fit, rewritten after each dataset (default: print only)."""
    extend: str = ""
    """An earlier run's `out` JSON, made with the same arguments but `datasets`, `out` and `extend`: its
    datasets are kept and the run continues at the next one, up to `datasets` in all."""


USAGE = "usage: python launch/sysid_coverage.py [datasets=50] [true_params=[k=v,...]] [delay=[low,high]] ..."


EXTEND_FREE = ("datasets", "out", "extend")
"""The arguments an extended run may change."""


def earlier_run(args: CoverageArgs) -> dict:
    """The JSON of `args.extend` ({} without one); exits with one line if it cannot be extended by `args`."""
    if not args.extend:
        return {}
    try:
        record = json.loads(Path(args.extend).read_text())
        earlier_args, done = record["args"], len(record["datasets"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"error: extend={args.extend} is not the JSON of an earlier coverage run ({e})")
    for key, value in asdict(args).items():
        if key not in EXTEND_FREE and earlier_args.get(key) != value:
            sys.exit(f"error: extend={args.extend} was made with {key}={earlier_args.get(key)}, not {value}")
    if done > args.datasets:
        sys.exit(f"error: extend={args.extend} already has {done} datasets; ask for {done} (summarize) or more")
    return record


def parse(argv: list[str]) -> CoverageArgs:
    """The arguments, checked; exits with one line on a bad one (before mujoco is imported or anything compiles)."""
    args = cli.parse(CoverageArgs, argv, USAGE)
    earlier_run(args)
    from shac.sysid.parameters import parse_assignments  # numpy only, like signals
    from shac.sysid.signals import DEFAULT_UPPER_FRACTION, DELAY, check_delay

    if args.method not in METHODS:
        sys.exit(f"error: unknown method '{args.method}'; available: {', '.join(METHODS)}")
    if args.steps < 1:
        sys.exit(f"error: steps must be >= 1, got {args.steps}")
    if args.spread < 0:
        sys.exit(f"error: spread must be >= 0 (true values times exp(U(-spread, spread))), got {args.spread:g}")
    try:
        initial = parse_assignments(args.init).get(DELAY)
    except ValueError as e:
        sys.exit(f"error: {e}")
    if not args.delay:
        if initial is not None:
            sys.exit(f"error: init gives {DELAY} but delay=[] fits no delay; give the true delays, delay=[low,high]")
        return args
    if len(args.delay) != 2 or args.delay[0] > args.delay[1]:
        sys.exit(f"error: delay must be [low,high] seconds with low <= high, e.g. [0.01,0.03], or []; got {args.delay}")
    upper = DEFAULT_UPPER_FRACTION * args.seconds
    checked = [("true delay", args.delay[0]), ("true delay", args.delay[1])]
    for what, value in checked + ([] if initial is None else [("initial delay", initial)]):
        try:
            check_delay(value, args.seconds, what, "each recording")
        except ValueError as e:
            sys.exit(f"error: {e}")
        if value > upper:
            sys.exit(
                f"error: {what} {DELAY}={value:g} s is above the fit's upper bound, a tenth of the recording "
                f"({upper:g} s); lower it or record longer (seconds=)"
            )
    return args


def main(argv: list[str]) -> None:
    args = parse(argv)
    from launch.runtime import configure_runtime

    configure_runtime()
    import numpy as np

    import envs
    from shac.sysid import coverage
    from shac.sysid.parameters import parse_assignments
    from shac.sysid.signals import DELAY

    try:
        env = envs.make(args.env)
        true_values, initial_values = parse_assignments(args.true_params), parse_assignments(args.init)
        true_model, guess_model = coverage.models(env.mj_model, true_values, initial_values)
    except ValueError as e:
        sys.exit(f"error: {e}")
    keys = (*true_values, *([DELAY] if args.delay else []))
    delay = (args.delay[0], args.delay[1]) if args.delay else (0.0, 0.0)
    initial_state = coverage.reset_states(env)
    truth = ", ".join(f"{key} = {value:g}" for key, value in true_values.items())
    spread = f" times exp(U(-{args.spread:g}, {args.spread:g}))" if args.spread else ""
    delayed = f", delay uniform in [{1000 * delay[0]:g}, {1000 * delay[1]:g}] ms" if args.delay else ""
    print(f"{args.datasets} datasets of {args.seconds} s, {truth}{spread}{delayed}, rates {args.rates} s")
    earlier = earlier_run(args)
    datasets, start = [coverage.Dataset(**d) for d in earlier.get("datasets", [])], time.perf_counter()
    commands = [
        *earlier.get("commands", [earlier["command"]] if earlier else []),
        "python launch/sysid_coverage.py " + " ".join(argv),
    ]
    if datasets:
        print(f"kept the {len(datasets)} datasets of {args.extend}")

    def save() -> None:
        record = {"command": commands[-1], "commands": commands, "args": asdict(args)}
        record |= {"summary": coverage.summarize(datasets, keys), "datasets": [asdict(d) for d in datasets]}
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")

    if args.out and len(datasets) == args.datasets:  # nothing to fit: the kept datasets summarized again
        save()
    for k in range(len(datasets), args.datasets):
        rng = np.random.default_rng([args.seed, k])
        dataset = coverage.simulate_and_fit(
            true_model,
            guess_model,
            keys,
            initial_state,
            rng,
            args.rates[k % len(args.rates)],
            args.seconds,
            args.max_hz,
            tuple(args.qpos_noise),
            tuple(args.qvel_noise),
            args.method,
            args.steps,
            delay,
            initial_values.get(DELAY),
            args.spread,
        )
        datasets.append(dataset)
        estimates = ", ".join(f"{e:.5g} ± {s:.2g}" for e, s in zip(dataset.estimates, dataset.std_errors, strict=True))
        line = (
            f"  {k:3d}  dt {dataset.dt:g}  {estimates}  covered {dataset.covered}  "
            f"{'converged' if dataset.converged else 'NOT CONVERGED'} in {dataset.steps} steps, "
            f"fit {dataset.fit_seconds:.1f} s"
        )
        if dataset.stalled:
            line += (
                f" (stalled: step {dataset.step_length:.2g} standard errors, moving no parameter by more "
                f"than {dataset.parameter_step_errors:.2g} of its own)"
            )
        if args.delay:
            i = keys.index(DELAY)
            within = "within one step" if dataset.delay_within_step else "MORE than one step"
            line += (
                f"  delay {1000 * dataset.estimates[i]:.4g} ms, truth {1000 * dataset.truth[i]:.4g} ms "
                f"(off {dataset.delay_error_ms:.2g} ms: {within})"
            )
        print(line, flush=True)
        if args.out:  # after every dataset: a long benchmark stopped early keeps what it measured
            save()
    summary = coverage.summarize(datasets, keys)
    for group, stats in summary.items():
        parts = []
        for key in keys:
            head = f"{key}: coverage {100 * stats[key]['coverage']:.0f}%, median error "
            if key == DELAY:
                within = 100 * stats[key]["within_one_step"]
                parts.append(f"{head}{stats[key]['median_error_ms']:.3g} ms, within one step {within:.0f}%")
            else:
                parts.append(f"{head}{100 * stats[key]['median_relative_error']:.3f}%")
        converged = f"{stats['converged']}/{stats['datasets']} converged (median {stats['median_steps']:g} steps)"
        covered = f"{stats['intervals_covered']} of {stats['intervals']} intervals cover"
        print(f"{group}: {converged}; {covered}; median fit {stats['median_fit_seconds']:.3g} s; {'; '.join(parts)}")
    print(f"{time.perf_counter() - start:.0f} s")
    if args.out:
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
