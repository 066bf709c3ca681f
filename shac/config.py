"""Typed run configuration: frozen dataclasses, a docstring under every field, and their validation.

Plain Python (no Hydra): `shac.run.hydra_config` composes `configs/*.yaml` onto
these schemas; `to_train_config` turns a plain dict (Hydra's result, or a run's
`config.json`) into a frozen `TrainConfig` and checks every value before
anything compiles.
"""

import dataclasses
import difflib
import json
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path

import envs
from envs.physics.smoothing import Smoothing

LOGGER_MODES = ("offline", "online", "disabled")
PRECISIONS = ("float32", "float64")
RANDOMIZATION_MODES = ("none", "uniform", "from_sysid")
CRITIC_TARGETS = ("td_lambda", "one_step")
ALGORITHMS = ("shac", "ahac", "sapo")
CRITIC_COMBINES = ("min", "mean")
ACTIVATIONS = ("elu", "silu")


class ConfigError(ValueError):
    """A configuration value is out of range; the message names it."""


@dataclass(frozen=True)
class EnvConfig:
    """Which environment to train on."""

    name: str = "cartpole_swingup"
    """Registered environment name (see `envs.names()`)."""
    episode_length: int | None = None
    """Control steps per episode; None keeps the environment's default."""
    substeps: int | None = None
    """Physics steps per control step (the model's time step becomes the control period divided by
    this); None keeps the task's MJCF time step."""
    physics: dict[str, float] = field(default_factory=dict)
    """MJCF values changed before the model compiles, `element:name:attribute` -> value, `*` for
    every element (joints: every actuated joint), e.g. `{joint:*:armature: 0.05}` (see `envs.physics.model_options`)."""
    unroll_substeps: bool = False
    """Unroll the physics substeps of a control step: on the ant (2 substeps) a faster epoch; on
    the hopper (4) a slower gradient and a longer compile (docs/benchmarks.md)."""
    max_velocity: float | None = None
    """Bound on every joint velocity (rad/s or m/s) past which a state counts as exploded and is
    reset like a non-finite one; None keeps the environment's default (`MjxEnv.max_velocity`)."""


@dataclass(frozen=True)
class AhacConfig:
    """AHAC's adaptive horizon and critic fitting (used with `algo.name=ahac`; docs/algorithms.md)."""

    min_horizon: int = 8
    """Shortest window, and the first epoch's; `algo.horizon` is the longest (the compiled window)."""
    stiffness_threshold: float = 500.0
    """The horizon grows while the window's summed contact stiffness (per env, mean over envs) is
    below this, and shrinks above it."""
    horizon_lr: float = 5e-4
    """Step of the horizon per unit of stiffness below the threshold; decays linearly to 0 over max_epochs."""
    critic_tolerance: float = 0.2
    """Critic passes stop once the loss changed by less than this per pass, on average over the last 4
    (in the loss's units, as in the reference code; at least 5 passes, at most `algo.critic_iterations`)."""


@dataclass(frozen=True)
class SapoConfig:
    """SAPO's maximum-entropy terms (used with `algo.name=sapo`; docs/algorithms.md)."""

    init_temperature: float = 1.0
    """Initial entropy temperature alpha."""
    temperature_lr: float = 5e-3
    """Adam learning rate of log(alpha)."""
    target_entropy_per_action: float = -0.5
    """Target entropy of the squashed policy, per action dimension (the target is this * action_size)."""


