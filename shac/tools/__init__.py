"""Tools built on the algorithm and its runs: system identification (`trajectory`,
`sysid`, `least_squares`, `identifiability`, and its coverage benchmark
`sysid_coverage`), gradient diagnostics (`diagnostics`) and the benchmarks against the
peers (`benchmarks/`).

A new benchmark goes in `benchmarks/`; a new analysis of trained runs or of the physics
goes here as a module. Modules here may import `envs`, `shac.config`, `shac.core`,
`shac.run`, each other, and plotting and peer libraries (matplotlib, brax's trainers);
never `launch`.
"""
