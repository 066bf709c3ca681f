"""Record a trajectory from MuJoCo's C simulator, for trying system identification.

    python launch/record_trajectory.py env=pendulum_swingup out=pendulum.npz \\
        true_params=[joint:hinge:damping=0.12] seconds=10 amplitudes=[0.8,0.4] frequencies=[2.0,5.3]

The excitation is a multisine; measurement noise is Gaussian.
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
    """Parameter values to simulate with, as element:name:attribute=value."""
    seconds: float = 10.0
    """Length of the recording."""
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
    from envs.physics.parameters import ModelParameter, parse_assignments
    from shac.tools import sysid

    env = envs.make(args.env)
    model = env.mj_model
    try:
        for key, value in parse_assignments(args.true_params).items():
            ModelParameter.parse(key, model).write_mj(model, value)
    except ValueError as e:
        sys.exit(f"error: {e}")
    if len(args.amplitudes) != len(args.frequencies):
        sys.exit(f"amplitudes ({len(args.amplitudes)}) and frequencies ({len(args.frequencies)}) differ in length")
    start = jax.device_get(env.initial_data(jax.random.key(args.seed)))
    ctrl = sysid.multisine(args.seconds, env.ctrl_dt, args.amplitudes, args.frequencies)
    ctrl = np.repeat(ctrl, model.nu, axis=1)
    trajectory = sysid.record(
        model,
        ctrl,
        np.asarray(start.qpos),
        np.asarray(start.qvel),
        env.ctrl_dt,
        args.qpos_noise,
        args.qvel_noise,
        args.seed,
    )
    trajectory.save(args.out)
    print(f"wrote {args.out}: {len(trajectory.time)} samples every {env.ctrl_dt} s")


if __name__ == "__main__":
    main(sys.argv[1:])
