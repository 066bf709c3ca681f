"""Typed run configuration: frozen dataclasses, a docstring under every field, each checking itself.

Plain Python (no Hydra): every dataclass validates its values in `__post_init__`,
so each way of building one (Hydra's composition through `shac.run.hydra_config`,
a run's `config.json` through `to_train_config`, `dataclasses.replace`, a test)
raises `ConfigError` for the first bad value, naming it and what is accepted,
before anything compiles. `TrainConfig` checks what spans its parts (the horizon
against the environment's declared episode length, read from its class without
building a model).
"""

import dataclasses
import difflib
import json
import math
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def _check(condition: bool, message: str) -> None:
    """Raises ConfigError(message) unless `condition`."""
    if not condition:
        raise ConfigError(message)


def _check_positive(values: dict[str, float]) -> None:
    for name, value in values.items():
        _check(value > 0, f"{name} must be > 0, got {value}")


def _check_non_negative(values: dict[str, float]) -> None:
    for name, value in values.items():
        _check(value >= 0, f"{name} must be >= 0, got {value}")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    _check(value in choices, f"unknown {name} '{value}'; available: {', '.join(choices)}")


@dataclass(frozen=True)
class EnvConfig:
    """Which environment to train on."""

    name: str = "cartpole_swingup"
    """A registered environment (see `envs.names()`), a MuJoCo Playground task `playground/<Name>`
    (docs/playground.md), an installed package's `shac.envs` entry point, or `package.module:Class`
    (docs/tasks.md, "Adding an environment")."""
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
    obs_key: str | None = None
    """The entry of a dictionary observation the policy sees (Playground's locomotion tasks:
    `state`, `privileged_state`); None: the environment's own choice (Playground: `state`)."""
    config_overrides: dict[str, Any] = field(default_factory=dict)
    """Values of a Playground task's own config, by Playground's key (e.g. `{ctrl_dt: 0.02}`);
    `impl` can only be `jax`. Empty for every other environment."""
    reward_margin: float | None = None
    """Playground tasks: > 0 differentiates each reward tolerance a task defines without a margin (flat,
    a zero gradient, outside its bounds) as a long-tailed one with this margin (in the units of what
    it bounds: metres, a cosine, ...), its value unchanged (docs/playground.md, "Flat rewards");
    None keeps the environment's default (Playground: 0, off). Other environments refuse it."""

    def __post_init__(self):
        try:
            envs.resolve(self.name)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if self.episode_length is not None:
            _check_positive({"env.episode_length": self.episode_length})
        if self.substeps is not None:
            _check(self.substeps >= 1, f"env.substeps must be >= 1, got {self.substeps}")
        if self.max_velocity is not None:
            _check_positive({"env.max_velocity": self.max_velocity})

    def declared_episode_length(self) -> int | None:
        """Control steps per episode of this environment, from its class (no model is built); None if undeclared."""
        return self.episode_length if self.episode_length is not None else envs.declared_episode_length(self.name)

    def with_episode_length(self, episode_length: int | None) -> "EnvConfig":
        """This config with episodes of `episode_length` steps; itself when None."""
        return self if episode_length is None else dataclasses.replace(self, episode_length=episode_length)


