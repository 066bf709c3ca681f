"""Physics helpers the tasks share: contact smoothing and state-gradient clipping (`smoothing`),
MJX's small-vector math as contractions (`mjx_math`), and physical parameters named
`element:name:attribute` written differentiably into MJX models (`parameters`), and MJCF
values changed before a task's model compiles (`model_options`).

Modules here may import JAX, MuJoCo and MJX, `envs.private_apis` and each other; nothing
else of `envs` (not the tasks, not `envs.base`) and nothing of `shac`.
"""
