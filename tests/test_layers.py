"""The layers of shac/__init__.py: importing a layer never imports a layer above it.

Each layer is imported in a fresh interpreter (so nothing imported by another test
counts), every module of it, and the modules it pulled in are checked.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    "envs": ["shac", "launch", "hydra", "omegaconf", "wandb", "orbax"],
    "shac.config": [
        "shac.core",
        "shac.run",
        "shac.sysid",
        "shac.tools",
        "launch",
        "hydra",
        "omegaconf",
        "wandb",
        "orbax",
    ],
    "shac.core": ["shac.run", "shac.sysid", "shac.tools", "launch", "hydra", "omegaconf", "wandb", "orbax", "imageio"],
    "shac.run": ["shac.sysid", "shac.tools", "launch"],
    "shac.sysid": [
        "shac.config",
        "shac.core",
        "shac.run",
        "shac.tools",
        "launch",
        "hydra",
        "omegaconf",
        "wandb",
        "orbax",
    ],
    "shac.tools": ["launch"],
}
"""Layer -> packages that importing all of it must not import."""


def modules(layer: str) -> list[str]:
    """`layer` and, for a package, every module under it (found by file, without importing)."""
    path = ROOT / layer.replace(".", "/")
    if not path.is_dir():
        return [layer]
    files = sorted(path.rglob("*.py"))
    return [".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for f in files]


def imported_after(names: list[str]) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_no_layer_above_it(layer):
    loaded = imported_after(modules(layer))
    above = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN[layer])]
    assert not above, f"importing {layer} imported {above}"


def test_every_package_says_what_it_may_import():
    for init in [*ROOT.glob("shac/**/__init__.py"), *ROOT.glob("envs/**/__init__.py")]:
        docstring = init.read_text().split('"""')[1]
        assert "import" in docstring, f"{init.relative_to(ROOT)} does not say what it may import"
