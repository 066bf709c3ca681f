"""The run machinery around the pure epoch of `shac.core`: the training loop, data parallelism,
checkpoints, tracking (metrics.jsonl, W&B, progress), serialisation of configs and policies,
evaluation (also on a real system's stand-in, `real.py`), videos, policy export, and Hydra's
composition of the configs.

A new logger goes in `tracking.py`; a new run artefact or format beside `serialization.py`
and `export.py`. Modules here may import `envs`, `shac.config`, `shac.core`, each other,
and I/O libraries (orbax, wandb, Hydra, imageio, ONNX); never `shac.sysid`, `shac.tools` or `launch`.
"""
