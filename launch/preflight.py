"""Checks of a `launch/train.py` command line made before Hydra composes the config or creates a directory.

Hydra creates the run directory (and writes `.hydra/` into it) before the
training function starts, and reports its own errors as tracebacks or several
lines. These checks fail first, in one line, and leave nothing behind: an
unknown key (`algo.horizn=8` or `+algo.horizn=8`), a `resume=` path that holds
no run, a run directory that cannot be written, is in use by another run, or
already holds another run's results.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from shac.run.hydra_config import check_override_keys, command_line_overrides, parse_overrides
from shac.run.run_dir import RunLock, check_fresh
from shac.run.serialization import CONFIG_FILE

DEFAULT_RUNS = Path("runs")
"""Where Hydra puts runs without an explicit `hydra.run.dir` (configs/config.yaml)."""


class PreflightError(RuntimeError):
    """The command line cannot start a run; the message says why."""


def check_writable(directory: Path) -> None:
    """Creates `directory` if needed and writes a file into it; raises PreflightError if either fails."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise PreflightError(f"cannot write the run directory '{directory}': {e.strerror or e}") from None


def preflight(argv: list[str], config_dir: Path) -> None:
    """Checks the arguments of `launch/train.py`.

    Args:
        argv: the command line after the script name.
        config_dir: the Hydra config directory (its subdirectories are the config groups).

    Raises:
        ConfigError: an unknown key.
        PreflightError: a bad `resume=` path or run directory.
        RunDirectoryInUseError: another live run holds the run directory.
        FileExistsError: a fresh run into a directory holding another run's results.
    """
    overrides = command_line_overrides(argv)
    groups = [p.name for p in config_dir.iterdir() if p.is_dir()]
    check_override_keys(overrides, groups)
    values = {override.key_or_group: override.value() for override in parse_overrides(overrides)}
    multirun = any(a in ("-m", "--multirun") for a in argv)
    resume = values.get("resume")
    if resume is not None:
        run_dir = Path(str(resume))
        if not (run_dir / CONFIG_FILE).is_file():
            raise PreflightError(f"cannot resume: no {CONFIG_FILE} in run directory '{run_dir}'")
        check_writable(run_dir)
        RunLock(run_dir).check()
        return
    explicit = values.get("hydra.sweep.dir" if multirun else "hydra.run.dir")
    if explicit is None or not isinstance(explicit, str) or "${" in explicit:
        check_writable(DEFAULT_RUNS)
        return
    run_dir = Path(explicit)
    check_writable(run_dir)
    if not multirun:
        RunLock(run_dir).check()
        check_fresh(run_dir)
