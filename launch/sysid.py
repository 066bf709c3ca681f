"""Identify model parameters from recorded data, with an identifiability report.

    python launch/sysid.py data=pendulum.npz env=pendulum_swingup \\
        params=[joint:hinge:damping,joint:hinge:frictionloss] init=[joint:hinge:frictionloss=0.1]

Writes <out>/sysid.json (estimates, standard errors, confidence intervals,
Fisher eigen-directions, flags, fit history, gradient cost of autodiff versus
finite differences) and <out>/landscape.png, and prints a summary.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import MISSING

from launch import cli

METHODS = ("autodiff", "finite_difference")


@dataclass
class SysidArgs:
    data: str = MISSING
    """Trajectory file (.npz or .csv; format in shac/tools/sysid.py)."""
    env: str = MISSING
    """Registered environment whose MJCF model is calibrated."""
    params: list[str] = field(default_factory=list)
    """Parameters as element:name:attribute, e.g. joint:hinge:damping."""
    init: list[str] = field(default_factory=list)
    """Initial guesses as element:name:attribute=value (default: the model's values, which must be > 0)."""
    upper: list[str] = field(default_factory=list)
    """Upper bounds as element:name:attribute=value (default: none; every parameter is kept > 0)."""
    segment_length: int = 20
    """Samples per multiple-shooting segment."""
    steps: int = 50
    """Maximum optimiser steps."""
    method: str = "autodiff"
    """Gradient source: autodiff (MJX) or finite_difference (MuJoCo's C simulator)."""
    compare_cost: bool = True
    """Also time one gradient of the other method, for the report."""
    out: str = ""
    """Output directory (default: <data file stem>_sysid beside the data)."""


def parse(argv: list[str]) -> SysidArgs:
    args = cli.parse(
        SysidArgs, argv, "usage: python launch/sysid.py data=<file> env=<name> params=[element:name:attribute,...]"
    )
    if not args.params:
        sys.exit("params must name at least one parameter, e.g. params=[joint:hinge:damping]")
    if args.method not in METHODS:
        sys.exit(f"unknown method '{args.method}'; available: {', '.join(METHODS)}")
    if args.segment_length < 1 or args.steps < 1:
        sys.exit(f"segment_length and steps must be >= 1, got {args.segment_length} and {args.steps}")
    return args


def main(argv: list[str]) -> None:
    args = parse(argv)
    from launch.runtime import configure_runtime

    configure_runtime()
    import jax
    import numpy as np

    import envs
    from envs.physics.parameters import ModelParameter, parse_assignments
    from shac.tools import identifiability, sysid

    try:
        env = envs.make(args.env)
        model = env.mj_model
        for key, value in parse_assignments(args.init).items():
            ModelParameter.parse(key, model).write_mj(model, value)
        bounds = {key: sysid.Bounds(upper=value) for key, value in parse_assignments(args.upper).items()}
        problem = sysid.Problem(model, args.params, sysid.Trajectory.load(args.data), args.segment_length, bounds)
        problem.to_theta(problem.initial_values)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
    out = Path(args.out) if args.out else Path(args.data).with_name(Path(args.data).stem + "_sysid")
    out.mkdir(parents=True, exist_ok=True)

    print(f"fitting {', '.join(args.params)} on {len(problem.segments.ctrl)} segments ({args.method})")

    def progress(step: int, loss: float, values: np.ndarray) -> None:
        estimate = ", ".join(f"{v:.6g}" for v in values)
        print(f"  step {step:3d}  loss {loss:.6g}  [{estimate}]", flush=True)

    result = sysid.fit(problem, steps=args.steps, method=args.method, on_step=progress)
    values = result.values
    jacobian = problem.jacobian(values, method=args.method)
    residuals = (
        np.asarray(problem.residuals(jax.numpy.asarray(values, jax.numpy.float32)))
        if args.method == "autodiff"
        else problem.residuals_mujoco(values)
    )
    report = identifiability.analyze(tuple(args.params), values, jacobian, residuals)
    cost = {args.method: result.seconds_per_gradient}
    if args.compare_cost:
        other = METHODS[1 - METHODS.index(args.method)]
        cost[other] = sysid.time_gradient(problem, values, other)
    report.update(
        data=str(args.data),
        env=args.env,
        method=args.method,
        converged=result.converged,
        steps=result.steps,
        losses=result.losses,
        seconds_per_gradient=cost,
    )
    (out / "sysid.json").write_text(json.dumps(report, indent=2) + "\n")
    loss_fn = jax.jit(jax.vmap(problem.loss)) if args.method == "autodiff" else _map(problem.loss_mujoco)
    identifiability.plot_landscape(loss_fn, tuple(args.params), report, str(out / "landscape.png"))
    status = "converged" if result.converged else "stopped at the step limit"
    print(f"{status} after {result.steps} steps, loss {result.losses[-1]:.6g}")
    print("\n".join(identifiability.summary_lines(report)))
    print("seconds per gradient: " + ", ".join(f"{k} {v:.4g}" for k, v in cost.items()))
    print(f"report: {out / 'sysid.json'}, figure: {out / 'landscape.png'}")


def _map(loss):
    import numpy as np

    return lambda grid: np.array([loss(row) for row in grid])


if __name__ == "__main__":
    main(sys.argv[1:])
