"""The command line of the `key=value` launch scripts: one way to parse, set up the process and call the library.

A script declares its arguments as a dataclass (a docstring under every field) whose
fields are the keyword arguments of the library function that does the work:

    if __name__ == "__main__":
        print(json.dumps(cli.main(EvaluateArgs, "shac.run.evaluate:evaluate_run", USAGE)))

`main` parses `key=value` arguments onto the dataclass (OmegaConf: typed, unknown
keys and missing required ones refused), sets the process-wide runtime (headless
rendering, the compilation cache, the precision) before anything imports mujoco,
then imports the function and calls it. The errors the caller names end the
process with their one-line message. Scripts that do more than one call use
`parse` and `launch.runtime.configure_runtime` themselves, in that order. The
Hydra scripts (`train`, `diagnose`, `benchmark`) compose their configs with
Hydra and call `headless_rendering` before importing `shac`.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import sys
from collections.abc import Sequence
from typing import Any, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

from launch.runtime import configure_runtime

Args = TypeVar("Args")
RUNTIME_FIELDS = ("compile_cache", "precision")
"""Argument names that set the runtime instead of being passed on to the library function."""


def parse(schema: type[Args], argv: Sequence[str], usage: str, positional: str | None = None) -> Args:
    """`argv`'s `key=value` arguments merged onto the defaults of the dataclass `schema`.

    With `positional`, one argument without `=` is the value of that field.
    Exits with `usage` and the reason on an unknown key (naming the options, and the
    nearest one), a mistyped value, a missing required one or a stray argument.
    """
    argv = list(argv)
    bare = [a for a in argv if "=" not in a]
    if bare and (positional is None or len(bare) > 1):
        sys.exit(f"{usage}\nerror: unexpected argument '{bare[-1]}'")
    if bare:
        argv = [f"{positional}={bare[0]}", *(a for a in argv if "=" in a)]
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.from_dotlist(list(argv)))
        return OmegaConf.to_object(merged)
    except ConfigKeyError as e:
        names = [field.name for field in dataclasses.fields(schema)]
        close = [] if e.key == "hydra" else difflib.get_close_matches(str(e.key), names, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        if e.key == "hydra":
            hint = " (this command is not a Hydra app: its options are the ones below)"
        typed = next((a.partition("=")[0] for a in argv if a.partition("=")[0].split(".")[0] == e.key), e.key)
        sys.exit(f"{usage}\nerror: unknown option '{typed}'{hint}; the options: {', '.join(names)}")
    except MissingMandatoryValue as e:
        sys.exit(f"{usage}\nerror: missing required option '{e.key}'")
    except OmegaConfBaseException as e:
        sys.exit(f"{usage}\nerror: {str(e).splitlines()[0]}")


def load(target: str) -> Any:
    """The object `package.module:name` names (imported now, so call it after the runtime is set)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def main(
    schema: type[Args],
    target: str,
    usage: str,
    errors: Sequence[str] = (),
    positional: str | None = None,
    argv: Sequence[str] | None = None,
) -> Any:
    """Parses `argv` onto `schema`, sets the runtime, and calls `target` with the arguments.

    Args:
        schema: the script's arguments, a dataclass. Fields named `compile_cache`
            and `precision` set the runtime; the others are `target`'s keyword
            arguments.
        target: `package.module:function` of the library function to call.
        usage: the script's one-line usage, printed on a bad argument.
        errors: `package.module:Exception` of the exceptions (besides
            `ValueError` and `FileNotFoundError`) that end the process with
            their message instead of a traceback.
        positional: the field an argument without `=` sets (see `parse`).
        argv: the arguments; None reads `sys.argv[1:]`.

    Returns:
        What `target` returned.
    """
    args = parse(schema, sys.argv[1:] if argv is None else argv, usage, positional)
    values = dataclasses.asdict(args)
    runtime = {name: values.pop(name) for name in RUNTIME_FIELDS if name in values}
    configure_runtime(**runtime)
    command = load(target)
    expected = (ValueError, FileNotFoundError, *_importable(errors))
    try:
        return command(**values)
    except expected as e:
        sys.exit(f"error: {e}")


def _importable(names: Sequence[str]) -> list[type[Exception]]:
    """The exception classes `names` name, leaving out those whose module cannot be imported here."""
    found = []
    for name in names:
        try:
            found.append(load(name))
        except ImportError:
            continue
    return found
