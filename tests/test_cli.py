"""launch/cli.py: `key=value` arguments onto a dataclass, and the one-line errors of a bad command line."""

from dataclasses import dataclass, field

import pytest

from launch import cli


@dataclass
class Args:
    data: str
    """A required file."""
    params: list[str] = field(default_factory=list)
    """Names."""
    steps: int = 50
    """A count."""


def exit_message(argv, **kwargs) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.parse(Args, argv, "usage: tool data=<file>", **kwargs)
    return str(exited.value.code)


def test_arguments_merge_onto_the_defaults():
    assert cli.parse(Args, ["data=x.npz", "params=[a,b]"], "usage") == Args("x.npz", ["a", "b"], 50)
    assert cli.parse(Args, ["x.npz", "steps=3"], "usage", positional="data") == Args("x.npz", [], 3)


OPTIONS = "the options: data, params, steps"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["data=x", "parms=[a]"], f"error: unknown option 'parms' (did you mean 'params'?); {OPTIONS}"),
        (
            ["data=x", "hydra.run.dir=out"],
            f"error: unknown option 'hydra.run.dir' (this command is not a Hydra app: its options are the ones below); "
            f"{OPTIONS}",
        ),
        (["steps=1", "dat.file=x"], f"error: unknown option 'dat.file' (did you mean 'data'?); {OPTIONS}"),
        (["data=x", "steps=many"], "error: Value 'many' of type 'str' could not be converted to Integer"),
        (["params=[a]"], "error: missing required option 'data'"),
        (["data=x", "stray"], "error: unexpected argument 'stray'"),
    ],
)
def test_a_bad_command_line_ends_in_the_usage_and_one_line(argv, error):
    assert exit_message(argv) == f"usage: tool data=<file>\n{error}"
