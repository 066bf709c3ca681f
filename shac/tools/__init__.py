"""Tools built on the algorithm and its runs: gradient diagnostics (`diagnostics`) and the
benchmarks against the peers (`benchmarks/`). System identification is its own package,
`shac.sysid`.

A new benchmark goes in `benchmarks/`; a new analysis of trained runs or of the physics
goes here as a module. Modules here may import `envs`, `shac.config`, `shac.core`,
`shac.run`, `shac.sysid`, each other, and plotting and peer libraries (matplotlib, brax's
trainers); never `launch`.
"""
