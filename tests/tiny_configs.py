"""Tiny algorithm configs for the toy env's unit tests (8-unit networks, 4 envs): SHAC's, and the
changes that make it AHAC (two critics combined by their minimum, a window adapting from 2 steps)
or SAPO (two critics averaged, no target critic, AdamW, SiLU, a state-dependent std, clipped
gradients)."""

import dataclasses

from shac.config import AhacConfig, AlgoConfig, SapoConfig

SHAC = AlgoConfig(
    num_envs=4,
    horizon=4,
    max_epochs=10,
    actor_hidden=(8,),
    critic_hidden=(8,),
    critic_iterations=2,
    critic_minibatches=2,
)
AHAC = dataclasses.replace(
    SHAC,
    name="ahac",
    num_critics=2,
    critic_combine="min",
    ahac=AhacConfig(min_horizon=2, stiffness_threshold=5.0, horizon_lr=0.5),
)
SAPO = dataclasses.replace(
    SHAC,
    name="sapo",
    num_critics=2,
    critic_combine="mean",
    target_alpha=0.0,
    weight_decay=0.01,
    activation="silu",
    state_dependent_std=True,
    actor_grad_norm=0.5,
    critic_grad_norm=0.5,
    sapo=SapoConfig(),
)
