"""Environments defined outside `envs/`, as a user's own package would define them."""

from envs.pendulum_swingup import PendulumSwingUp


class ShortPendulum(PendulumSwingUp):
    """The pendulum swing-up with 50-step episodes: `env.name=tests.user_envs:ShortPendulum`."""

    def __init__(self, episode_length: int = 50, **options):
        super().__init__(episode_length=episode_length, **options)
