"""SHAC on MuJoCo MJX, in layers; a layer may import the ones listed before it, never one after.

- `envs` (top-level package): the tasks and their physics helpers (`envs.physics`);
  it imports nothing of `shac`.
- `shac.config`: the typed configuration (frozen dataclasses and their checks); imports `envs`.
- `shac.core`: the pure algorithm (networks, losses, rollout, the jitted epoch); no I/O, no Hydra.
- `shac.run`: the machinery around the epoch (training loop, devices, checkpoints, tracking,
  evaluation, videos, export, Hydra composition).
- `shac.sysid`: system identification of a model's physical parameters from recorded
  trajectories; imports `envs`, nothing else of `shac`.
- `shac.tools`: what is built on training runs (gradient diagnostics, benchmarks against the
  peers).
- `launch/`: the command-line entry points, a thin skin over the layers above.

`tests/test_layers.py` holds every layer to this order.
"""