@dataclass(frozen=True)
class AhacConfig:
    """AHAC's adaptive horizon and critic fitting (used with `algo.name=ahac`; docs/algorithms.md)."""

    min_horizon: int = 8
    """Shortest window, and the first epoch's; `algo.horizon` is the longest (the compiled window)."""
    stiffness_threshold: float = 500.0
    """The horizon grows while the window's summed contact stiffness (per env, mean over envs) is
    below this, and shrinks above it."""
    horizon_lr: float = 5e-4
    """Step of the horizon per unit of stiffness below the threshold; decays linearly to 0 like the learning rates."""
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
    budget_minutes: float | None = None
    """A training-time budget, or None: the run stops at the first epoch that ends past it, and the learning
    rates decay over it (or over `max_epochs`, whichever ends first). Training time is the epochs' wall time
    (compilation, evaluations, videos and checkpoints excluded), so the rates follow this machine's clock
    and a run is no longer reproducible bit for bit."""
    max_env_steps: int | None = None
    """An env-step budget, or None: the run stops at the first epoch that ends at or past it, and the learning
    rates decay over it (or over `max_epochs`, whichever ends first). SHAC's and SAPO's epochs are all
    `num_envs * horizon` steps, so `max_epochs` already fixes their steps; AHAC's window grows, and this is how
    its runs compare with theirs at equal env steps."""
    gamma: float = 0.99
    """Discount, in (0, 1]."""
    lam: float = 0.95
    """TD(lambda) parameter of the critic targets, in (0, 1]."""
    actor_lr: float = 2e-3
    """Initial actor learning rate; decays linearly to `min_lr` over `max_epochs` (or `budget_minutes`)."""
    critic_lr: float = 2e-3
    """Initial critic learning rate; decays like `actor_lr`, set once per epoch."""
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
    """Critics regressed onto the same targets (each initialised on its own) and combined by `critic_combine`."""
    critic_combine: str = "min"
    """How several critics make one value (bootstrap and targets): min (AHAC) or mean (SAPO)."""
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
    critic_warmup_epochs: int = 0
    """Epochs at the start that fit only the critic: the actor's gradient is computed and logged but not applied
    (`actor/frozen` 1), so its first updates follow a critic fitted to the initial policy's returns."""
    action_mean_penalty: float = 0.0
    """c >= 0: the actor loss adds c * mean(mu^2) over the window, mu the policy's mean before the tanh
    squash, so the policy stays out of saturation, where tanh (and joints pressed into their limits)
    pass no gradient. A training-only term: the task's reward and the evaluation are unchanged."""
    actor_env_clip_quantile: float = 0.0
    """q in (0, 1], or 0 (off): each env's share of the actor gradient is clipped to the q-quantile of the N
    envs' gradient norms before the shares are summed, so the few envs whose gradient explodes through their
    contacts cannot set the step's direction alone (0.5: at the median; 1: no clipping). The backward pass then
    keeps one copy of the actor's parameter gradient per env."""
    state_grad_decay: float = 1.0
    """d in (0, 1]: the gradient flowing back from each step of the window into the state it starts from (the
    simulator's state and the observation) is multiplied by d (the forward pass is unchanged), so a reward k
    steps after an action moves it with weight d^k: a soft truncation of the window, for any env. 1 (default) is
    the exact gradient. `smoothing.state_grad_decay` scales the simulator's state alone, at each physics step."""
    staggered_starts: bool = False
    """Start the N training envs at random points of their first episode (its clock set to a uniform step in
    [0, episode_length)), so their episodes end and restart at different epochs instead of all together (a
    task whose episodes never terminate otherwise restarts every env in the same epoch). Evaluation episodes
    start at step 0. Envs whose time limit reads the simulator's clock (`envs.MjxEnv`, Playground's tasks)."""
    remat_every: int = 0
    """Rematerialisation: if k > 0, the backward pass stores the env state every k steps and
    recomputes the steps between (memory nearly flat in the horizon, at a time cost: docs/benchmarks.md);
    k must divide the horizon. 0 stores every step's intermediates."""
    checkpoint_every: int | None = None
    """Deprecated name of `remat_every` (it is not about checkpoints on disk, which are
    `checkpoint.every`); accepted, with a warning, until the next release."""

    def __post_init__(self):
        if self.checkpoint_every is not None:
            _check(
                self.remat_every in (0, self.checkpoint_every),
                f"algo.checkpoint_every={self.checkpoint_every} and algo.remat_every={self.remat_every} disagree; "
                "set only algo.remat_every",
            )
            warnings.warn(
                f"algo.checkpoint_every is deprecated: it is algo.remat_every (rematerialisation); "
                f"using algo.remat_every={self.checkpoint_every}",
                FutureWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "remat_every", self.checkpoint_every)
            object.__setattr__(self, "checkpoint_every", None)
        _check_positive(
            {
                "algo.num_envs": self.num_envs,
                "algo.horizon": self.horizon,
                "algo.max_epochs": self.max_epochs,
                "algo.actor_lr": self.actor_lr,
                "algo.critic_lr": self.critic_lr,
                "algo.actor_grad_norm": self.actor_grad_norm,
                "algo.critic_iterations": self.critic_iterations,
                "algo.critic_minibatches": self.critic_minibatches,
            }
        )
        _check(
            self.budget_minutes is None or self.budget_minutes > 0,
            f"algo.budget_minutes must be > 0, or null for no budget; got {self.budget_minutes}",
        )
        _check(
            self.max_env_steps is None or self.max_env_steps > 0,
            f"algo.max_env_steps must be > 0, or null for no step budget; got {self.max_env_steps}",
        )
        for name, value in {"algo.gamma": self.gamma, "algo.lam": self.lam}.items():
            _check(0.0 < value <= 1.0, f"{name} must be in (0, 1], got {value}")
        _check_choice("algo.name", self.name, ALGORITHMS)
        _check_choice("algo.critic_combine", self.critic_combine, CRITIC_COMBINES)
        _check_choice("algo.activation", self.activation, ACTIVATIONS)
        _check(self.num_critics >= 1, f"algo.num_critics must be >= 1, got {self.num_critics}")
        _check_non_negative(
            {
                "algo.critic_grad_norm": self.critic_grad_norm,
                "algo.weight_decay": self.weight_decay,
                "algo.ahac.horizon_lr": self.ahac.horizon_lr,
                "algo.ahac.critic_tolerance": self.ahac.critic_tolerance,
                "algo.sapo.temperature_lr": self.sapo.temperature_lr,
            }
        )
        _check_positive(
            {
                "algo.ahac.stiffness_threshold": self.ahac.stiffness_threshold,
                "algo.sapo.init_temperature": self.sapo.init_temperature,
            }
        )
        _check(
            self.name != "ahac" or 1 <= self.ahac.min_horizon <= self.horizon,
            f"algo.ahac.min_horizon={self.ahac.min_horizon} must be in [1, algo.horizon={self.horizon}]",
        )
        _check_choice("algo.critic_target", self.critic_target, CRITIC_TARGETS)
        _check(
            self.critic_target != "td_lambda" or self.lam < 1.0,
            "algo.lam must be < 1 with algo.critic_target=td_lambda, got 1.0",
        )
        _check(0.0 <= self.target_alpha < 1.0, f"algo.target_alpha must be in [0, 1), got {self.target_alpha}")
        for name, beta in {"algo.adam_b1": self.adam_b1, "algo.adam_b2": self.adam_b2}.items():
            _check(0.0 <= beta < 1.0, f"{name} must be in [0, 1), got {beta}")
        for name, widths in {"algo.actor_hidden": self.actor_hidden, "algo.critic_hidden": self.critic_hidden}.items():
            _check(all(w > 0 for w in widths), f"{name} widths must be > 0, got {list(widths)}")
        _check_non_negative(
            {
                "algo.action_mean_penalty": self.action_mean_penalty,
                "algo.critic_warmup_epochs": self.critic_warmup_epochs,
            }
        )
        _check(
            0.0 <= self.actor_env_clip_quantile <= 1.0,
            f"algo.actor_env_clip_quantile must be 0 (off) or in (0, 1], got {self.actor_env_clip_quantile}",
        )
        _check(
            0.0 < self.state_grad_decay <= 1.0,
            f"algo.state_grad_decay must be in (0, 1] (1: the exact gradient), got {self.state_grad_decay}",
        )
        _check(
            self.remat_every >= 0 and (self.remat_every == 0 or self.horizon % self.remat_every == 0),
            f"algo.remat_every={self.remat_every} must be 0 (off) or divide algo.horizon={self.horizon}",
        )
        samples = self.num_envs * self.horizon
        _check(
            samples % self.critic_minibatches == 0,
            f"algo.critic_minibatches={self.critic_minibatches} must divide num_envs * horizon = {samples}",
        )


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

    def __post_init__(self):
        _check_choice("randomization.mode", self.mode, RANDOMIZATION_MODES)
        if self.mode == "uniform":
            _check(
                bool(self.ranges),
                "randomization.mode=uniform needs randomization.ranges, e.g. "
                "'++randomization.ranges={joint\\:hinge\\:damping:[0.02,0.08]}' on the command line",
            )
            for key, bounds in self.ranges.items():
                _check(len(bounds) == 2, f"randomization.ranges['{key}'] must be [low, high], got {list(bounds)}")
        if self.mode == "from_sysid":
            _check(bool(self.report), "randomization.mode=from_sysid needs randomization.report=<path of a sysid.json>")


