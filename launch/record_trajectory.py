"""Record a trajectory from MuJoCo's C simulator, for trying system identification.

    python launch/record_trajectory.py env=pendulum_swingup out=pendulum.npz \\
        true_params=[joint:hinge:damping=0.12] seconds=10 amplitudes=[0.8,0.4] frequencies=[2.0,5.3]

The excitation is a multisine, or smooth random controls (`excitation=random`:
per actuator a sum of 8 sines of random frequency up to `max_hz`, phase and
amplitude); measurement noise is Gaussian. `dt` sets the sample spacing (any
multiple of the model's time step; default the environment's control step).
`true_params=[signal:ctrl:delay=0.02]` simulates a control delay (seconds, as
shac/sysid/signals.py defines it); the recorded `ctrl` is the command as sent.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from omegaconf import MISSING

from launch import cli
from launch.runtime import configure_runtime


@dataclass
class RecordArgs:
    env: str = MISSING
    """Registered environment whose model is simulated."""
    out: str = MISSING
    """Output .npz file."""
    true_params: list[str] = field(default_factory=list)
    """Parameter values to simulate with, as element:name:attribute=value; signal:ctrl:delay in seconds."""
    seconds: float = 10.0
    """Length of the recording."""
    excitation: str = "multisine"
    """multisine (from amplitudes and frequencies) or random (smooth random controls from `seed`)."""
    max_hz: float = 1.0
    """random: highest frequency of the controls (Hz)."""
    dt: float = 0.0
    """Sample spacing in seconds (0: the environment's control step)."""
    amplitudes: list[float] = field(default_factory=lambda: [0.8, 0.4])
    """Multisine amplitudes (control units)."""
    frequencies: list[float] = field(default_factory=lambda: [2.0, 5.3])
    """Multisine angular frequencies (rad/s)."""
    qpos_noise: float = 0.01
    """Std of the position measurement noise."""
    qvel_noise: float = 0.05
    """Std of the velocity measurement noise."""
    seed: int = 0


def main(argv: list[str]) -> None:
    args = cli.parse(
        RecordArgs, argv, "usage: python launch/record_trajectory.py env=<name> out=<file.npz> [true_params=[k=v,...]]"
    )
    configure_runtime()  # before anything imports mujoco
    import jax
    import numpy as np

    import envs
    from envs.physics.parameters import ModelParameter
    from shac.sysid import recording, signals
    from shac.sysid.parameters import parse_assignments

    try:
        model_values, signal_values = signals.split_values(parse_assignments(args.true_params))
        delay = signal_values.get(signals.DELAY, 0.0)
        signals.check_delay(delay, args.seconds, "true delay")
    except ValueError as e:
        sys.exit(f"error: {e}")
    env = envs.make(args.env)
    model = env.mj_model
    try:
        for key, value in model_values.items():
            ModelParameter.parse(key, model).write_mj(model, value)
    except ValueError as e:
        sys.exit(f"error: {e}")
    if len(args.amplitudes) != len(args.frequencies):
        sys.exit(f"amplitudes ({len(args.amplitudes)}) and frequencies ({len(args.frequencies)}) differ in length")
    dt = args.dt or env.ctrl_dt
    substeps = round(dt / model.opt.timestep)
    if substeps < 1 or abs(substeps * model.opt.timestep - dt) > 1e-9:
        sys.exit(f"dt={dt} is not a multiple of the model time step {model.opt.timestep} s")
    rng = np.random.default_rng(args.seed)
    if args.excitation == "multisine":
        ctrl = np.repeat(recording.multisine(args.seconds, dt, args.amplitudes, args.frequencies), model.nu, axis=1)
    elif args.excitation == "random":
        ctrl = recording.random_excitation(args.seconds, dt, model.nu, rng, args.max_hz)
    else:
        sys.exit(f"unknown excitation '{args.excitation}'; available: multisine, random")
    start = jax.device_get(env.initial_data(jax.random.key(args.seed)))
    trajectory = recording.record(
        model, ctrl, np.asarray(start.qpos), np.asarray(start.qvel), dt, args.qpos_noise, args.qvel_noise, rng, delay
    )
    trajectory.save(args.out)
    delayed = f", commands acting {1000 * delay:g} ms after they are sent" if delay else ""
    print(f"wrote {args.out}: {len(trajectory.time)} samples every {dt} s{delayed}")


if __name__ == "__main__":
    main(sys.argv[1:])
