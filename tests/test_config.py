"""Hydra composition of every config, overrides, and one-line errors for bad values."""

import dataclasses
import re
from pathlib import Path

import jax.numpy as jnp
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from mujoco import mjx

import envs
from envs import State
from shac.config import AlgoConfig, ConfigError, DistributedConfig, EnvConfig, TrainConfig, make_env, to_train_config
from shac.run.hydra_config import (
    apply_overrides,
    check_override_keys,
    implied_env_config,
    register_configs,
    split_launch_config,
    with_implied_env_config,
    with_sweep_dir_names,
)
from tests.forked_python import run_python

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
register_configs()


def compose_config(*overrides):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base=None):
        return compose(config_name="config", overrides=list(overrides))


def load(*overrides):
    values, _ = split_launch_config(compose_config(*overrides))
    return to_train_config(values)


def options(group):
    return sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))


def test_every_env_has_a_config_and_every_config_an_env():
    # env=playground is the one setting of every Playground task (env.name=playground/<Name>), env=custom the
    # same setting for a task of one's own
    assert options("env") == sorted([*envs.names(), "playground", "custom"])


USER_ENV = "tests.user_envs:ShortPendulum"


@pytest.mark.parametrize("env", options("env"))
@pytest.mark.parametrize("logger", options("logger"))
@pytest.mark.parametrize("algo", options("algo"))
def test_every_config_composes(env, logger, algo):
    # a class by its path for env=custom, with episodes of 100 steps (AHAC's longest window is 64)
    name = {"playground": "playground/CartpoleSwingup", "custom": "envs.pendulum_swingup:PendulumSwingUp"}.get(env, env)
    config = load(f"env={env}", f"logger={logger}", f"algo={algo}", *([f"env.name={name}"] if env == "custom" else []))
    assert config.env.name == name
    assert config.logger.mode == logger


@pytest.mark.parametrize(
    ("overrides", "implied"),
    [
        (["env.name=ant"], "ant"),  # the Ant with its own hyperparameters, not the default cart-pole's
        ([f"env.name={USER_ENV}", "algo.horizon=8"], "custom"),
        (["env.name=playground/CheetahRun"], "playground"),
        (["env=hopper", "env.name=ant"], None),  # an env config chosen on the command line stays
        (["algo.horizon=8"], None),  # no task named: the default task and its config
        (["env.name=ant,hopper"], None),  # a multirun sweep over tasks
        (["resume=runs/ant", "env.name=ant"], None),  # a resumed run's config is whole (and its group fixed)
    ],
)
def test_a_task_named_without_an_env_config_implies_its_own_or_the_one_default_setting(overrides, implied):
    assert implied_env_config(overrides, options("env")) == implied


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["env.name=ant", "--cfg", "job"], ["env=ant", "env.name=ant", "--cfg", "job"]),
        (["-m", f"env.name={USER_ENV}", "seed=0,1"], ["-m", "env=custom", f"env.name={USER_ENV}", "seed=0,1"]),
        (["-m", "seed=0,1"], ["-m", "seed=0,1"]),
    ],
)
def test_the_implied_env_config_joins_the_overrides_where_hydras_parser_takes_them(argv, expected):
    assert with_implied_env_config(argv, CONFIGS) == expected


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["-m", "seed=0,1", "algo.horizon=8", "env=custom", "hydra.sweep.dir=s"],
            [
                "-m",
                "hydra.job.config.override_dirname.exclude_keys=[algo.horizon,env]",
                "seed=0,1",
                "algo.horizon=8",
                "env=custom",
                "hydra.sweep.dir=s",
            ],
        ),
        (["seed=0", "algo.horizon=8"], ["seed=0", "algo.horizon=8"]),  # not a multirun
        (["-m", "seed=0,1", "hydra.job.config.override_dirname.exclude_keys=[seed]"], None),  # the user's own choice
    ],
)
def test_a_sweeps_directory_names_hold_the_swept_overrides_alone(argv, expected):
    assert with_sweep_dir_names(argv) == (argv if expected is None else expected)


def test_the_custom_setting_is_playgrounds_and_needs_a_task():
    assert load("env=custom", f"env.name={USER_ENV}").algo == load("env=playground").algo
    with pytest.raises(ConfigError, match=r"^no env named \(env.name is empty\); available: ant, "):
        load("env=custom")


def test_ahac_takes_its_stiffness_threshold_from_the_task():
    assert load("env=ant", "algo=ahac").algo.ahac.stiffness_threshold == 20.0
    assert load("env=hopper", "algo=ahac").algo.ahac.stiffness_threshold == 500.0  # none set: the reference's
    assert load("env=ant", "algo=ahac", "algo.ahac.stiffness_threshold=50").algo.ahac.stiffness_threshold == 50.0


