"""Identify model parameters from recorded data, with an identifiability report.

    python launch/sysid.py data=pendulum.npz env=pendulum_swingup \\
        params=[joint:hinge:damping,joint:hinge:frictionloss] init=[joint:hinge:frictionloss=0.1]

`signal:ctrl:delay` (seconds) names the control delay: in params it is fitted
(from init, default 0), in init alone it is a known, fixed delay
(shac/sysid/signals.py).

Several recordings of the same system (different experiments: excitations, speeds) fit
together, sharing the parameters and the control delay, each with its own noise level; the
column map applies to every CSV among them:

    python launch/sysid.py "data=[fast.npz,slow.npz]" env=pendulum_swingup params=[...]

A recording made on a variant of the model (a known payload in the hand, a test
rig that holds a joint) names the values that hold for it alone, one list per
recording in data's order; the shared parameters are fitted through every variant:

    python launch/sysid.py "data=[free.npz,loaded.npz]" env=arm_reach params=[...] \
        "variants=[[],[body:hand:mass=0.7]]"

A robot's own CSV log reads through a column map and its units (shac/sysid/columns.py):

    python launch/sysid.py data=arm_log.csv env=arm_reach column_map=arm_log.yaml params=[...]
    python launch/sysid.py data=log.csv env=pendulum_swingup params=[joint:hinge:damping] \
        "columns={time: t_ms, qpos: {hinge: pos_deg}, qvel: {hinge: vel_dps}, ctrl: {torque: cmd}}" \
        "units={time: ms, angle: deg, angular_velocity: deg/s}"

A log without velocities (an NPZ without qvel, a CSV without qvel_ columns, a column map
without qvel) is fitted on its positions alone (docs/sysid.md, "Positions alone").

Writes <out>/sysid.json (convergence, estimates, standard errors, confidence
intervals, the noise model, each recording with its noise estimate, Fisher
eigen-directions, flags with their advice (the excitation that would resolve each,
with the launch/record_trajectory.py command that records it: shac/sysid/report.py), what each
joint did in the recordings, fit history, Jacobian cost of autodiff versus finite differences, the wall time
of the fit alone and of the whole process from the start of main), <out>/landscape.png and
<out>/identified.xml (the env's MJCF with the fitted and the given values in
place, the control delay in a comment at its top: shac/sysid/mjcf.py; if MJCF
cannot express a value, one line says so and no file is written), and prints a
summary. Unusable data stops with one line before anything compiles; a fit that
does not converge says so first and exits with status 3 unless
allow_unconverged=true (identified.xml is written either way, its comment says
whether the fit converged).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from launch import cli

METHODS = ("autodiff", "finite_difference", "forward_difference")
"""`shac.sysid.fit.METHODS`, named here so that a bad one fails before JAX is imported."""
NOT_CONVERGED_STATUS = 3


@dataclass
class SysidArgs:
    data: Any = MISSING
    """Trajectory file (.npz or .csv; format in shac/sysid/recording.py), or a list of them, data=[a.npz,b.npz]:
    recordings of the same system, fitted together with one parameter vector and one noise level per recording."""
    variants: list[Any] = field(default_factory=list)
    """Per recording, in data's order, model values that hold for that recording alone (a payload, a test rig), as
    element:name:attribute=value, e.g. variants=[[],[body:hand:mass=0.7]]; none of them fitted (empty: every
    recording of the model as given)."""
    columns: dict[str, Any] = field(default_factory=dict)
    """Column map of a CSV with its own column names: {time: <column>, qpos: {<joint>: <column>, ...},
    qvel: {<joint>: <column>, ...}, ctrl: {<actuator>: <column>, ...}} (shac/sysid/columns.py);
    empty: the native format."""
    units: dict[str, Any] = field(default_factory=dict)
    """Units of the mapped columns: time s|ms|us, angle rad|deg, angular_velocity rad/s|deg/s|rpm,
    linear m|mm, ctrl native|deg (deg: position servos on hinge joints); default SI and native."""
    column_map: str = ""
    """A YAML file holding columns: and units: as above; columns= and units= are merged over it."""
    env: str = MISSING
    """Registered environment whose MJCF model is calibrated."""
    params: list[str] = field(default_factory=list)
    """Parameters as element:name:attribute, e.g. joint:hinge:damping, or signal:ctrl:delay (seconds)."""
    init: list[str] = field(default_factory=list)
    """Initial guesses as element:name:attribute=value (default: the model's values, which must be > 0;
    the delay's 0); a value of a parameter not in params is held fixed."""
    upper: list[str] = field(default_factory=list)
    """Upper bounds as element:name:attribute=value (default: none, every parameter is kept > 0; the delay
    is kept in [0, a tenth of the recording])."""
    contact_free: bool = False
    """Fit only the stretches of each recording where no contact is within 1 cm in the model (flight, swing,
    free space: shac/sysid/contacts.py): a legged robot's body, where contacts make the fit rough; what only
    contacts show (a foot's friction) is then flagged unresolved."""
    segment_seconds: float | None = None
    """Duration of each multiple-shooting segment (default: about 1 s, at most a fifth of the data)."""
    join_segments: bool = False
    """Then fit again with every recording one segment (single shooting) from the estimates, kept if it converges
    with residuals at the noise: narrower intervals where the model is right (docs/sysid.md, "What multiple
    shooting costs"); needs stretches of data of one length."""
    qpos_noise: float = 0.0
    """Standard deviation of the position measurement noise (0: estimate it per coordinate)."""
    qvel_noise: float = 0.0
    """Standard deviation of the velocity measurement noise (0: estimate it per coordinate; with qpos_noise
    given, only for recordings without velocities)."""
    steps: int = 50
    """Maximum Levenberg-Marquardt iterations."""
    spread_fits: int = 3
    """When the fit from the initial values does not converge, or leaves residuals more than 3 times the noise
    the data show, fits from up to this many starts spread around them (shac/sysid/fit.py; 0: none)."""
    spread: float = 4.0
    """The spread starts put every parameter within this factor of its initial value (> 1)."""
    allow_unconverged: bool = False
    """Exit with status 0 even if the fit did not converge (the report still says so)."""
    method: str = "autodiff"
    """Jacobian source: autodiff (MJX), or finite_difference (central) or forward_difference (half the
    simulations) over MuJoCo's C simulator."""
    compare_cost: bool = True
    """Also time one Jacobian of the other method, for the report."""
    out: str = ""
    """Output directory (default: <data file stem>_sysid beside the data; for several files, the stems joined
    by + beside the first)."""


def parse(argv: list[str]) -> SysidArgs:
    args = cli.parse(
        SysidArgs, argv, "usage: python launch/sysid.py data=<file> env=<name> params=[element:name:attribute,...]"
    )
    if not args.params:
        sys.exit("params must name at least one parameter, e.g. params=[joint:hinge:damping]")
    if args.method not in METHODS:
        sys.exit(f"unknown method '{args.method}'; available: {', '.join(METHODS)}")
    if args.steps < 1:
        sys.exit(f"steps must be >= 1, got {args.steps}")
    if args.spread_fits < 0 or not args.spread > 1:
        sys.exit(f"spread_fits must be >= 0 and spread > 1, got spread_fits={args.spread_fits}, spread={args.spread}")
    if args.segment_seconds is not None and args.segment_seconds <= 0:
        sys.exit(f"segment_seconds must be > 0, got {args.segment_seconds}")
    if (args.qvel_noise > 0 and not args.qpos_noise > 0) or min(args.qpos_noise, args.qvel_noise) < 0:
        sys.exit(
            f"give both qpos_noise and qvel_noise > 0, qpos_noise alone (recordings without velocities), or "
            f"neither; got {args.qpos_noise} and {args.qvel_noise}"
        )
    files = data_files(args.data)
    if args.variants and len(args.variants) != len(files):
        sys.exit(
            f"error: variants has {len(args.variants)} entries for {len(files)} recordings; give one list per "
            "recording in data's order, [] for one of the model as given"
        )
    if not all(isinstance(v, list) and all(isinstance(item, str) for item in v) for v in args.variants):
        sys.exit(
            f"error: variants must hold one list of element:name:attribute=value per recording; got {args.variants}"
        )
    if args.column_map:
        args.columns, args.units = _read_column_map(args.column_map, args.columns, args.units)
    return args


def data_files(data: Any) -> list[str]:
    """The trajectory files `data=` names (one file, or a list of them); exits with one line on an empty list,
    an entry that is not a file name, or a file given twice."""
    files = [data] if isinstance(data, str | int | float) else data
    if not isinstance(files, list) or not all(isinstance(f, str | int | float) for f in files):
        sys.exit(f"error: data must be a file or a list of files, data=[a.npz,b.npz]; got {data!r}")
    files = [str(f) for f in files]
    if not files:
        sys.exit("error: data=[] names no recording; give data=<file> or data=[<file>,<file>,...]")
    seen: dict[Path, str] = {}
    for f in files:
        path = Path(f).resolve()
        if path in seen:
            spelled = "" if seen[path] == f else f" (as '{seen[path]}' and '{f}')"
            sys.exit(f"error: data names the file '{seen[path]}' twice{spelled}; give each recording once")
        seen[path] = f
    return files


def contact_free_recordings(trajectories: list, model, files: list[str]) -> list:
    """Each recording's contact-free stretches (shac/sysid/contacts.py), with a line saying how many samples each
    kept; a ValueError names the recording that has none."""
    from shac.sysid.contacts import CONTACT_MARGIN, contact_free

    kept = []
    for trajectory, name in zip(trajectories, files, strict=True):
        trajectory.check(model.nq, model.nv, model.nu)
        try:
            free = contact_free(trajectory, model)
        except ValueError as e:
            raise ValueError(f"'{name}': {e}") from None
        print(
            f"contact_free: '{name}' keeps {len(free.time)} of {len(trajectory.time)} samples, in "
            f"{len(free.stretches())} stretches away from contact (within {CONTACT_MARGIN:g} m)"
        )
        kept.append(free)
    return kept


def _read_column_map(path: str, columns: dict, units: dict) -> tuple[dict, dict]:
    """`columns` and `units` merged over those of the YAML file `path`; exits with one line on a bad file."""
    if not Path(path).is_file():
        sys.exit(f"error: no column map file at '{path}'")
    try:
        loaded = OmegaConf.load(path)
    except Exception as e:  # YAML syntax errors come from the yaml package
        sys.exit(f"error: column map file '{path}' is not valid YAML: {str(e).splitlines()[0]}")
    extra = sorted(set(loaded) - {"columns", "units"}) if OmegaConf.is_dict(loaded) else ["<not a mapping>"]
    if extra:
        sys.exit(f"error: column map file '{path}' may hold columns: and units: only; found {', '.join(extra)}")
    try:
        merged = OmegaConf.merge({"columns": {}, "units": {}}, loaded, {"columns": columns, "units": units})
    except OmegaConfBaseException as e:
        sys.exit(f"error: column map file '{path}': {str(e).splitlines()[0]}")
    return OmegaConf.to_container(merged.columns), OmegaConf.to_container(merged.units)


def main(argv: list[str]) -> None:
    started = time.perf_counter()
    args = parse(argv)
    from launch.runtime import configure_runtime

    configure_runtime()
    import numpy as np

    import envs
    from envs.physics.parameters import ModelParameter
    from shac.sysid import signals
    from shac.sysid.fit import SPREAD_STARTS, Problem, fit, join_segments, residuals_function
    from shac.sysid.noise import MISFIT_LIMIT, reported_noise, residual_rms
    from shac.sysid.parameters import Bounds, parse_assignments
    from shac.sysid.recording import SPACING_RTOL, Trajectory
    from shac.sysid.report import analyze, plot_landscape, recorded_motion, summary_lines

    try:
        env = envs.make(args.env)
        model = env.mj_model
        model_init, signal_init = signals.split_values(parse_assignments(args.init))
        for key, value in model_init.items():
            ModelParameter.parse(key, model).write_mj(model, value)
        bounds = {key: Bounds(upper=value) for key, value in parse_assignments(args.upper).items()}
        signals.split(list(bounds))
        noise = (args.qpos_noise, args.qvel_noise or None) if args.qpos_noise > 0 else None
        files = data_files(args.data)
        variants = [parse_assignments(v) for v in args.variants] or None
        trajectories = [Trajectory.load(f, model, args.columns, args.units) for f in files]
        for name, trajectory in zip(files, trajectories, strict=True):
            if trajectory.jitter > SPACING_RTOL:
                print(
                    f"'{name}': its time stamps are up to {trajectory.jitter:.1%} off even spacing (a clock that "
                    f"rounds or jitters); its samples are taken as evenly spaced every {trajectory.dt:.6g} s"
                )
        if args.contact_free:
            trajectories = contact_free_recordings(trajectories, model, files)
        problem = Problem(
            model,
            args.params,
            trajectories,
            args.segment_seconds,
            bounds,
            noise,
            signal_init,
            names=[f"'{f}'" for f in files],
            variants=variants,
        )
        problem.to_theta(problem.initial_values)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
    first = Path(files[0])
    out = Path(args.out) if args.out else first.with_name("+".join(Path(f).stem for f in files) + "_sysid")
    out.mkdir(parents=True, exist_ok=True)

    print(f"fitting {', '.join(args.params)} ({args.method}) on {problem.describe()}")

    def progress(step: int, loss: float, values: np.ndarray) -> None:
        estimate = ", ".join(f"{v:.6g}" for v in values)
        print(f"  step {step:3d}  loss {loss:.6g}  [{estimate}]", flush=True)

    fit_started = time.perf_counter()
    result = fit(
        problem,
        steps=args.steps,
        method=args.method,
        on_step=progress,
        spread_fits=args.spread_fits,
        spread=args.spread,
    )
    if args.join_segments:
        problem, result = join_segments(problem, result, args.steps, method=args.method, on_step=progress)
        print(f"single shooting from these estimates (the segments joined): {result.joined}")
    fit_seconds = time.perf_counter() - fit_started
    if result.delay_start is not None:
        candidates = problem.delay_candidates()
        print(
            f"the delay started at {1000 * result.delay_start:.4g} ms, the least cost of {len(candidates)} delays "
            f"from {1000 * candidates[0]:.4g} to {1000 * candidates[-1]:.4g} ms (the other parameters at their "
            "initial values)"
        )
    if result.delay_restart is not None:
        print(
            f"the fitted delay ended next to a multiple of the physics step; a second fit from "
            f"{1000 * result.delay_restart:.4g} ms was run and the fit of lower cost kept "
            f"(delay {1000 * result.values[problem.delay_index]:.4g} ms)"
        )
    if result.floor_restart:
        print(
            f"{', '.join(result.floor_restart)} ended at the floor (a millionth of the initial value); a second "
            "fit with them back at their initial values was run and the fit of lower cost kept"
        )
    if result.spread_fits:
        count = result.spread_fits
        kept = (
            "the one from [" + ", ".join(f"{v:.4g}" for v in result.spread_start) + "] kept"
            if result.spread_start is not None
            else "the first fit kept (of least cost)"
        )
        print(
            f"the fit from the initial values was not sound (a sound fit converges with residuals within "
            f"{MISFIT_LIMIT:g} times the data's noise); {count} fit{'s' if count > 1 else ''} from spread starts "
            f"(each parameter within {args.spread:g} times its initial value, the least-cost of {SPREAD_STARTS}) "
            f"{'were' if count > 1 else 'was'} run, {kept}"
        )
    motion = recorded_motion(model, tuple(args.params), problem.trajectories, args.env)
    report = analyze(
        tuple(args.params),
        result.values,
        result.information,
        result.converged,
        units=problem.report_units(result.values),
        motion=motion,
    )
    cost, timed = {args.method: result.seconds_per_jacobian}, ""
    if args.compare_cost:
        other = "finite_difference" if args.method == "autodiff" else "autodiff"
        cost[other] = _time_jacobian(problem, result, other)
        timed = f", timing one {other} Jacobian" + (" (compilation included)" if other == "autodiff" else "")
    nq = problem.nq
    noises = result.noise  # [K, nx]: Problem was given a list
    recordings = [
        {
            "file": f,
            **info,
            "noise": {"qpos": noises[k, :nq].tolist(), "qvel": reported_noise(noises[k, nq:])},
            **({"variant": problem.variants[k]} if args.variants else {}),
        }
        for k, (f, info) in enumerate(zip(files, problem.recordings(), strict=True))
    ]
    noise_values = recordings[0]["noise"] if len(files) == 1 else {}
    report = {
        "converged": result.converged,
        "stalled": result.stalled,
        "delay_start": result.delay_start,
        "delay_restart": result.delay_restart,
        "floor_restart": list(result.floor_restart),
        "spread_fits": result.spread_fits,
        "spread_start": None if result.spread_start is None else result.spread_start.tolist(),
        "joined": result.joined,
        "misfit": result.misfit,
        "steps": result.steps,
        "step_length": result.step_length,
        "parameter_step_errors": result.parameter_step_errors,
        **report,
        "noise": {
            "source": noise_source(result),
            "controls": problem.controls_phrase(),
            **noise_values,
            "normalised_residual_rms": residual_rms(result.residuals, result.noise),
        },
        "segments": {"count": len(result.start_states), "seconds": problem.segment_seconds},
        "contact_free": args.contact_free,
        "recordings": recordings,
        "data": files[0] if isinstance(args.data, str) else files,
        "env": args.env,
        "method": args.method,
        "losses": result.losses,
        "seconds_per_jacobian": cost,
        "jacobians": result.jacobians,
        "fit_seconds": fit_seconds,
    }
    if args.columns:
        report["columns"], report["units"] = args.columns, args.units
    given = {key: value for key, value in model_init.items() if key not in args.params}
    report["identified_xml"] = _write_identified(env, problem, result, given, args, out)
    residuals_of = residuals_function(problem, args.method)
    weights = 1.0 / result.noise

    def loss_fn(grid: np.ndarray) -> np.ndarray:
        return np.array([np.mean(residuals_of(row, result.start_states, weights) ** 2) for row in grid])

    plot_landscape(loss_fn, tuple(args.params), report, str(out / "landscape.png"))
    report["process_seconds"] = time.perf_counter() - started
    (out / "sysid.json").write_text(json.dumps(report, indent=2) + "\n")
    print("\n".join(summary_lines(report)))
    print(
        "seconds per Jacobian: "
        + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in cost.items())
    )
    print(f"report: {out / 'sysid.json'}, figure: {out / 'landscape.png'}")
    written = report["identified_xml"]
    print(f"model: {written['path']}" if written["written"] else f"identified.xml not written: {written['reason']}")
    print(
        f"fit {fit_seconds:.1f} s of {report['process_seconds']:.1f} s in this process (the rest: start-up, "
        f"reading the data{timed}, the report, the figure, writing)"
    )
    if not result.converged and not args.allow_unconverged:
        print(
            f"error: the fit did not converge in {args.steps} steps; raise steps=, check the data and initial "
            "guesses, or pass allow_unconverged=true to accept it",
            file=sys.stderr,
        )
        sys.exit(NOT_CONVERGED_STATUS)


