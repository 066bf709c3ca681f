"""The identify-narrow-retrain-transfer loop as one measured workflow.

    python launch/transfer.py env=cartpole_swingup real=configs/real/cartpole_swingup.yaml \\
        "params=[body:pole:mass,joint:hinge:frictionloss]" "init=[joint:hinge:frictionloss=0.1]"

`real` (a YAML file of `element:name:attribute: value`, shac/run/real.py) stands in for
the robot: the loop records from it and evaluates on it, and never trains on it except in
the reference stage `direct`. The stages, each in its folder of `out` (default
runs/transfer/<env>), in the order `stage=all` runs them:

    nominal   nominal/seed<k>/: trained on the nominal model (launch/train.py)
    record    record/real.npz: `seconds` of excitation of the real system, with sensor noise
              (launch/record_trajectory.py real=<file>); with excitation=policy, under the nominal
              seed-0 policy, as a robot that falls without a controller is recorded
    identify  identify/sysid.json, identified.xml: `params` fitted to it (launch/sysid.py)
    narrow    narrow/seed<k>/: trained randomised around the estimates (randomization=from_sysid,
              randomization.num_std=`num_std`); an unresolved parameter over its wide range instead
    wide      wide/seed<k>/: trained randomised over wide hand-set ranges of `params`
    direct    direct/seed<k>/: trained on the real model itself, the reference
    evaluate  evaluate/: every policy on the real model, all but direct's also on `nearby` models
              near it; then summary.json, summary.md and summary.png

`stage=<name>` runs one stage; a stage whose output exists is skipped (delete it to redo), a
training run interrupted with checkpoints is resumed, and a stage whose input is missing says
which stage to run first. `train=[algo.max_epochs=100,...]` passes overrides to every
training run. docs/transfer.md describes each option and what a user with a real robot keeps.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import MISSING

from launch import cli

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("nominal", "record", "identify", "narrow", "wide", "direct", "evaluate")
TRAINED = {"nominal": "nominal", "narrow": "identified", "wide": "wide", "direct": "direct"}
"""Training stage -> the policy it trains, as the summary names it (`shac.tools.transfer.POLICIES`)."""
EXCITATIONS = ("auto", "multisine", "sweep", "random", "policy")
DITHER = ["amplitudes=[0.1]", "frequencies=[7.0]"]
"""excitation=policy: the multisine added to the policy's actions (control units, rad/s) on every actuator."""
USAGE = (
    "usage: python launch/transfer.py env=<task> real=<file.yaml> params=[element:name:attribute,...] [seeds=2] "
    "[out=runs/transfer/<env>] [stage=all|" + "|".join(STAGES) + "] [train=[key=value,...]]"
)


@dataclass
class TransferArgs:
    env: str = MISSING
    """Registered environment to train, identify and evaluate."""
    real: str = MISSING
    """The real system's stand-in: a YAML file of element:name:attribute: value (shac/run/real.py)."""
    params: list[str] = field(default_factory=list)
    """Parameters to identify and randomise, element:name:attribute."""
    seeds: int = 2
    """Training runs per policy, seeds 0 to seeds - 1."""
    out: str = ""
    """The loop's directory (default runs/transfer/<env>)."""
    stage: str = "all"
    """all, or one of record, identify, nominal, narrow, wide, direct, evaluate."""
    train: list[str] = field(default_factory=list)
    """launch/train.py overrides for every training run, e.g. [algo.max_epochs=100]."""
    seconds: float = 20.0
    """record: length of the recording (seconds)."""
    excitation: str = "auto"
    """record: auto (smooth random controls up to max_hz), or multisine, sweep, random with
    launch/record_trajectory.py's defaults, or policy: closed loop by the nominal seed-0 policy with a small
    multisine dither (`DITHER`), for a robot that falls without a controller."""
    max_hz: float = 0.0
    """record: highest frequency of the random excitation (Hz); 0: 1 Hz, or 3 Hz when an armature is among
    params (it shows only in fast accelerations)."""
    qpos_noise: float = 0.002
    """record: standard deviation of the position sensors' noise (rad or m)."""
    qvel_noise: float = 0.02
    """record: standard deviation of the velocity sensors' noise (rad/s or m/s)."""
    record_seed: int = 0
    """record: seed of the excitation and the noise."""
    init: list[str] = field(default_factory=list)
    """identify: initial guesses element:name:attribute=value (default: the model's values; needed where the
    model's is 0); also the centre of a parameter's wide range."""
    sysid: list[str] = field(default_factory=list)
    """identify: more launch/sysid.py arguments, e.g. [steps=100,method=finite_difference]."""
    num_std: float = 4.0
    """narrow: relative standard errors on either side of each estimate (twice the 95% interval's 1.96)."""
    unresolved_std: float = 0.05
    """narrow: a parameter whose relative standard error exceeds this is unresolved and randomised over its
    wide range (launch/sysid.py flags directions past 0.05)."""
    wide: list[float] = field(default_factory=lambda: [0.5, 2.0])
    """wide: each parameter's range is these multipliers times its nominal value (or its init guess)."""
    wide_ranges: dict[str, list[float]] = field(default_factory=dict)
    """wide: [low, high] of some parameters, over the multipliers, e.g. {joint:hinge:frictionloss: [0, 0.2]}."""
    episodes: int = 16
    """evaluate: deterministic episodes per policy and model."""
    nearby: int = 4
    """evaluate: models near the real one, each parameter of the real file and of params times exp(N(0, s^2))."""
    nearby_std: float = 0.1
    """evaluate: s, the standard deviation of the log-factors of the nearby models."""
    nearby_seed: int = 0
    """evaluate: seed of the nearby models."""