def test_paper_cartpole_settings_are_the_default():
    config = load()
    assert config.env.name == "cartpole_swingup"
    algo = config.algo
    assert (algo.num_envs, algo.horizon, algo.max_epochs) == (64, 32, 500)
    assert (algo.actor_lr, algo.critic_lr, algo.target_alpha) == (1e-2, 1e-3, 0.2)
    assert (algo.gamma, algo.lam, algo.critic_iterations, algo.critic_minibatches) == (0.99, 0.95, 16, 4)
    assert (algo.adam_b1, algo.adam_b2, algo.actor_grad_norm) == (0.7, 0.95, 1.0)
    assert algo.actor_hidden == (64, 64) and algo.critic_hidden == (64, 64)


def test_command_line_overrides_win_over_env_defaults():
    config = load("env=cartpole_swingup", "algo.horizon=16", "algo.num_envs=128", "seed=3")
    assert (config.algo.horizon, config.algo.num_envs, config.seed) == (16, 128, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 4


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "env.name=antt",
            "unknown env 'antt'; available: ant, arm_reach, cartpole_swingup, half_cheetah, hopper, humanoid, "
            "pendulum_swingup",
        ),
        ("algo.horizon=0", "algo.horizon must be > 0, got 0"),
        ("algo.num_envs=-4", "algo.num_envs must be > 0, got -4"),
        ("algo.max_env_steps=0", r"algo.max_env_steps must be > 0, or null for no step budget; got 0"),
        ("algo.gamma=1.5", r"algo.gamma must be in \(0, 1\], got 1.5"),
        ("algo.lam=0", r"algo.lam must be in \(0, 1\], got 0.0"),
        ("algo.horizon=300", r"algo.horizon=300 is longer than the episode of 'cartpole_swingup' \(240 steps\)"),
        ("logger.mode=cloud", "unknown logger.mode 'cloud'; available: offline, online, disabled"),
        ("eval.episode_length=0", r"eval.episode_length must be > 0, got 0"),
        ("algo.critic_minibatches=3", "algo.critic_minibatches=3 must divide num_envs \\* horizon = 2048"),
        (
            "algo.actor_env_clip_quantile=1.5",
            r"algo.actor_env_clip_quantile must be 0 \(off\) or in \(0, 1\], got 1.5",
        ),
        ("algo.remat_every=5", r"algo.remat_every=5 must be 0 \(off\) or divide algo.horizon=32"),
        ("algo.state_grad_decay=0", r"algo.state_grad_decay must be in \(0, 1\] \(1: the exact gradient\), got 0.0"),
        ("checkpoint.every=-1", "checkpoint.every must be >= 0, got -1"),
        ("checkpoint.max_to_keep=0", "checkpoint.max_to_keep must be > 0, got 0"),
        ("logger.video_every=-5", "logger.video_every must be >= 0, got -5"),
        ("algo.name=ppo", "unknown algo.name 'ppo'; available: shac, ahac, sapo"),
        ("algo.num_critics=0", "algo.num_critics must be >= 1, got 0"),
        ("algo.activation=relu", "unknown algo.activation 'relu'; available: elu, silu"),
        ("algo.sapo.init_temperature=0", "algo.sapo.init_temperature must be > 0, got 0"),
        ("algo=ahac algo.ahac.min_horizon=80", r"algo.ahac.min_horizon=80 must be in \[1, algo.horizon=64\]"),
        ("train.max_bad_epochs=-1", "train.max_bad_epochs must be >= 0, got -1"),
        ("env.max_velocity=0", "env.max_velocity must be > 0, got 0"),
    ],
)
def test_bad_values_fail_with_a_message_naming_them(override, message):
    with pytest.raises(ConfigError, match=message):
        load(*override.split())


def test_unknown_and_mistyped_keys_fail_at_compose():
    with pytest.raises(ConfigCompositionException):
        load("algo.horizn=16")
    with pytest.raises(ConfigCompositionException):
        load("algo.horizon=sixteen")


ALGO_KEYS = ", ".join(f.name for f in dataclasses.fields(AlgoConfig))


@pytest.mark.parametrize("override", ["algo.horizn=8", "+algo.horizn=8", "++algo.horizn=8"])
def test_an_unknown_key_is_one_error_whether_added_or_set(override):
    message = f"'{override}': unknown key 'algo.horizn'; did you mean 'algo.horizon'? (keys of 'algo': {ALGO_KEYS})"
    with pytest.raises(ConfigError) as error:
        check_override_keys([override], groups=["algo", "env"])
    assert str(error.value) == message


def test_known_keys_groups_and_free_form_dicts_pass_the_key_check():
    check_override_keys(
        [
            "env=ant",
            "algo.horizon=8",
            "++randomization.ranges={joint\\:hinge\\:damping:[0.1,0.2]}",
            "+randomization.ranges.anything=[0.1,0.2]",
            "hydra.run.dir=/tmp/x",
            "hydra/launcher=slurm",
            "resume=runs/x",
            "distributed.process_id=1",
            "train.max_bad_epochs=5",
            "~logger",
        ],
        groups=["algo", "env", "logger"],
    )