@dataclass(frozen=True)
class AlgoConfig:
    """Algorithm hyperparameters (defaults: SHAC's shared values; env and algo configs set the rest)."""

    name: str = "shac"
    """shac, ahac (adaptive horizon) or sapo (maximum entropy); chosen with `algo=<name>`."""
    num_envs: int = 64
    """N, environments simulated in parallel."""
    horizon: int = 32
    """h, steps back-propagated per actor update (AHAC: the longest window)."""
    max_epochs: int = 500
    """Epochs to train; one epoch = one window of N * h env steps."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    lam: float = 0.95
    """TD(lambda) parameter of the critic targets, in (0, 1]."""
    actor_lr: float = 2e-3
    """Initial actor learning rate; decays linearly to `min_lr` over `max_epochs`."""
    critic_lr: float = 2e-3
    """Initial critic learning rate; decays linearly to `min_lr` over `max_epochs`."""
    min_lr: float = 1e-5
    """Final learning rate of both schedules."""
    adam_b1: float = 0.7
    """Adam beta1 (actor and critic)."""
    adam_b2: float = 0.95
    """Adam beta2 (actor and critic)."""
    actor_grad_norm: float = 1.0
    """Global-norm clip of the actor gradient."""
    critic_iterations: int = 16
    """Passes over the window's N * h samples per epoch (AHAC: at most this many)."""
    critic_minibatches: int = 4
    """Minibatches per pass (shuffled)."""
    critic_target: str = "td_lambda"
    """Critic targets: td_lambda or one_step (r + gamma V')."""
    target_alpha: float = 0.2
    """Target critic update theta' <- alpha theta' + (1 - alpha) theta."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """Actor MLP hidden widths."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """Critic MLP hidden widths."""
    init_log_std: float = -1.0
    """Initial state-independent log standard deviation of the policy."""
    num_critics: int = 1
    """1, or 2 critics regressed onto the same targets and combined by `critic_combine`."""
    critic_combine: str = "min"
    """How 2 critics make one value (bootstrap and targets): min (AHAC) or mean (SAPO)."""
    critic_grad_norm: float = 0.0
    """Global-norm clip of the critic gradient; 0 disables."""
    weight_decay: float = 0.0
    """Decoupled weight decay (AdamW) of actor and critic; 0 is plain Adam."""
    activation: str = "elu"
    """Hidden activation of both networks: elu (SHAC) or silu (SAPO)."""
    state_dependent_std: bool = False
    """Policy standard deviation from a second actor head (SAPO) instead of a free parameter."""
    ahac: AhacConfig = AhacConfig()
    """AHAC's options."""
    sapo: SapoConfig = SapoConfig()
    """SAPO's options."""
    normalize_obs: bool = True
    """Normalise observations with running statistics (frozen within a window)."""
    action_mean_penalty: float = 0.0
    """c >= 0: the actor loss adds c * mean(mu^2) over the window, mu the policy's mean before the tanh
    squash, so the policy stays out of saturation, where tanh (and joints pressed into their limits)
    pass no gradient. A training-only term: the task's reward and the evaluation are unchanged."""
    checkpoint_every: int = 0
    """Rematerialisation: if k > 0, the backward pass stores the env state every k steps and
    recomputes the steps between (memory nearly flat in the horizon, at a time cost: docs/benchmarks.md);
    k must divide the horizon. 0 stores every step's intermediates."""


@dataclass(frozen=True)
class RandomizationConfig:
    """Domain randomisation of physical parameters, sampled per episode (gradients still flow)."""

    mode: str = "none"
    """none, uniform (from `ranges`) or from_sysid (from a sysid report)."""
    ranges: dict[str, list[float]] = field(default_factory=dict)
    """uniform: element:name:attribute -> [low, high]."""
    report: str = ""
    """from_sysid: path of a sysid.json written by launch/sysid.py."""
    num_std: float = 2.0
    """from_sysid: sample within estimate * exp(+-num_std * relative standard error)."""


@dataclass(frozen=True)
class EvalConfig:
    """Periodic deterministic evaluation during training."""

    every: int = 50
    """Evaluate every this many epochs (and after the last); 0 disables periodic evaluation."""
    episodes: int = 16
    """Full episodes per evaluation, run in parallel."""


