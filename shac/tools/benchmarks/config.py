"""Typed configuration of `launch/benchmark.py`: the training config tree plus the peers and suites.

`configs/benchmark.yaml` composes it; `configs/peers/<env>.yaml` holds, for
each environment, a few named configurations of each peer (published ones,
scaled for a small CPU, and a lean CPU-sized one), each with its source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore

from shac.config import ConfigError, TrainConfig
from shac.run.hydra_config import schema

SUITES = ("learning", "throughput", "playground", "sysid")
METHODS = ("shac", "ahac", "sapo", "apg", "ppo")
SYSID_METHODS = ("autodiff", "finite_difference", "forward_difference")
"""`shac.sysid.fit.METHODS`: this config is read before JAX is imported."""


@dataclass(frozen=True)
class PPOConfig:
    """brax PPO (`brax.training.agents.ppo.train`) hyperparameters (observations always normalised)."""

    source: str = ""
    """Where these values come from (shown in the benchmark's table of configurations)."""
    num_envs: int = 256
    """Parallel environments."""
    batch_size: int = 128
    """Environments per minibatch (batch_size * num_minibatches must be a multiple of num_envs)."""
    num_minibatches: int = 8
    """Minibatches per training step."""
    unroll_length: int = 30
    """Steps per environment in one collected trajectory."""
    num_updates_per_batch: int = 16
    """Passes over each collected batch."""
    discounting: float = 0.995
    """Discount."""
    learning_rate: float = 1e-3
    """Adam learning rate."""
    entropy_cost: float = 1e-2
    """Entropy bonus weight."""
    reward_scaling: float = 1.0
    """Rewards are multiplied by this for training."""
    max_grad_norm: float | None = None
    """Global gradient-norm clip; None: none."""
    policy_hidden: tuple[int, ...] = (32, 32, 32, 32)
    """Policy MLP hidden widths."""
    value_hidden: tuple[int, ...] = (256, 256, 256, 256, 256)
    """Value MLP hidden widths."""
    eval_every_steps: int = 200_000
    """Environment steps between evaluations (rounded up to whole training steps)."""


@dataclass(frozen=True)
class APGConfig:
    """brax APG (`brax.training.agents.apg.train`) hyperparameters (observations always normalised)."""

    source: str = ""
    """Where these values come from (shown in the benchmark's table of configurations)."""
    num_envs: int = 64
    """Parallel environments."""
    horizon_length: int = 32
    """Steps back-propagated per update."""
    learning_rate: float = 1e-4
    """Initial Adam learning rate."""
    schedule_decay: float = 0.997
    """Exponential learning-rate decay per update."""
    max_gradient_norm: float = 1e9
    """Global gradient-norm clip (brax also clips each element to 1)."""
    hidden: tuple[int, ...] = (32, 32, 32, 32)
    """Policy MLP hidden widths."""
    eval_every_steps: int = 100_000
    """Environment steps between evaluations (rounded up to whole updates)."""


@dataclass(frozen=True)
class ThroughputOptions:
    """The grid the throughput suite measures."""

    envs: tuple[str, ...] = ()
    """Environments to measure, each with its configs/env/<name>.yaml SHAC settings; empty: `env`."""
    num_envs: tuple[int, ...] = ()
    """N values; empty: each environment's own (`algo.num_envs` of configs/env/<name>.yaml)."""
    horizons: tuple[int, ...] = ()
    """h values; empty: each environment's own (`algo.horizon`)."""
    repeats: int = 3
    """Timed calls per measurement after a warm-up call (the median is reported)."""
    apg: bool = True
    """Also time brax APG's update at each point."""
    apg_updates: int = 2
    """APG updates per timed APG epoch (three epochs: the first compiles)."""


DM_CONTROL_SAMPLE = (
    "playground/CartpoleSwingup",
    "playground/AcrobotSwingup",
    "playground/PendulumSwingup",
    "playground/PointMass",
    "playground/CheetahRun",
    "playground/WalkerWalk",
    "playground/HopperStand",
    "playground/FingerSpin",
)
"""Eight dm_control-suite tasks that span it: dense and flat rewards, easy and contact-rich, a walker
(docs/playground.md says why each)."""


@dataclass(frozen=True)
class PlaygroundOptions:
    """What suite=playground runs (with `env=playground`: its one default setting and configs/peers/playground.yaml)."""

    survey: bool = True
    """Build every task of `survey_tasks`, check its 8-step gradient and time a short SHAC run."""
    survey_tasks: tuple[str, ...] = ()
    """Tasks surveyed; empty: every task of Playground's dm_control suite. A task listed here is surveyed
    even if an `extend` run surveyed it, and its new entry replaces the earlier one."""
    survey_epochs: int = 10
    """SHAC epochs of each survey run (the first compiles)."""
    tasks: tuple[str, ...] = DM_CONTROL_SAMPLE
    """Tasks of the learning comparison (`methods` with `seeds` seeds and `budget_minutes` each); empty: none."""
    extend: tuple[str, ...] = ()
    """results.json files of earlier suite=playground runs: their tasks are kept and not run again (unless
    listed in `survey_tasks`), and the new results (with every run's command) extend them, so a long
    benchmark can go on in parts."""


@dataclass(frozen=True)
class SysidOptions:
    """What suite=sysid runs: this project's fit against mujoco.sysid on the same simulated recordings
    (shac/sysid/versus_mujoco.py)."""

    model: str = "pendulum_swingup"
    """Registered environment whose model is simulated and fitted."""
    true_params: tuple[str, ...] = ("joint:hinge:damping=0.137",)
    """True values as element:name:attribute=value; these parameters are fitted."""
    init: tuple[str, ...] = ()
    """Initial guesses as element:name:attribute=value (default: the model's values)."""
    datasets: int = 10
    """Simulated recordings, each fitted by both tools."""
    seconds: float = 10.0
    """Length of each recording."""
    dt: float = 0.01
    """Sample spacing (s), a multiple of the model's time step."""
    max_hz: float = 1.0
    """Highest frequency of the random excitation (Hz)."""
    qpos_noise: tuple[float, float] = (1e-3, 1e-3)
    """(low, high): each recording's position noise std is log-uniform in between."""
    qvel_noise: tuple[float, float] = (1e-2, 1e-2)
    """(low, high): each recording's velocity noise std is log-uniform in between."""
    steps: int = 100
    """Iterations of each tool's least-squares solver at most."""
    upper: float = 10.0
    """Both tools fit each parameter within [0, upper times its initial guess] (mujoco.sysid needs finite bounds)."""
    method: str = "autodiff"
    """This project's Jacobians: autodiff (MJX forward mode), or finite_difference (central) or
    forward_difference (half the simulations) over MuJoCo's C rollouts, multithreaded; faster on larger
    models such as the arm."""
    join_segments: bool = False
    """This project's fit ends in single shooting from its estimates (shac.sysid.fit.join_segments)."""


@dataclass(frozen=True)
class BenchmarkConfig(TrainConfig):
    """A training config (env, SHAC hyperparameters, smoothing) plus what the benchmarks run."""

    suite: str = "learning"
    """learning (return against wall-clock and env steps), throughput (time per epoch), playground or
    sysid (this project's fit against mujoco.sysid)."""
    preset: str = "cpu"
    """Name of the preset the grid came from (configs/preset/), recorded with the results."""
    budget_minutes: float = 4.0
    """learning: training wall-clock of each method and seed (compile and evaluation excluded)."""
    seeds: int = 1
    """learning: seeds per method (0 .. seeds-1, offset by `seed`)."""
    methods: tuple[str, ...] = ("shac", "apg", "ppo")
    """learning: which of shac, ahac, sapo, apg, ppo to train (ahac and sapo with configs/algo/<name>.yaml
    on top of the env's settings, and the command line's algo.* overrides)."""
    shac_eval_every_steps: int = 65_536
    """learning: SHAC's environment steps between evaluations (rounded up to whole epochs)."""
    shac_budget_schedule: bool = True
    """learning: end SHAC's (AHAC's, SAPO's) learning-rate decay within the budget: each run trains with
    `algo.budget_minutes` = `budget_minutes`, so its rates decay on its own training clock (or over
    `algo.max_epochs` where that ends first); results.json records `lr_decay: budget` for the run.
    false: the rates decay over `algo.max_epochs` alone, however far the budget reaches."""
    eval_episodes: int = 16
    """Episodes per evaluation (the same deterministic evaluation for every method)."""
    from_results: str = ""
    """A results.json of an earlier run: re-render its table, plots and docs section instead of measuring."""
    docs: str = "docs/benchmarks.md"
    """Markdown file whose generated section for this suite and env is replaced; empty: none."""
    ppo: dict[str, PPOConfig] = field(default_factory=dict)
    """learning: PPO's named configurations (configs/peers/<env>.yaml); each is tried with one seed
    and the best final return gets `seeds` seeds."""
    apg: dict[str, APGConfig] = field(default_factory=dict)
    """learning: APG's named configurations, tried like PPO's; throughput: the first one is timed."""
    throughput: ThroughputOptions = ThroughputOptions()
    playground: PlaygroundOptions = PlaygroundOptions()
    sysid: SysidOptions = SysidOptions()


def validate_benchmark(config: BenchmarkConfig) -> None:
    """Raises ConfigError for the first benchmark value out of range (the training part is checked by
    `shac.config.validate`)."""
    if config.suite not in SUITES:
        raise ConfigError(f"unknown suite '{config.suite}'; available: {', '.join(SUITES)}")
    unknown = [m for m in config.methods if m not in METHODS]
    if unknown or not config.methods:
        raise ConfigError(f"methods must be a non-empty subset of {', '.join(METHODS)}, got {list(config.methods)}")
    if config.suite == "playground" and not config.env.name.startswith("playground/"):
        raise ConfigError(f"suite=playground needs env=playground (its one default setting), got '{config.env.name}'")
    epochs = config.playground.survey_epochs
    if epochs < 2:
        raise ConfigError(f"playground.survey_epochs must be >= 2 (the first compiles), got {epochs}")
    peers = {"ppo": config.ppo, "apg": config.apg}
    needed = (
        set(config.methods)
        if config.suite == "learning" or (config.suite == "playground" and config.playground.tasks)
        else {"apg"}
        if config.suite == "throughput" and config.throughput.apg
        else set()
    )
    for method, configs in peers.items():
        if method in needed and not configs:
            raise ConfigError(f"{method} has no configurations; add one under '{method}:' in configs/peers/<env>.yaml")
    positive = {
        "budget_minutes": config.budget_minutes,
        "seeds": config.seeds,
        "eval_episodes": config.eval_episodes,
        "shac_eval_every_steps": config.shac_eval_every_steps,
        "throughput.repeats": config.throughput.repeats,
        "throughput.apg_updates": config.throughput.apg_updates,
    }
    for method, configs in peers.items():
        positive |= {f"{method}.{name}.eval_every_steps": c.eval_every_steps for name, c in configs.items()}
    for name, value in positive.items():
        if not value > 0:
            raise ConfigError(f"{name} must be > 0, got {value}")
    for name, ppo in config.ppo.items():
        if (ppo.batch_size * ppo.num_minibatches) % ppo.num_envs:
            raise ConfigError(
                f"ppo.{name}.batch_size * ppo.{name}.num_minibatches ({ppo.batch_size} * {ppo.num_minibatches}) "
                f"must be a multiple of ppo.{name}.num_envs ({ppo.num_envs})"
            )
    check_sysid(config.sysid)
    grid = config.throughput
    for name, values in {"throughput.num_envs": grid.num_envs, "throughput.horizons": grid.horizons}.items():
        if values and min(values) < 1:
            raise ConfigError(f"{name} must be values >= 1 (empty: each env's own), got {list(values)}")


def check_sysid(options: SysidOptions) -> None:
    """Raises ConfigError for the first value of `sysid` out of range (the model's names are checked at run time)."""
    from shac.sysid.parameters import parse_assignments  # numpy only, like signals
    from shac.sysid.signals import is_signal

    try:
        true_values = parse_assignments(list(options.true_params))
        parse_assignments(list(options.init))
    except ValueError as e:
        raise ConfigError(f"sysid: {e}") from e
    signal = [key for key in true_values if is_signal(key)]
    if signal:
        raise ConfigError(
            f"sysid.true_params: '{signal[0]}' is a signal parameter; mujoco.sysid fits model parameters only "
            "(its SignalTransform delays the measured signals, not the commands)"
        )
    if not true_values:
        raise ConfigError("sysid.true_params must name at least one parameter, e.g. [joint:hinge:damping=0.137]")
    positive = {"sysid.datasets": options.datasets, "sysid.seconds": options.seconds, "sysid.dt": options.dt}
    positive |= {"sysid.max_hz": options.max_hz, "sysid.steps": options.steps}
    for name, value in positive.items():
        if not value > 0:
            raise ConfigError(f"{name} must be > 0, got {value}")
    if options.method not in SYSID_METHODS:
        raise ConfigError(f"sysid.method '{options.method}' is unknown; accepted: {', '.join(SYSID_METHODS)}")
    if not options.upper > 1:
        raise ConfigError(f"sysid.upper must be > 1 (the upper bound in initial guesses), got {options.upper}")
    for name, pair in {"sysid.qpos_noise": options.qpos_noise, "sysid.qvel_noise": options.qvel_noise}.items():
        if len(pair) != 2 or not 0 < pair[0] <= pair[1]:
            raise ConfigError(f"{name} must be [low,high] with 0 < low <= high, got {list(pair)}")


def register_benchmark_config() -> None:
    """Registers the schema `configs/benchmark.yaml` extends (`base_benchmark_config`)."""
    ConfigStore.instance().store(name="base_benchmark_config", node=schema(BenchmarkConfig))
