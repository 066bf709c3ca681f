"""Hydra's side of the run configuration: the schemas Hydra composes onto, and back to frozen configs.

`configs/config.yaml` (and `diagnose.yaml`, `benchmark.yaml`) extend schemas that
`register_configs` stores in Hydra's ConfigStore; Hydra rejects unknown keys and
wrong types at compose time. `to_config` turns a composed `DictConfig` into the
frozen, validated dataclass of `shac.config`; `split_launch_config` separates the
options of one `launch/train.py` invocation from the run's config; `apply_overrides`
applies command-line `key=value` overrides to a saved config (resuming a run);
`check_override_keys` rejects unknown keys in one line before Hydra composes.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from collections.abc import Collection, Sequence
from pathlib import Path

from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from envs import private_apis
from shac.config import (
    ConfigError,
    DiagnoseConfig,
    LaunchOptions,
    TrainConfig,
    from_dict,
    named_configs,
    to_train_config,
    unknown_key_message,
)


def register_configs() -> None:
    """Registers the schemas that `configs/config.yaml` and `configs/diagnose.yaml` extend.

    `base_config` is `TrainConfig` with the `LaunchOptions` fields at the top level.
    """
    ConfigStore.instance().store(name="base_config", node=schema(TrainConfig, extra=LaunchOptions))
    ConfigStore.instance().store(name="base_diagnose_config", node=schema(DiagnoseConfig))


def schema(cls: type, extra: type | None = None) -> type:
    """A mutable twin of a frozen config dataclass, for Hydra to merge into.

    OmegaConf marks nodes built from frozen dataclasses read-only, which makes
    Hydra's defaults list unable to override them; the twin has the same
    fields, types and defaults (nested configs become twins too), plus the
    fields of `extra`.
    """
    fields = []
    for source in (cls, extra) if extra is not None else (cls,):
        hints = typing.get_type_hints(source)
        for f in dataclasses.fields(source):
            if dataclasses.is_dataclass(hints[f.name]):
                twin = schema(hints[f.name])
                fields.append((f.name, twin, dataclasses.field(default_factory=twin)))
            elif named_configs(hints[f.name]) is not None:
                twin = schema(named_configs(hints[f.name]))
                fields.append((f.name, dict[str, twin], dataclasses.field(default_factory=dict)))
            elif f.default_factory is not dataclasses.MISSING:
                fields.append((f.name, hints[f.name], dataclasses.field(default_factory=f.default_factory)))
            else:
                fields.append((f.name, hints[f.name], dataclasses.field(default=f.default)))
    return dataclasses.make_dataclass(cls.__name__, fields)


def to_config(cfg: DictConfig, cls: type[TrainConfig] = TrainConfig) -> TrainConfig:
    """The composed `cfg` as a frozen, validated `cls`.

    Raises:
        ConfigError: naming the first bad value and what would be accepted.
    """
    return to_train_config(OmegaConf.to_container(cfg, resolve=True), cls)


def split_launch_config(cfg: DictConfig) -> tuple[dict, LaunchOptions]:
    """Separates what `launch/train.py` composed into the run's config (a plain dict) and its options.

    Raises:
        ConfigError: a `distributed.*` value out of range (the run's config is validated later).
    """
    values = OmegaConf.to_container(cfg, resolve=True)
    return values, from_dict(LaunchOptions, {f.name: values.pop(f.name) for f in dataclasses.fields(LaunchOptions)})


def command_line_overrides(argv: Sequence[str]) -> list[str]:
    """The Hydra overrides of a launcher's command line: its `key=value` arguments, not `-` flags."""
    return [a for a in argv if "=" in a and not a.startswith("-")]


def _with_override(argv: list[str], override: str) -> list[str]:
    """`argv` with `override` just before its first override, so that the overrides stay together for
    Hydra's parser (`-m` and `--cfg job` may come before or after them)."""
    first = argv.index(command_line_overrides(argv)[0])
    return [*argv[:first], override, *argv[first:]]


def parse_overrides(overrides: Sequence[str]) -> list:
    """Hydra's parse of each override string (`key=value`, `group=option`, ...) that parses: a malformed
    one is left out, for Hydra's own message to say where it is wrong."""
    parsed = []
    for text in overrides:
        try:
            parsed += private_apis.parse_hydra_overrides([text])
        except HydraException:
            continue
    return parsed


def check_override_keys(overrides: Sequence[str], groups: Sequence[str] = ()) -> None:
    """Raises ConfigError for a command-line override whose key the schema lacks, added (`+`) or not.

    Hydra reports `algo.horizn=8` in several lines and accepts `+algo.horizn=8`;
    this gives both the same one line. Keys under a free-form dict
    (`randomization.ranges`), of Hydra itself (`hydra.*`) and config-group
    choices (`env=ant`, `hydra/launcher=slurm`) and syntax errors are left to Hydra.

    Args:
        overrides: Hydra override strings (arguments that are not `-` flags).
        groups: names of the config groups (`env`, `algo`, `preset`, ...).
    """
    parsed = parse_overrides(overrides)
    top = schema(TrainConfig, extra=LaunchOptions)
    for override in parsed:
        key = override.key_or_group
        if override.is_delete() or key.split(".")[0] == "hydra" or "/" in key or key in groups:
            continue
        cls, parts = top, key.split(".")
        for depth, name in enumerate(parts):
            hints = typing.get_type_hints(cls)
            if name not in hints:
                message = unknown_key_message(".".join(parts[: depth + 1]), cls)
                raise ConfigError(f"'{override.input_line}': {message}")
            if not dataclasses.is_dataclass(hints[name]):
                break  # a value, or a dict whose keys are free
            cls = hints[name]


def implied_env_config(overrides: Sequence[str], env_configs: Collection[str]) -> str | None:
    """The env config (`env=<config>`) a command line means when it names a task but no env config.

    `env.name=ant` alone would otherwise train the Ant with the default task's (the cart-pole's)
    hyperparameters. A task with a config of its own implies it (`ant`); a MuJoCo Playground task,
    `playground`; any other task (a user's `package.module:Class`, an entry point's name), `custom`: the
    one default setting of every Playground task.

    Args:
        overrides: Hydra override strings (arguments that are not `-` flags).
        env_configs: the names of the env configs (`configs/env/*.yaml`).

    Returns:
        The env config's name; None when the command line picks an env config itself, names no task,
        sweeps over several (a multirun list) or resumes a run (whose config is already whole).
    """
    parsed = parse_overrides(overrides)
    keys = {override.key_or_group: override for override in parsed}
    task = keys.get("env.name")
    if "env" in keys or "resume" in keys or task is None or not isinstance(task.value(), str):
        return None
    name = task.value()
    if name in env_configs:
        return name
    return "playground" if name.startswith("playground/") else "custom"


def with_implied_env_config(argv: list[str], config_dir: Path) -> list[str]:
    """`argv` (a launcher's command line after the script) with `env=<config>` among its overrides when it
    names a task without an env config (`implied_env_config`); a line on stderr says which config it took."""
    env_configs = [p.stem for p in (config_dir / "env").glob("*.yaml")]
    implied = implied_env_config(command_line_overrides(argv), env_configs)
    if implied is None:
        return argv
    print(f"env.name without env=: using env={implied} (configs/env/{implied}.yaml)", file=sys.stderr)
    return _with_override(argv, f"env={implied}")


def with_sweep_dir_names(argv: list[str]) -> list[str]:
    """`argv` of a multirun (`-m`) with the overrides every job shares left out of the jobs' directory names
    (`hydra.job.override_dirname`, `configs/config.yaml`'s sweep subdir): `<job number>_<swept overrides>`
    (`4_algo.horizon=32,seed=1`), short however many values the command line sets (a file name takes at most
    255 bytes). Unchanged outside a multirun, or where the command line sets the excluded keys itself."""
    if not any(a in ("-m", "--multirun") for a in argv):
        return argv
    parsed = parse_overrides(command_line_overrides(argv))
    if any(o.key_or_group.startswith("hydra.job.config.override_dirname") for o in parsed):
        return argv
    shared = sorted(
        o.key_or_group for o in parsed if not o.is_sweep_override() and not o.key_or_group.startswith("hydra")
    )
    if not shared:
        return argv
    return _with_override(argv, f"hydra.job.config.override_dirname.exclude_keys=[{','.join(shared)}]")


def apply_overrides(config: TrainConfig, overrides: Sequence[str]) -> TrainConfig:
    """`config` with command-line `key=value` overrides applied, validated (used to resume a run).

    Args:
        config: the run's config.
        overrides: Hydra override strings, e.g. `["algo.max_epochs=400", "logger.mode=disabled"]`.

    Raises:
        ConfigError: for a config-group choice (`logger=disabled`), an added or
            deleted key, an unknown key or a mistyped value.
    """
    cfg = OmegaConf.merge(OmegaConf.structured(schema(TrainConfig)), dataclasses.asdict(config))
    try:
        parsed = private_apis.parse_hydra_overrides(list(overrides))
    except HydraException as e:
        raise ConfigError(f"bad override: {e}") from None
    for override in parsed:
        key, text = override.key_or_group, override.input_line
        if override.is_add() or override.is_delete() or override.is_force_add():
            raise ConfigError(f"'{text}': only key=value overrides can change a resumed run's config")
        if OmegaConf.is_dict(OmegaConf.select(cfg, key)):
            raise ConfigError(
                f"'{text}' picks a config group, which cannot change a resumed run's config; "
                f"set its values by key instead, e.g. {key}.<field>=<value>"
            )
        try:
            OmegaConf.update(cfg, key, override.value(), merge=False)
        except OmegaConfBaseException as e:
            raise ConfigError(f"'{text}': {e}".splitlines()[0]) from None
    return to_train_config(OmegaConf.to_container(cfg, resolve=True))
