"""The SHAC algorithm as pure functions: networks, observation normaliser, episode bookkeeping,
the differentiable rollout window, the losses and critic targets, and the jitted epoch.

A new algorithm goes here, beside `algorithm.py`, built from the same parts. Modules here
may import `envs`, `shac.config`, each other, and JAX, flax and optax; nothing else of
`shac` (not `shac.run`, `shac.tools`), no Hydra or OmegaConf, no file or network I/O, no
logging or progress: everything here can be traced by `jax.jit`.
"""