class StageError(Exception):
    """A stage cannot run (its input is missing) or a command it ran failed; the message says which."""


@dataclass(frozen=True)
class Plan:
    """What the stages share, checked before any of them runs.

    Attributes:
        args: the command line.
        out: the loop's directory (absolute).
        real_file: the real file (absolute).
        real: its values, key -> value.
        truth: key -> the real value of each of `params` (the real file's, else the nominal model's).
        wide: key -> the hand-set range of each of `params`.
        nearby: the nearby models, each key -> value.
    """

    args: TransferArgs
    out: Path
    real_file: Path
    real: dict[str, float]
    truth: dict[str, float]
    wide: dict[str, tuple[float, float]]
    nearby: list[dict[str, float]]


def plan(args: TransferArgs) -> Plan:
    """Checks the arguments against the environment's model (compiled by MuJoCo; nothing by XLA).

    Raises:
        ValueError, FileNotFoundError: one line naming the bad value and what is accepted.
    """
    import envs
    from envs.physics.parameters import parse_all
    from shac.run.real import check_real, load_real
    from shac.sysid.parameters import parse_assignments
    from shac.tools.transfer import nearby_models, wide_ranges

    if args.stage not in ("all", *STAGES):
        raise ValueError(f"unknown stage '{args.stage}'; available: all, {', '.join(STAGES)}")
    if args.excitation not in EXCITATIONS:
        raise ValueError(f"unknown excitation '{args.excitation}'; available: {', '.join(EXCITATIONS)}")
    for name in ("seeds", "episodes", "num_std", "seconds"):
        if not getattr(args, name) > 0:
            raise ValueError(f"{name} must be > 0, got {getattr(args, name)}")
    if args.nearby < 0 or args.nearby_std < 0:
        raise ValueError(f"nearby and nearby_std must be >= 0, got {args.nearby} and {args.nearby_std}")
    if not args.params:
        raise ValueError("params must name at least one parameter to identify, e.g. params=[body:pole:mass]")
    real = load_real(args.real)
    model = envs.make(args.env).mj_model
    check_real(real, model, args.real)
    try:
        parameters = {parameter.key: parameter for parameter in parse_all(args.params, model)}
    except ValueError as e:
        raise ValueError(f"params: {e}") from None
    guesses = parse_assignments(args.init)
    centres = {key: guesses.get(key, parameter.read(model)) for key, parameter in parameters.items()}
    for key, centre in centres.items():
        if not centre > 0:
            raise ValueError(
                f"'{key}' is {centre:g} in the {args.env} model and sysid starts from it and keeps it > 0; "
                f"give a guess > 0: init=[{key}=<value>]"
            )
    unknown = sorted(set(args.wide_ranges) - set(args.params))
    if unknown:
        raise ValueError(f"wide_ranges names {', '.join(unknown)}, not in params: {', '.join(args.params)}")
    wide = wide_ranges(centres, args.wide, args.wide_ranges)
    for key, (low, high) in wide.items():
        parameters[key].check_range(low, high, model)
    truth = {key: real.get(key, parameter.read(model)) for key, parameter in parameters.items()}
    out = Path(args.out or Path("runs/transfer") / args.env).resolve()
    nearby = nearby_models({**truth, **real}, args.nearby, args.nearby_std, args.nearby_seed)
    real_file = Path(args.real).resolve()
    return Plan(args=args, out=out, real_file=real_file, real=real, truth=truth, wide=wide, nearby=nearby)