def noise_source(result) -> str:
    """How the report's noise standard deviations were obtained, in words (`FitResult.noise_rounds`)."""
    if result.noise_given:
        return "given"
    if result.noise_rounds:
        return "estimated from the residuals"
    return "estimated from the data's third differences: the fit stopped before its residuals could be used"


def _write_identified(env, problem, result, given: dict[str, float], args: SysidArgs, out: Path) -> dict:
    """Writes <out>/identified.xml: the env's MJCF with the fitted values and the `given` ones (init values of
    parameters not fitted) in place, the control delay and the fit's status in a comment at its top
    (shac/sysid/mjcf.py). Returns what became of it, {written, path, reason}: a value MJCF cannot
    express writes nothing."""
    from shac.sysid import signals
    from shac.sysid.mjcf import identified_xml

    path = out / "identified.xml"
    path.unlink(missing_ok=True)  # never leave an earlier run's model beside this report
    fitted = {problem.keys[i]: float(result.values[i]) for i in problem.model_indices}
    if problem.delay_index is not None or problem.delay > 0:
        delay = problem.delay if problem.delay_index is None else float(result.values[problem.delay_index])
        source = "given" if problem.delay_index is None else "fitted"
        delay_line = (
            f"Control delay {signals.DELAY}: {1000 * delay:.4g} ms ({source}). MuJoCo has no such attribute: "
            "delay the commands by it when simulating this model."
        )
    else:
        delay_line = f"Control delay {signals.DELAY}: none fitted or given."
    files = data_files(args.data)
    lines = [
        f"Identified by launch/sysid.py from {', '.join(files)} on env {args.env}: "
        + ("converged." if result.converged else "NOT CONVERGED, the values are unreliable."),
        "Fitted: " + (", ".join(f"{k} = {v:.6g}" for k, v in fitted.items()) or "no model parameter") + ".",
        *(["Given: " + ", ".join(f"{k} = {v:.6g}" for k, v in given.items()) + "."] if given else []),
        delay_line,
        *_variant_lines(files, problem.variants),
        "Standard errors and intervals: sysid.json beside this file.",
    ]
    try:
        text = identified_xml(env.mjcf_spec(), problem.mj_model, {**given, **fitted}, comment="\n".join(lines))
    except ValueError as e:
        return {"written": False, "path": None, "reason": str(e)}
    path.write_text(text)
    return {"written": True, "path": str(path), "reason": None}


def _time_jacobian(problem, result, method: str) -> float | str:
    """Seconds for one Jacobian by `method` (after compilation), or why it failed."""
    weights = 1.0 / result.noise
    try:
        problem.jacobian(result.values, result.start_states, weights, method)
        start = time.perf_counter()
        problem.jacobian(result.values, result.start_states, weights, method)
        return time.perf_counter() - start
    except Exception as e:
        return f"unavailable: {type(e).__name__}: {e}"


def _variant_lines(files: list[str], variants: tuple[dict[str, float], ...]) -> list[str]:
    """identified.xml's comment on the recordings made on a variant of the model (none: no line)."""
    named = [
        f"{f}: " + ", ".join(f"{key} = {value:g}" for key, value in variant.items())
        for f, variant in zip(files, variants, strict=True)
        if variant
    ]
    return (
        [f"Recorded on variants of this model, whose values are not written here: {'; '.join(named)}."] if named else []
    )


if __name__ == "__main__":
    main(sys.argv[1:])