@dataclass(frozen=True)
class LoggerConfig:
    """Experiment tracking. metrics.jsonl is always written in the run directory."""

    mode: str = "offline"
    """W&B mode: offline (default, no account needed), online or disabled."""
    project: str = "shac"
    """W&B project."""
    entity: str | None = None
    """W&B entity (team or user); None uses the default."""
    group: str | None = None
    """W&B group, e.g. a sweep name."""
    log_every: int = 1
    """Write metrics every this many epochs."""
    progress: bool = True
    """Show progress: a live bar when stdout is a terminal, otherwise one plain line every
    `progress_every` epochs (epoch/total, env steps, return, steps/s, elapsed, ETA)."""
    progress_every: int = 10
    """Epochs between plain progress lines (when stdout is not a terminal: a file, a cluster log)."""
    video_every: int = 0
    """Render one deterministic episode to `videos/epoch_<k>.mp4` in the run directory (and
    W&B) every this many epochs; 0 disables. Needs headless OpenGL (MUJOCO_GL=egl)."""


@dataclass(frozen=True)
class CheckpointConfig:
    """Orbax checkpoints of the full training state in `<run_dir>/checkpoints/<epoch>/`.

    A checkpoint is also written after the last epoch and when the run receives
    SIGINT or SIGTERM; `launch/train.py resume=<run_dir>` continues from the newest.
    """

    every: int = 50
    """Save every this many epochs; 0 saves only at the end and on SIGINT/SIGTERM."""
    max_to_keep: int = 3
    """Newest checkpoints kept on disk (>= 1); older ones are deleted."""


@dataclass(frozen=True)
class LoopConfig:
    """How the training loop watches the run's health."""

    max_bad_epochs: int = 20
    """Stop (exit code 1, checkpointing the last good state) after this many epochs in a row that
    skipped their actor update (non-finite gradient) or reset more than half the envs as non-finite
    or too fast; 0 never stops (each bad epoch still warns)."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs."""

    env: EnvConfig = EnvConfig()
    algo: AlgoConfig = AlgoConfig()
    smoothing: Smoothing = Smoothing()
    randomization: RandomizationConfig = RandomizationConfig()
    eval: EvalConfig = EvalConfig()
    logger: LoggerConfig = LoggerConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    train: LoopConfig = LoopConfig()
    seed: int = 0
    """Seed of all randomness (initialisation, resets, action noise, evaluation)."""
    precision: str = "float32"
    """float32, or float64 (jax_enable_x64) against overflowing gradients in long contact-rich windows."""


@dataclass(frozen=True)
class DistributedConfig:
    """Multi-process training (several hosts, or one process per GPU) on `jax.distributed`.

    Every process runs the same command; together they train one run, each
    simulating the environments of its devices. Unset values are detected from
    the cluster (SLURM: `SLURM_*` variables of an `srun` step) by
    `jax.distributed.initialize`.
    """

    enabled: bool = False
    """Initialise `jax.distributed` before anything else runs."""
    coordinator_address: str | None = None
    """host:port that process 0 listens on and the others connect to."""
    num_processes: int | None = None
    """Processes in the run."""
    process_id: int | None = None
    """This process's index, in [0, num_processes); process 0 logs and writes the run's files."""


@dataclass(frozen=True)
class LaunchOptions:
    """Options of one `launch/train.py` invocation; not part of the run's `TrainConfig`."""

    resume: str | None = None
    """Run directory to continue from its newest good checkpoint; its `config.json` is the
    config, and `key=value` overrides on the command line change it (shapes must not change)."""
    compile_cache: str | None = None
    """JAX persistent compilation cache directory, or `off`; None uses `$SHAC_JAX_CACHE`,
    else ~/.cache/shac/jax."""
    distributed: DistributedConfig = DistributedConfig()
    """How this process joins a multi-process run (off by default)."""