@dataclass(frozen=True)
class EvalConfig:
    """Periodic deterministic evaluation during training."""

    every: int = 50
    """Evaluate every this many epochs (and after the last); 0 disables periodic evaluation."""
    episodes: int = 16
    """Full episodes per evaluation, run in parallel."""
    episode_length: int | None = None
    """Steps per evaluation episode and per video; None: the training episodes' (`env.episode_length`,
    else the task's own). Lets training restart its envs more often than the evaluation does."""

    def __post_init__(self):
        _check_non_negative({"eval.every": self.every})
        _check_positive({"eval.episodes": self.episodes})
        if self.episode_length is not None:
            _check_positive({"eval.episode_length": self.episode_length})


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

    def __post_init__(self):
        _check_choice("logger.mode", self.mode, LOGGER_MODES)
        _check_positive({"logger.log_every": self.log_every, "logger.progress_every": self.progress_every})
        _check_non_negative({"logger.video_every": self.video_every})


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

    def __post_init__(self):
        _check_non_negative({"checkpoint.every": self.every})
        _check_positive({"checkpoint.max_to_keep": self.max_to_keep})


@dataclass(frozen=True)
class LoopConfig:
    """How the training loop watches the run's health."""

    max_bad_epochs: int = 20
    """Stop (exit code 1, checkpointing the last good state) after this many epochs in a row that
    skipped their actor update (non-finite gradient) or reset more than half the envs as non-finite
    or too fast; 0 never stops (each bad epoch still warns)."""

    def __post_init__(self):
        _check_non_negative({"train.max_bad_epochs": self.max_bad_epochs})


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

    def __post_init__(self):
        _check_choice("precision", self.precision, PRECISIONS)
        episode_length = self.env.declared_episode_length()
        _check(
            episode_length is None or self.algo.horizon <= episode_length,
            f"algo.horizon={self.algo.horizon} is longer than the episode of '{self.env.name}' "
            f"({episode_length} steps)",
        )

    def evaluation_env(self, episode_length: int | None = None) -> EnvConfig:
        """The env config evaluations run: episodes of `episode_length` steps, else of `eval.episode_length`,
        else the training episodes'."""
        return self.env.with_episode_length(episode_length or self.eval.episode_length)


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

    def __post_init__(self):
        _check(
            self.num_processes is None or self.num_processes >= 1,
            f"distributed.num_processes must be >= 1, got {self.num_processes}",
        )
        _check(
            self.process_id is None or 0 <= self.process_id < (self.num_processes or math.inf),
            f"distributed.process_id must be in [0, distributed.num_processes={self.num_processes}), "
            f"got {self.process_id}",
        )


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
    env_shares: bool = False
    """Also split the actor gradient of the training window (algo.num_envs, algo.horizon) into each env's share:
    how unequal the shares are and how well groups of envs agree on its direction, plain and clipped
    (`algo.actor_env_clip_quantile`). One more gradient compile."""

    def __post_init__(self):
        _check(
            bool(self.horizons) and min(self.horizons) >= 1 and self.num_envs >= 1 and self.seeds >= 2,
            "diagnose: need horizons >= 1, num_envs >= 1 and seeds >= 2, "
            f"got horizons={list(self.horizons)}, num_envs={self.num_envs}, seeds={self.seeds}",
        )


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
    """A config's plain-dict form (Hydra's result, a run's `config.json`) as the frozen, validated `cls`.

    With a randomisation, also reads the sysid report it names and builds the
    environment once to check the ranges against the model (a mass stays
    positive, a gear keeps its sign), so a bad one fails here, before anything
    compiles; without one, nothing is built.

    Raises:
        ConfigError: naming the first bad value and what would be accepted.
    """
    try:
        config = from_dict(cls, values)
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e)) from None
    if config.randomization.mode != "none":
        make_env(config.env, config.randomization, config.smoothing)
    return config