def run_script(script: str, argv: list[str], log: Path, what: str) -> None:
    """Runs `launch/<script>` with `argv` in a new process, its output appended to `log`.

    Raises:
        StageError: it failed; the message ends with the last lines of its output.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as output:
        result = subprocess.run(
            [sys.executable, str(ROOT / "launch" / script), *argv], cwd=ROOT, stdout=output, stderr=subprocess.STDOUT
        )
    if result.returncode != 0:
        lines = [line for line in log.read_text().splitlines() if not re.match(r"[EWI]\d{4} ", line)]  # XLA's logs
        raise StageError(f"{what} failed (exit {result.returncode}); the end of {log}:\n  " + "\n  ".join(lines[-8:]))


def elapsed(start: float) -> str:
    """The time since `start` (`time.perf_counter()`) as minutes and seconds, e.g. 2m05s."""
    seconds = round(time.perf_counter() - start)
    return f"{seconds // 60}m{seconds % 60:02d}s"


def need(path: Path, stage: str, before: str) -> None:
    """Raises StageError unless `path` exists: `stage` needs it and stage `before` writes it."""
    if not path.exists():
        raise StageError(f"stage {stage} needs {path}; run stage={before} first")


def hydra_ranges(ranges: dict[str, tuple[float, float]]) -> list[str]:
    """launch/train.py overrides of a uniform randomisation over `ranges` (the colons of the keys escaped)."""
    escaped = {key.replace(":", "\\:"): bounds for key, bounds in ranges.items()}
    entries = ",".join(f"{key}:[{low!r},{high!r}]" for key, (low, high) in escaped.items())
    return ["randomization=uniform", f"++randomization.ranges={{{entries}}}"]


def train_stage(p: Plan, stage: str, overrides: list[str]) -> None:
    """Trains `p.args.seeds` runs into <out>/<stage>/seed<k>/ with `overrides`: each skipped when it holds its
    policy and resumed when it holds checkpoints."""
    from shac.run.checkpoint import CHECKPOINT_DIR
    from shac.run.serialization import POLICY_FILE

    for seed in range(p.args.seeds):
        run_dir = p.out / stage / f"seed{seed}"
        if (run_dir / POLICY_FILE).is_file():
            print(f"  {stage} seed {seed}: trained already ({run_dir}), skipped", flush=True)
            continue
        start = time.perf_counter()
        log = p.out / stage / f"seed{seed}.log"
        if (run_dir / CHECKPOINT_DIR).is_dir() and any((run_dir / CHECKPOINT_DIR).iterdir()):
            print(f"  {stage} seed {seed}: resuming {run_dir} (log {log})", flush=True)
            argv = [f"resume={run_dir}"]
        else:
            print(f"  {stage} seed {seed}: training into {run_dir} (log {log})", flush=True)
            argv = [f"env={p.args.env}", f"seed={seed}", f"hydra.run.dir={run_dir}", *overrides, *p.args.train]
        run_script("train.py", argv, log, f"{stage} seed {seed}")
        print(f"  {stage} seed {seed}: trained in {elapsed(start)}", flush=True)


def nominal(p: Plan) -> None:
    train_stage(p, "nominal", [])


def record(p: Plan) -> None:
    from shac.run.serialization import POLICY_FILE

    path = p.out / "record" / "real.npz"
    excitation = "random" if p.args.excitation == "auto" else p.args.excitation
    argv = [
        f"env={p.args.env}",
        f"out={path}",
        f"real={p.real_file}",
        f"seconds={p.args.seconds}",
        f"qpos_noise={p.args.qpos_noise}",
        f"qvel_noise={p.args.qvel_noise}",
        f"seed={p.args.record_seed}",
    ]
    if excitation == "policy":
        run_dir = p.out / "nominal" / "seed0"
        need(run_dir / POLICY_FILE, "record", "nominal")
        argv += [f"policy={run_dir}", "excitation=multisine", *DITHER]
        what = f"the nominal seed-0 policy's control with a dither ({' '.join(DITHER)})"
    else:
        argv.append(f"excitation={excitation}")
        what = f"{excitation} excitation"
    if excitation == "random":
        armature = any(key.endswith(":armature") for key in p.args.params)
        argv.append(f"max_hz={p.args.max_hz or (3.0 if armature else 1.0)}")
    print(f"  recording {p.args.seconds:g} s of {what} from {p.real_file}", flush=True)
    run_script("record_trajectory.py", argv, p.out / "record" / "record.log", "record")


def identify(p: Plan) -> None:
    data = p.out / "record" / "real.npz"
    need(data, "identify", "record")
    out = p.out / "identify"
    argv = [
        f"data={data}",
        f"env={p.args.env}",
        f"params=[{','.join(p.args.params)}]",
        f"init=[{','.join(p.args.init)}]",
        f"out={out}",
        "allow_unconverged=true",  # a fit that did not converge widens every parameter in narrow
        "compare_cost=false",
        *p.args.sysid,
    ]
    run_script("sysid.py", argv, out / "sysid.log", "identify")
    report = json.loads((out / "sysid.json").read_text())
    for key, entry in report["parameters"].items():
        low, high = entry["ci95"]
        real = f", real {p.truth[key]:.6g}" if key in p.truth else ""
        print(f"  {key}: {entry['estimate']:.6g}, 95% interval [{low:.6g}, {high:.6g}]{real}", flush=True)


def narrow(p: Plan) -> None:
    from shac.sysid.noise import MISFIT_LIMIT
    from shac.tools.transfer import model_keys, narrow_ranges, sound_report, unresolved

    path = p.out / "identify" / "sysid.json"
    need(path, "narrow", "identify")
    report = json.loads(path.read_text())
    fitted = model_keys(report)
    if sorted(fitted) != sorted(p.args.params):
        raise StageError(f"the report {path} fits {', '.join(fitted)}, but params are {', '.join(p.args.params)}")
    widened = unresolved(report, p.args.unresolved_std)
    if report.get("converged") is False:
        print("  the sysid fit did not converge: every parameter is randomised over its wide range", flush=True)
    elif report.get("misfit", 0.0) > MISFIT_LIMIT:
        print(
            f"  the sysid fit left residuals {report['misfit']:.3g} times the data's noise: every parameter is "
            "randomised over its wide range",
            flush=True,
        )
    for flag in report.get("flags", []):
        print(f"  sysid flags: {flag}", flush=True)
    sound = sound_report(report)
    for key in widened:
        low, high = p.wide[key]
        std = report["parameters"][key]["relative_std"]
        why = f" is unresolved (relative standard error {std:.3g} > {p.args.unresolved_std:g})" if sound else ""
        print(f"  {key}{why}: randomised over its wide range [{low:.6g}, {high:.6g}]", flush=True)
    ranges = narrow_ranges(str(path), report, p.args.num_std, p.wide, widened)
    if widened:
        overrides = hydra_ranges(ranges)
    else:
        overrides = [
            "randomization=from_sysid",
            f"randomization.report={path}",
            f"randomization.num_std={p.args.num_std}",
        ]
    (p.out / "narrow").mkdir(parents=True, exist_ok=True)
    description = {"report": str(path), "num_std": p.args.num_std, "widened": widened, "ranges": ranges}
    (p.out / "narrow" / "randomization.json").write_text(json.dumps(description, indent=2) + "\n")
    train_stage(p, "narrow", overrides)


def wide(p: Plan) -> None:
    from shac.tools.transfer import outside_wide

    report_path = p.out / "identify" / "sysid.json"
    if report_path.is_file():
        for key, entry in outside_wide(json.loads(report_path.read_text()), p.wide).items():
            low, high = entry["wide"]
            below, above = entry["ci95"]
            print(
                f"  warning: the sysid estimate of {key}, {entry['estimate']:.6g} (95% interval [{below:.6g}, "
                f"{above:.6g}]), lies outside its wide range [{low:.6g}, {high:.6g}]: the wide policy will not "
                "train on the identified system "
                f"(widen it with wide_ranges={{{key}: [low, high]}})",
                flush=True,
            )
    (p.out / "wide").mkdir(parents=True, exist_ok=True)
    (p.out / "wide" / "randomization.json").write_text(json.dumps({"ranges": p.wide}, indent=2) + "\n")
    train_stage(p, "wide", hydra_ranges(p.wide))


def direct(p: Plan) -> None:
    train_stage(p, "direct", hydra_ranges({key: (value, value) for key, value in p.real.items()}))


def evaluate(p: Plan) -> None:
    """Evaluates every policy on the real model and the nearby ones (reusing earlier results in
    evaluate/evaluations.json), then writes the summary."""
    import yaml

    from shac.run.checkpoint import CheckpointError
    from shac.run.commands import evaluate_run
    from shac.run.serialization import POLICY_FILE
    from shac.tools.transfer import markdown, outside_wide, plot, summarize, unresolved

    report_path = p.out / "identify" / "sysid.json"
    need(report_path, "evaluate", "identify")
    for stage in TRAINED:
        for seed in range(p.args.seeds):
            need(p.out / stage / f"seed{seed}" / POLICY_FILE, "evaluate", stage)
    folder = p.out / "evaluate"
    folder.mkdir(parents=True, exist_ok=True)
    models = {"real": p.real_file}
    for i, values in enumerate(p.nearby):
        models[f"nearby_{i}"] = folder / f"nearby_{i}.yaml"
        models[f"nearby_{i}"].write_text(yaml.safe_dump(values, sort_keys=False))
    done_path = folder / "evaluations.json"
    earlier = json.loads(done_path.read_text()) if done_path.is_file() else []
    found = {(e["policy"], e["seed"], e["model"]): e for e in earlier}
    for stage, policy in TRAINED.items():
        for seed in range(p.args.seeds):
            for model, model_file in models.items():
                if (policy == "direct" and model != "real") or (policy, seed, model) in found:
                    continue
                run_dir = p.out / stage / f"seed{seed}"
                try:
                    result = evaluate_run(str(run_dir), episodes=p.args.episodes, real=str(model_file))
                except (ValueError, FileNotFoundError, CheckpointError) as e:
                    raise StageError(f"evaluating {run_dir} on {model}: {e}") from None
                entry = {"policy": policy, "seed": seed, "model": model, "run_dir": str(run_dir), **result}
                found[(policy, seed, model)] = entry
                done_path.write_text(json.dumps(list(found.values()), indent=2) + "\n")
                print(f"  {policy} seed {seed} on {model}: return {result['mean_return']:.1f}", flush=True)
    report = json.loads(report_path.read_text())
    summary = summarize(list(found.values()), report, p.truth)
    widened = unresolved(report, p.args.unresolved_std)
    summary |= {
        "env": p.args.env,
        "real": str(p.real_file),
        "seeds": p.args.seeds,
        "episodes": p.args.episodes,
        "train": p.args.train,
        "nearby_models": p.nearby,
        "unresolved": widened,
        "identified_is_wide": set(widened) == set(p.args.params),
        "sysid_converged": report.get("converged"),
        "outside_wide": outside_wide(report, p.wide),
    }
    (p.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    table = markdown(summary, p.args.seeds, len(p.nearby))
    header = f"# Transfer to `{p.real_file.name}` on {p.args.env}\n\n"
    (p.out / "summary.md").write_text(header + table)
    plot(summary, str(p.out / "summary.png"), f"{p.args.env}: policies on the real system")
    print(table, end="", flush=True)


def finished(p: Plan, stage: str) -> Path | None:
    """The output that shows `stage` has run (then it is skipped), or None."""
    from shac.run.serialization import POLICY_FILE

    if stage in TRAINED:
        runs = [p.out / stage / f"seed{seed}" / POLICY_FILE for seed in range(p.args.seeds)]
        return p.out / stage if all(run.is_file() for run in runs) else None
    path = p.out / {"record": "record/real.npz", "identify": "identify/sysid.json", "evaluate": "summary.json"}[stage]
    return path if path.exists() else None


RUN = {
    "record": record,
    "identify": identify,
    "nominal": nominal,
    "narrow": narrow,
    "wide": wide,
    "direct": direct,
    "evaluate": evaluate,
}


def main(argv: list[str]) -> None:
    args = cli.parse(TransferArgs, argv, USAGE)
    from launch.runtime import configure_runtime

    configure_runtime()
    try:
        p = plan(args)
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
    start = time.perf_counter()
    for stage in STAGES if args.stage == "all" else (args.stage,):
        output = finished(p, stage)
        if output is not None:
            print(f"[transfer] {stage}: done already ({output}), skipped", flush=True)
            continue
        print(f"[transfer] {stage}: start", flush=True)
        stage_start = time.perf_counter()
        try:
            RUN[stage](p)
        except StageError as e:
            sys.exit(f"error: {e}")
        print(f"[transfer] {stage}: done in {elapsed(stage_start)}", flush=True)
    print(f"[transfer] finished in {elapsed(start)}: {p.out}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
