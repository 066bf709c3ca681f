"""Coverage benchmark of system identification: how often the 95% interval holds the truth.

    nice -n 15 python launch/sysid_coverage.py datasets=50 out=docs/benchmarks/sysid_coverage_damping.json

simulates K datasets with MuJoCo's C simulator (smooth random excitation and
start state, random noise levels, the sampling rates in turn), fits each with
the default settings (shac/sysid/coverage.py), prints the coverage of the 95%
intervals and the median relative error, overall and per sampling rate, and
writes them with every dataset's fit to `out` (JSON).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from launch import cli


@dataclass
class CoverageArgs:
    env: str = "pendulum_swingup"
    """Registered environment whose model is simulated and fitted."""
    true_params: list[str] = field(default_factory=lambda: ["joint:hinge:damping=0.137"])
    """True values as element:name:attribute=value; these parameters are fitted."""
    init: list[str] = field(default_factory=list)
    """Initial guesses as element:name:attribute=value (default: the model's values, which must be > 0)."""
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
    """Jacobian source of the fits: autodiff or finite_difference."""
    seed: int = 0
    out: str = ""
    """JSON file for the summary and every dataset's fit (default: print only)."""


def main(argv: list[str]) -> None:
    args = cli.parse(
        CoverageArgs, argv, "usage: python launch/sysid_coverage.py [datasets=50] [true_params=[k=v,...]] ..."
    )
    from launch.runtime import configure_runtime

    configure_runtime()
    import jax
    import numpy as np

    import envs
    from shac.sysid import coverage
    from shac.sysid.parameters import parse_assignments

    try:
        env = envs.make(args.env)
        true_values, initial_values = parse_assignments(args.true_params), parse_assignments(args.init)
        true_model, guess_model = coverage.models(env.mj_model, true_values, initial_values)
    except ValueError as e:
        sys.exit(f"error: {e}")
    keys = tuple(true_values)
    truth = np.array([true_values[key] for key in keys])
    initial_data = jax.jit(env.initial_data)

    def initial_state(rng):
        data = jax.device_get(initial_data(jax.random.key(int(rng.integers(2**31)))))
        return np.asarray(data.qpos, np.float64), np.asarray(data.qvel, np.float64)

    print(f"{args.datasets} datasets of {args.seconds} s, {', '.join(keys)} = {truth.tolist()}, rates {args.rates} s")
    datasets, start = [], time.perf_counter()
    for k in range(args.datasets):
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
        )
        datasets.append(dataset)
        estimates = ", ".join(f"{e:.5g} ± {s:.2g}" for e, s in zip(dataset.estimates, dataset.std_errors, strict=True))
        print(
            f"  {k:3d}  dt {dataset.dt:g}  {estimates}  covered {dataset.covered}  "
            f"{'converged' if dataset.converged else 'NOT CONVERGED'} in {dataset.steps} steps",
            flush=True,
        )
    summary = coverage.summarize(datasets, keys, truth)
    for group, stats in summary.items():
        line = "; ".join(
            f"{key}: coverage {100 * stats[key]['coverage']:.0f}%, "
            f"median error {100 * stats[key]['median_relative_error']:.3f}%"
            for key in keys
        )
        converged = f"{stats['converged']}/{stats['datasets']} converged (median {stats['median_steps']:g} steps)"
        print(f"{group}: {converged}; {line}")
    print(f"{time.perf_counter() - start:.0f} s")
    if args.out:
        record = {"command": "python launch/sysid_coverage.py " + " ".join(argv), "args": asdict(args)}
        record |= {"summary": summary, "datasets": [asdict(d) for d in datasets]}
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