@dataclass(frozen=True)
class DiagnoseOptions:
    """What launch/diagnose.py measures."""

    horizons: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    """Window lengths at which gradient statistics are taken."""
    num_envs: int = 8
    """Environments per seed."""
    seeds: int = 8
    """Independent rollouts (initial states and action noise) for the variance across seeds."""
    compare_smoothing: bool = True
    """Measure none, soft and straight_through side by side (soft parameters from `smoothing`)."""
    run_dir: str = ""
    """A training run whose final policy is diagnosed; empty: a freshly initialised policy."""


@dataclass(frozen=True)
class DiagnoseConfig(TrainConfig):
    """A training config (env, smoothing, algo networks...) plus the diagnostics' options."""

    diagnose: DiagnoseOptions = DiagnoseOptions()


def named_configs(hint: object) -> type | None:
    """The dataclass X of a `dict[str, X]` type hint (named configurations of one kind); else None."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is dict and len(args) == 2 and dataclasses.is_dataclass(args[1]):
        return args[1]
    return None


def from_dict(cls: type, values: dict, prefix: str = ""):
    """The frozen `cls` from a plain dict such as `config.json` holds (lists become tuples).

    Raises:
        ConfigError: a key that is not a field of `cls` (e.g. added with `+key=value`).
    """
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in values.items():
        if name not in hints:
            raise ConfigError(unknown_key_message(f"{prefix}{name}", cls))
        if dataclasses.is_dataclass(hints[name]):
            value = from_dict(hints[name], value, f"{prefix}{name}.")
        elif named_configs(hints[name]) is not None:
            entry = named_configs(hints[name])
            value = {key: from_dict(entry, v, f"{prefix}{name}.{key}.") for key, v in value.items()}
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def unknown_key_message(key: str, cls: type) -> str:
    """'unknown key ...' naming the closest field of the config dataclass `cls` that should hold `key`."""
    name = key.rsplit(".", 1)[-1]
    fields = [f.name for f in dataclasses.fields(cls)]
    close = difflib.get_close_matches(name, fields, n=1)
    hint = f"; did you mean '{key[: -len(name)]}{close[0]}'?" if close else ""
    section = f"'{key[: -len(name) - 1]}'" if "." in key else "the config"
    return f"unknown key '{key}'{hint} (keys of {section}: {', '.join(fields)})"


def to_train_config(values: dict, cls: type[TrainConfig] = TrainConfig) -> TrainConfig:
    """Validates a config's plain-dict form and returns it frozen, as `cls`.

    Raises:
        ConfigError: naming the first bad value and what would be accepted.
    """
    try:
        config = from_dict(cls, values)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    validate(config)
    return config


def validate_distributed(cfg: DistributedConfig) -> None:
    """Raises ConfigError for a process count or index out of range."""
    if cfg.num_processes is not None and cfg.num_processes < 1:
        raise ConfigError(f"distributed.num_processes must be >= 1, got {cfg.num_processes}")
    if cfg.process_id is not None and not 0 <= cfg.process_id < (cfg.num_processes or math.inf):
        raise ConfigError(
            f"distributed.process_id must be in [0, distributed.num_processes={cfg.num_processes}), "
            f"got {cfg.process_id}"
        )


def validate(cfg: TrainConfig) -> None:
    """Raises ConfigError for the first value out of range."""
    if cfg.env.name not in envs.names():
        raise ConfigError(f"unknown env '{cfg.env.name}'; available: {', '.join(envs.names())}")
    algo = cfg.algo
    positive = {
        "algo.num_envs": algo.num_envs,
        "algo.horizon": algo.horizon,
        "algo.max_epochs": algo.max_epochs,
        "algo.actor_lr": algo.actor_lr,
        "algo.critic_lr": algo.critic_lr,
        "algo.actor_grad_norm": algo.actor_grad_norm,
        "algo.critic_iterations": algo.critic_iterations,
        "algo.critic_minibatches": algo.critic_minibatches,
        "eval.episodes": cfg.eval.episodes,
        "logger.log_every": cfg.logger.log_every,
        "logger.progress_every": cfg.logger.progress_every,
        "checkpoint.max_to_keep": cfg.checkpoint.max_to_keep,
    }
    if cfg.env.max_velocity is not None:
        positive["env.max_velocity"] = cfg.env.max_velocity
    if cfg.env.episode_length is not None:
        positive["env.episode_length"] = cfg.env.episode_length
    for name, value in positive.items():
        if not value > 0:
            raise ConfigError(f"{name} must be > 0, got {value}")
    for name, value in {"algo.gamma": algo.gamma, "algo.lam": algo.lam}.items():
        if not 0.0 < value <= 1.0:
            raise ConfigError(f"{name} must be in (0, 1], got {value}")
    choices = {
        "algo.name": (algo.name, ALGORITHMS),
        "algo.critic_combine": (algo.critic_combine, CRITIC_COMBINES),
        "algo.activation": (algo.activation, ACTIVATIONS),
    }
    for name, (value, accepted) in choices.items():
        if value not in accepted:
            raise ConfigError(f"unknown {name} '{value}'; available: {', '.join(accepted)}")
    if algo.num_critics not in (1, 2):
        raise ConfigError(f"algo.num_critics must be 1 or 2, got {algo.num_critics}")
    non_negative_algo = {
        "algo.critic_grad_norm": algo.critic_grad_norm,
        "algo.weight_decay": algo.weight_decay,
        "algo.ahac.horizon_lr": algo.ahac.horizon_lr,
        "algo.ahac.critic_tolerance": algo.ahac.critic_tolerance,
        "algo.sapo.temperature_lr": algo.sapo.temperature_lr,
    }
    for name, value in non_negative_algo.items():
        if not value >= 0:
            raise ConfigError(f"{name} must be >= 0, got {value}")
    for name, value in {
        "algo.ahac.stiffness_threshold": algo.ahac.stiffness_threshold,
        "algo.sapo.init_temperature": algo.sapo.init_temperature,
    }.items():
        if not value > 0:
            raise ConfigError(f"{name} must be > 0, got {value}")
    if algo.name == "ahac" and not 1 <= algo.ahac.min_horizon <= algo.horizon:
        raise ConfigError(f"algo.ahac.min_horizon={algo.ahac.min_horizon} must be in [1, algo.horizon={algo.horizon}]")
    if algo.critic_target == "td_lambda" and algo.lam == 1.0:
        raise ConfigError("algo.lam must be < 1 with algo.critic_target=td_lambda, got 1.0")
    if algo.critic_target not in CRITIC_TARGETS:
        raise ConfigError(f"unknown algo.critic_target '{algo.critic_target}'; available: {', '.join(CRITIC_TARGETS)}")
    if not 0.0 <= algo.target_alpha < 1.0:
        raise ConfigError(f"algo.target_alpha must be in [0, 1), got {algo.target_alpha}")
    for name, betas in {"algo.adam_b1": algo.adam_b1, "algo.adam_b2": algo.adam_b2}.items():
        if not 0.0 <= betas < 1.0:
            raise ConfigError(f"{name} must be in [0, 1), got {betas}")
    for name, widths in {"algo.actor_hidden": algo.actor_hidden, "algo.critic_hidden": algo.critic_hidden}.items():
        if not all(w > 0 for w in widths):
            raise ConfigError(f"{name} widths must be > 0, got {list(widths)}")
    if algo.action_mean_penalty < 0:
        raise ConfigError(f"algo.action_mean_penalty must be >= 0, got {algo.action_mean_penalty}")
    if algo.checkpoint_every < 0 or (algo.checkpoint_every and algo.horizon % algo.checkpoint_every):
        raise ConfigError(
            f"algo.checkpoint_every={algo.checkpoint_every} must be 0 (off) or divide algo.horizon={algo.horizon}"
        )
    samples = algo.num_envs * algo.horizon
    if samples % algo.critic_minibatches:
        raise ConfigError(
            f"algo.critic_minibatches={algo.critic_minibatches} must divide num_envs * horizon = {samples}"
        )
    non_negative = {
        "eval.every": cfg.eval.every,
        "logger.video_every": cfg.logger.video_every,
        "checkpoint.every": cfg.checkpoint.every,
        "train.max_bad_epochs": cfg.train.max_bad_epochs,
    }
    for name, value in non_negative.items():
        if value < 0:
            raise ConfigError(f"{name} must be >= 0, got {value}")
    if cfg.logger.mode not in LOGGER_MODES:
        raise ConfigError(f"unknown logger.mode '{cfg.logger.mode}'; available: {', '.join(LOGGER_MODES)}")
    if cfg.precision not in PRECISIONS:
        raise ConfigError(f"unknown precision '{cfg.precision}'; available: {', '.join(PRECISIONS)}")
    if cfg.randomization.mode not in RANDOMIZATION_MODES:
        raise ConfigError(
            f"unknown randomization.mode '{cfg.randomization.mode}'; available: {', '.join(RANDOMIZATION_MODES)}"
        )
    try:
        episode_length = make_env(cfg.env, cfg.randomization, cfg.smoothing).episode_length
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from None
    if algo.horizon > episode_length:
        raise ConfigError(
            f"algo.horizon={algo.horizon} is longer than the episode of '{cfg.env.name}' ({episode_length} steps)"
        )


def make_env(
    env_cfg: EnvConfig, randomization: RandomizationConfig | None = None, smoothing: Smoothing | None = None
) -> "envs.MjxEnv":
    """The environment an `EnvConfig` names, with its overrides, domain randomisation and contact smoothing."""
    overrides = {} if env_cfg.episode_length is None else {"episode_length": env_cfg.episode_length}
    if env_cfg.substeps is not None:
        overrides["substeps"] = env_cfg.substeps
    if env_cfg.physics:
        overrides["physics"] = env_cfg.physics
    env = envs.make(env_cfg.name, **overrides)
    env.unroll_substeps = env_cfg.unroll_substeps
    if env_cfg.max_velocity is not None:
        env.max_velocity = env_cfg.max_velocity
    if smoothing is not None:
        env.smooth(smoothing)
    if randomization is not None and randomization.mode != "none":
        env.randomize(randomization_ranges(randomization))
    return env


def randomization_ranges(cfg: RandomizationConfig) -> dict[str, tuple[float, float]]:
    """Parameter ranges of a uniform or from_sysid randomisation.

    Raises:
        ValueError: no ranges, or a report without parameters. FileNotFoundError: no report.
    """
    if cfg.mode == "uniform":
        if not cfg.ranges:
            raise ValueError(
                "randomization.mode=uniform needs randomization.ranges, e.g. {joint:hinge:damping: [0.02, 0.08]}"
            )
        for key, bounds in cfg.ranges.items():
            if len(bounds) != 2:
                raise ValueError(f"randomization.ranges['{key}'] must be [low, high], got {list(bounds)}")
        return {key: (float(low), float(high)) for key, (low, high) in cfg.ranges.items()}
    if not cfg.report:
        raise ValueError("randomization.mode=from_sysid needs randomization.report=<path of a sysid.json>")
    path = Path(cfg.report)
    if not path.is_file():
        raise FileNotFoundError(f"randomization.report: no sysid report at '{cfg.report}'")
    report = json.loads(path.read_text())
    parameters = report.get("parameters", {})
    if not parameters:
        raise ValueError(f"randomization.report '{cfg.report}' holds no parameters")
    if report.get("converged") is False:
        raise ValueError(
            f"randomization.report '{cfg.report}' is from a sysid fit that did not converge; its intervals are "
            "unreliable: refit (launch/sysid.py steps=...) or set ranges with randomization=uniform"
        )
    return {
        key: (
            entry["estimate"] * math.exp(-cfg.num_std * entry["relative_std"]),
            entry["estimate"] * math.exp(cfg.num_std * entry["relative_std"]),
        )
        for key, entry in parameters.items()
    }
