"""Tools built on the algorithm and its runs: gradient diagnostics (`diagnostics`), the
benchmarks against the peers (`benchmarks/`) and the arithmetic of the identify-retrain-transfer
loop (`transfer`: randomisation ranges, nearby models, the summary). System identification is
its own package, `shac.sysid`.

A new benchmark goes in `benchmarks/`; a new analysis of trained runs or of the physics
goes here as a module. Modules here may import `envs`, `shac.config`, `shac.core`,
`shac.run`, `shac.sysid`, each other, and plotting and peer libraries (matplotlib, brax's
trainers); never `launch`.
"""