def test_a_key_added_to_a_composed_config_is_an_unknown_key():
    values = dataclasses.asdict(TrainConfig())
    values["algo"]["horizn"] = 8  # what `+algo.horizn=8` composes
    with pytest.raises(ConfigError, match=r"^unknown key 'algo.horizn'; did you mean 'algo.horizon'\?"):
        to_train_config(values)


def test_train_cli_reports_a_config_error_in_one_line():
    result = run_python("launch/train.py", "algo.horizon=-1", timeout=120)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == "config error: algo.horizon must be > 0, got -1"


def test_a_tasks_config_overrides_the_entry_configs_own_values():
    assert to_train_config(split_launch_config(compose_config())[0]).checkpoint.every == 50
    assert to_train_config(split_launch_config(compose_config("env=ant"))[0]).checkpoint.every == 1000
    assert to_train_config(split_launch_config(compose_config("env=hopper"))[0]).checkpoint.every == 250


def test_launch_options_are_split_from_the_run_config():
    values, options = split_launch_config(compose_config("resume=runs/x", "compile_cache=off", "checkpoint.every=7"))
    assert (options.resume, options.compile_cache) == ("runs/x", "off")
    assert "resume" not in values and "compile_cache" not in values
    assert to_train_config(values).checkpoint.every == 7


def test_distributed_options_are_launch_options():
    values, options = split_launch_config(
        compose_config("distributed.enabled=true", "distributed.num_processes=4", "distributed.process_id=3")
    )
    assert options.distributed == DistributedConfig(enabled=True, num_processes=4, process_id=3)
    assert "distributed" not in values
    assert split_launch_config(compose_config())[1].distributed == DistributedConfig()  # off, all detected


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["distributed.num_processes=0"], "distributed.num_processes must be >= 1, got 0"),
        (
            ["distributed.num_processes=2", "distributed.process_id=2"],
            r"distributed.process_id must be in \[0, distributed.num_processes=2\), got 2",
        ),
    ],
)
def test_bad_distributed_options_fail_with_a_message(overrides, message):
    with pytest.raises(ConfigError, match=message):
        split_launch_config(compose_config(*overrides))


def test_resume_overrides_change_values_by_key():
    config = apply_overrides(
        TrainConfig(), ["algo.max_epochs=900", "logger.mode=disabled", "algo.actor_hidden=[32,32]", "seed=5"]
    )
    assert (config.algo.max_epochs, config.logger.mode, config.algo.actor_hidden, config.seed) == (
        900,
        "disabled",
        (32, 32),
        5,
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("logger=disabled", "'logger=disabled' picks a config group.*e.g. logger.<field>=<value>"),
        ("algo.horizn=16", "'algo.horizn=16': Key 'horizn' not in 'AlgoConfig'"),
        ("algo.horizon=sixteen", "'algo.horizon=sixteen': Value 'sixteen' of type 'str' could not be converted"),
        ("+algo.extra=1", "only key=value overrides can change a resumed run's config"),
        ("algo.horizon=0", "algo.horizon must be > 0, got 0"),
    ],
)
def test_bad_resume_overrides_fail_with_a_message(override, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(TrainConfig(), [override])


def test_every_way_of_building_a_config_is_checked():
    with pytest.raises(ConfigError, match=re.escape("algo.horizon must be > 0, got 0")):
        AlgoConfig(horizon=0)
    with pytest.raises(ConfigError, match=re.escape("unknown logger.mode 'cloud'")):
        dataclasses.replace(TrainConfig().logger, mode="cloud")
    with pytest.raises(ConfigError, match=re.escape("unknown precision 'float16'")):
        to_train_config({"precision": "float16"})


def test_the_old_name_of_remat_every_still_works_with_a_warning():
    with pytest.warns(FutureWarning, match="algo.checkpoint_every is deprecated: it is algo.remat_every"):
        config = load("algo.checkpoint_every=8")
    assert (config.algo.remat_every, config.algo.checkpoint_every) == (8, None)


def test_the_velocity_bound_defaults_per_env_class_and_is_overridden_by_config():
    assert make_env(EnvConfig(name="pendulum_swingup")).max_velocity == envs.MjxEnv.max_velocity == 1000.0
    env = make_env(EnvConfig(name="pendulum_swingup", max_velocity=5.0))
    data = mjx.make_data(env.mjx_model)
    state = State(pipeline_state=data, obs=jnp.zeros(3), reward=0.0, done=0.0, terminated=0.0, truncated=0.0)
    assert not env.too_fast(state.replace(pipeline_state=data.replace(qvel=jnp.array([-4.9]))))
    assert env.too_fast(state.replace(pipeline_state=data.replace(qvel=jnp.array([-5.1]))))
