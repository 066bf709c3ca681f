"""Record a trajectory from MuJoCo's C simulator, for trying system identification.

    python launch/record_trajectory.py env=pendulum_swingup out=pendulum.npz \\
        true_params=[joint:hinge:damping=0.12] seconds=10 amplitudes=[0.8,0.4] frequencies=[2.0,5.3]

The excitation is a multisine (`amplitudes`, `frequencies` in rad/s), a
logarithmic sine sweep (`excitation=sweep sweep_hz=[0.05,0.5] sweep_amplitude=0.5`:
from 0.05 to 0.5 Hz over the recording), or smooth random controls
(`excitation=random`: per actuator a sum of 8 sines of random frequency up to
`max_hz`, phase and amplitude); `offset` is added to it, the result is clipped
to [-1, 1], and `actuators=[name,...]` applies it to those actuators only (the
others get 0). The recording starts from the environment's reset state, or from
`qpos0=[...]` and `qvel0=[...]` (the model's nq and nv values). Measurement
noise is Gaussian. `dt` sets the sample spacing (any multiple of the model's
time step; default the environment's control step).
`true_params=[signal:ctrl:delay=0.02]` simulates a control delay (seconds, as
shac/sysid/signals.py defines it); the recorded `ctrl` is the command as sent.
`real=<file>` simulates the values of a real file (a YAML file of
`element:name:attribute: value`, shac/run/real.py), as if they were in `true_params`.
`policy=<run_dir>` closes the loop: a run's deterministic policy (launch/train.py,
the same `env`) commands the robot from the measured state at each control step,
and the excitation is added to its actions as a dither, for a robot that falls
without a controller (small amplitudes, e.g. `amplitudes=[0.1] frequencies=[7]`);
the recorded `ctrl` is the command as applied.
The advice of `launch/sysid.py` on a direction the data cannot resolve names
the options that record the missing excitation (shac/sysid/report.py).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import MISSING

from launch import cli
from launch.runtime import configure_runtime

EXCITATIONS = ("multisine", "sweep", "random")


@dataclass
class RecordArgs:
    env: str = MISSING
    """Registered environment whose model is simulated."""
    out: str = MISSING
    """Output .npz file."""
    true_params: list[str] = field(default_factory=list)
    """Parameter values to simulate with, as element:name:attribute=value; signal:ctrl:delay in seconds."""
    real: str = ""
    """A real file (element:name:attribute: value per line, shac/run/real.py) whose values are simulated as if
    they were in true_params; a parameter may be given in only one of the two."""
    seconds: float = 10.0
    """Length of the recording."""
    excitation: str = "multisine"
    """multisine (from amplitudes and frequencies), sweep (from sweep_hz and sweep_amplitude) or random
    (smooth random controls from `seed`)."""
    max_hz: float = 1.0
    """random: highest frequency of the controls (Hz)."""
    dt: float = 0.0
    """Sample spacing in seconds (0: the environment's control step)."""
    amplitudes: list[float] = field(default_factory=lambda: [0.8, 0.4])
    """Multisine amplitudes (control units)."""
    frequencies: list[float] = field(default_factory=lambda: [2.0, 5.3])
    """Multisine angular frequencies (rad/s)."""
    sweep_hz: list[float] = field(default_factory=lambda: [0.05, 0.5])
    """sweep: [start, end] frequency in Hz, passed exponentially over the recording (each > 0, at most half
    the sampling rate)."""
    sweep_amplitude: float = 0.5
    """sweep: amplitude in control units, in (0, 1]."""
    offset: float = 0.0
    """A constant added to the excitation (control units, within [-1, 1]), e.g. a steady push."""
    actuators: list[str] = field(default_factory=list)
    """Actuators that get the excitation (default: all); the others get 0."""
    qpos0: list[float] = field(default_factory=list)
    """Start position, the model's nq values (default: the environment's reset state)."""
    qvel0: list[float] = field(default_factory=list)
    """Start velocity, the model's nv values, e.g. qvel0=[0] to start at rest (default: the reset state's)."""
    qpos_noise: float = 0.01
    """Std of the position measurement noise."""
    qvel_noise: float = 0.05
    """Std of the velocity measurement noise."""
    seed: int = 0
    """Seed of the noise, of the random excitation and of the reset state."""
    policy: str = ""
    """A run directory of `env` (launch/train.py) whose deterministic policy closes the loop, the excitation
    added to its actions; empty: the excitation alone, open loop."""


def controls(args: RecordArgs, model, dt: float, rng):
    """The recorded commands float [T, nu] the arguments ask for, T = seconds / dt + 1.

    Raises:
        ValueError: one line on an unknown excitation or actuator, multisine lists of different lengths,
            a sweep frequency that is not > 0 or lies above the Nyquist frequency of `dt`, a sweep amplitude
            outside (0, 1], or an offset outside [-1, 1].
    """
    import numpy as np

    from shac.sysid import recording

    if args.excitation not in EXCITATIONS:
        raise ValueError(f"unknown excitation '{args.excitation}'; available: {', '.join(EXCITATIONS)}")
    if not -1.0 <= args.offset <= 1.0:
        raise ValueError(f"offset must be within [-1, 1] (controls are clipped to [-1, 1]); got {args.offset}")
    names = [_actuator_name(model, i) for i in range(model.nu)]
    unknown = [name for name in args.actuators if name not in names]
    if unknown:
        raise ValueError(
            f"actuators names {', '.join(repr(n) for n in unknown)}, not an actuator of the model; "
            f"its actuators: {', '.join(names)}"
        )
    excited = [names.index(name) for name in args.actuators] if args.actuators else list(range(model.nu))
    if args.excitation == "multisine":
        if len(args.amplitudes) != len(args.frequencies):
            raise ValueError(
                f"amplitudes ({len(args.amplitudes)}) and frequencies ({len(args.frequencies)}) differ in length"
            )
        signal = np.repeat(
            recording.multisine(args.seconds, dt, args.amplitudes, args.frequencies, args.offset), len(excited), 1
        )
    elif args.excitation == "sweep":
        nyquist = 0.5 / dt
        if len(args.sweep_hz) != 2 or not all(0 < f <= nyquist for f in args.sweep_hz):
            raise ValueError(
                f"sweep_hz must be [start,end], two frequencies in Hz > 0 and at most {nyquist:g} Hz (half the "
                f"sampling rate of dt={dt:g} s); got {list(args.sweep_hz)}"
            )
        if not 0 < args.sweep_amplitude <= 1:
            raise ValueError(
                f"sweep_amplitude must be in (0, 1] (controls are clipped to [-1, 1]); got {args.sweep_amplitude}"
            )
        start_hz, end_hz = args.sweep_hz
        signal = np.repeat(
            recording.sweep(args.seconds, dt, args.sweep_amplitude, start_hz, end_hz, args.offset), len(excited), 1
        )
    else:
        signal = recording.random_excitation(args.seconds, dt, len(excited), rng, args.max_hz, offset=args.offset)
    ctrl = np.zeros((len(signal), model.nu))
    ctrl[:, excited] = signal
    return ctrl


def start_state(args: RecordArgs, model, qpos, qvel):
    """(qpos0 [nq], qvel0 [nv]): `args.qpos0` and `args.qvel0` where given, else the reset state's `qpos`, `qvel`.

    Raises:
        ValueError: one line on a start state of the wrong length or with a non-finite value.
    """
    import numpy as np

    state = []
    for name, given, default, size_name, size in (
        ("qpos0", args.qpos0, qpos, "nq", model.nq),
        ("qvel0", args.qvel0, qvel, "nv", model.nv),
    ):
        if not given:
            state.append(np.asarray(default, np.float64))
            continue
        if len(given) != size:
            raise ValueError(f"{name} has {len(given)} values but the model has {size_name}={size}")
        if not all(math.isfinite(v) for v in given):
            raise ValueError(f"{name} has a non-finite value: {list(given)}")
        state.append(np.asarray(given, np.float64))
    return state[0], state[1]


def _actuator_name(model, actuator_id: int) -> str:
    """The actuator's name, or `actuator<i>` for an unnamed one."""
    import mujoco

    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, actuator_id) or f"actuator{actuator_id}"


