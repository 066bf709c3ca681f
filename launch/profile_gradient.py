"""Where the time of a window's gradient goes, kernel by kernel (see `shac.tools.profiling`).

    python launch/profile_gradient.py [env=ant] [num_envs=64] [horizon=32] [top=12] [unroll_substeps=false]
        [hold_linesearch=false] [out=...]

Trace files are left under `runs/profile/<env>/` (`out=`) for Perfetto (https://ui.perfetto.dev).
"""

from __future__ import annotations

from dataclasses import dataclass

from launch import cli

USAGE = (
    "usage: python launch/profile_gradient.py [env=ant] [num_envs=64] [horizon=32] [top=12] [unroll_substeps=false]"
    " [hold_linesearch=false] [out=runs/profile]"
)


@dataclass
class ProfileArgs:
    env: str = "ant"
    """Environment name (see `envs.make`)."""
    num_envs: int = 64
    """N, environments simulated in parallel."""
    horizon: int = 32
    """h, steps in the window."""
    top: int = 12
    """Kernel kinds to print per pass."""
    unroll_substeps: bool = False
    """Unroll the physics substeps (see `EnvConfig.unroll_substeps`)."""
    hold_linesearch: bool = False
    """Differentiate the solver's line search with its step held (`smoothing.hold_linesearch`)."""
    out: str = "runs/profile"
    """Where the traces go (`<out>/<env>/forward`, `<out>/<env>/gradient`)."""


if __name__ == "__main__":
    print(cli.main(ProfileArgs, "shac.tools.profiling:profile_gradient", USAGE))