def make_env(
    env_cfg: EnvConfig, randomization: RandomizationConfig | None = None, smoothing: Smoothing | None = None
) -> "envs.MjxEnv":
    """The environment an `EnvConfig` names, built once with its options, randomisation and contact smoothing.

    Raises:
        ConfigError: the environment refuses an option, or the sysid report cannot be read.
    """
    options = {"unroll_substeps": env_cfg.unroll_substeps}
    if env_cfg.episode_length is not None:
        options["episode_length"] = env_cfg.episode_length
    if env_cfg.substeps is not None:
        options["substeps"] = env_cfg.substeps
    if env_cfg.physics:
        options["physics"] = env_cfg.physics
    if env_cfg.max_velocity is not None:
        options["max_velocity"] = env_cfg.max_velocity
    if env_cfg.obs_key is not None:
        options["obs_key"] = env_cfg.obs_key
    if env_cfg.config_overrides:
        options["config_overrides"] = env_cfg.config_overrides
    if env_cfg.reward_margin is not None:
        options["reward_margin"] = env_cfg.reward_margin
    if smoothing is not None:
        options["smoothing"] = smoothing
    try:
        if randomization is not None and randomization.mode != "none":
            options["randomization"] = randomization_ranges(randomization)
        return envs.make(env_cfg.name, **options)
    except (ValueError, FileNotFoundError) as e:
        raise ConfigError(str(e)) from None


def randomization_ranges(cfg: RandomizationConfig) -> dict[str, tuple[float, float]]:
    """Parameter ranges of a uniform or from_sysid randomisation.

    Raises:
        ValueError: no ranges, or a report without parameters. FileNotFoundError: no report.
    """
    if cfg.mode == "uniform":
        return {key: (float(low), float(high)) for key, (low, high) in cfg.ranges.items()}
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
        if not key.startswith("signal:")  # the measurement model's (a control delay), not the simulated model's
    }