def policy_controller(args: RecordArgs):
    """(the run's environment, a `shac.sysid.recording.Controller` of its deterministic policy) for `args.policy`:
    the observation of the measured state (kinematics computed, the time and the last command given) as the
    run's environment makes it, and the policy's mean action for it.

    Raises:
        ValueError: the run trained on another environment than `args.env`, its environment observes inside its
            own step (a Playground task), `args.dt` is not its control step, or its files are damaged.
        FileNotFoundError, CheckpointError: no run or no policy in it.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    from shac.core.networks import act
    from shac.run.serialization import load_run_policy

    policy = load_run_policy(Path(args.policy), physical=True)  # the robot as it is, not a softened training model
    env = policy.env
    if policy.config.env.name != args.env:
        raise ValueError(f"policy run '{args.policy}' trained on env={policy.config.env.name}, not env={args.env}")
    if args.dt and abs(args.dt - env.ctrl_dt) > 1e-9:
        raise ValueError(
            f"dt={args.dt}: the policy acts once per control step of its environment ({env.ctrl_dt} s); leave dt out"
        )

    @jax.jit
    def command(qpos: jax.Array, qvel: jax.Array, time: jax.Array, last: jax.Array) -> jax.Array:
        data = env.data_from_qpos_qvel(qpos, qvel).replace(time=time)
        return act(policy.actor, policy.actor_params, policy.normalizer, env.observation(data, last))

    def controller(qpos: np.ndarray, qvel: np.ndarray, time: float, last: np.ndarray) -> np.ndarray:
        arrays = (jnp.asarray(qpos, jnp.float32), jnp.asarray(qvel, jnp.float32), jnp.float32(time))
        return np.asarray(command(*arrays, jnp.asarray(last, jnp.float32)), np.float64)

    model = env.mj_model
    try:
        jax.eval_shape(command, *(jnp.zeros(n, jnp.float32) for n in (model.nq, model.nv)), 0.0, jnp.zeros(model.nu))
    except NotImplementedError as e:
        raise ValueError(f"policy=: {e}, so it cannot observe a recorded state; record it open loop") from None
    return env, controller


def simulate(args: RecordArgs, env, controller=None):
    """The recording `args` ask for: `env`'s MuJoCo model (a copy) with `true_params` written into it, simulated
    by MuJoCo's C simulator (`shac.sysid.recording.record`) under `controls` from `start_state`, or with a
    `controller` (`policy_controller`) under its commands with `controls` added (`record_closed_loop`).

    Returns:
        (the `Trajectory`, its sample spacing dt, the simulated control delay in seconds).

    Raises:
        ValueError: one line on a bad parameter or delay, a real file that does not fit the model, a dt that
            is not a multiple of the model's time step, or a bad excitation or start state (`controls`,
            `start_state`).
    """
    import copy

    import jax
    import numpy as np

    from envs.physics.parameters import ModelParameter
    from shac.run.real import check_real, load_real
    from shac.sysid import recording

    model_values, delay = true_values(args)
    model = copy.deepcopy(env.mj_model)
    if args.real:
        check_real(load_real(args.real), model, args.real)
    for key, value in model_values.items():
        ModelParameter.parse(key, model).write_mj(model, value)
    dt = args.dt or env.ctrl_dt
    substeps = round(dt / model.opt.timestep)
    if substeps < 1 or abs(substeps * model.opt.timestep - dt) > 1e-9:
        raise ValueError(f"dt={dt} is not a multiple of the model time step {model.opt.timestep} s")
    rng = np.random.default_rng(args.seed)
    ctrl = controls(args, model, dt, rng)
    start = jax.device_get(env.initial_data(jax.random.key(args.seed)))
    qpos0, qvel0 = start_state(args, model, start.qpos, start.qvel)
    noise = (args.qpos_noise, args.qvel_noise, rng)
    if controller is None:
        trajectory = recording.record(model, ctrl, qpos0, qvel0, dt, *noise, delay)
    else:
        trajectory = recording.record_closed_loop(model, controller, ctrl, qpos0, qvel0, dt, *noise)
    return trajectory, dt, delay


def true_values(args: RecordArgs) -> tuple[dict[str, float], float]:
    """(the model parameters of `true_params` and of the real file, key -> value; the control delay in
    seconds, 0 if none).

    Raises:
        ValueError: one line on a malformed assignment or real file, a parameter given in both, or a delay
            below 0 or longer than the recording.
        FileNotFoundError: no real file where `real` says.
    """
    from shac.run.real import load_real
    from shac.sysid import signals
    from shac.sysid.parameters import parse_assignments

    model_values, signal_values = signals.split_values(parse_assignments(args.true_params))
    if args.real:
        real = load_real(args.real)
        twice = sorted(set(real) & set(model_values))
        if twice:
            raise ValueError(
                f"{', '.join(twice)} given both in true_params and in real file '{args.real}'; give each once"
            )
        model_values = {**real, **model_values}
    delay = signal_values.get(signals.DELAY, 0.0)
    signals.check_delay(delay, args.seconds, "true delay")
    if delay and args.policy:
        raise ValueError(f"{signals.DELAY} is simulated open loop only; record with policy= without it")
    return model_values, delay


def main(argv: list[str]) -> None:
    args = cli.parse(
        RecordArgs,
        argv,
        "usage: python launch/record_trajectory.py env=<name> out=<file.npz> [true_params=[k=v,...]] [real=<file>]",
    )
    configure_runtime()  # before anything imports mujoco
    import envs
    from shac.run.checkpoint import CheckpointError

    try:
        true_values(args)  # before the environment compiles
        env, controller = policy_controller(args) if args.policy else (envs.make(args.env), None)
        trajectory, dt, delay = simulate(args, env, controller)
    except (ValueError, FileNotFoundError, CheckpointError) as e:
        sys.exit(f"error: {e}")
    trajectory.save(args.out)
    delayed = f", commands acting {1000 * delay:g} ms after they are sent" if delay else ""
    loop = f", closed loop by the policy of {args.policy}" if args.policy else ""
    print(f"wrote {args.out}: {len(trajectory.time)} samples every {dt} s{delayed}{loop}")


if __name__ == "__main__":
    main(sys.argv[1:])
