"""The layers of shac/__init__.py: importing a layer never imports a layer above it.

Each layer is imported in a fresh interpreter (so nothing imported by another test
counts), every module of it, and the modules it pulled in are checked. The interpreters
are forked from one that has imported the libraries every layer may use (so each does
not import jax and MuJoCo again); that one imports nothing any layer is denied.
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


SHARED_LIBRARIES = ["numpy", "jax", "jax.numpy", "mujoco", "mujoco.mjx", "flax.linen", "optax"]
"""Imported before the fork: libraries that no layer is denied (the child checks that they pulled in none)."""

IMPORT_EACH_LAYER = """
import importlib, json, os, sys, traceback
for name in {shared!r}: importlib.import_module(name)
shared = sorted(sys.modules)
loaded = {{}}
for layer, names in {layers!r}.items():
    read, write = os.pipe()
    if os.fork() == 0:  # the child imports the layer and reports every module it then has
        os.close(read)
        try:
            for name in names: importlib.import_module(name)
            with os.fdopen(write, "w") as out: json.dump(sorted(sys.modules), out)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as report: text = report.read()
    if os.wait()[1] != 0: sys.exit(f"importing {{layer}} failed")
    loaded[layer] = json.loads(text)
print(json.dumps({{"shared": shared, "loaded": loaded}}))
"""


@pytest.fixture(scope="module")
def imports() -> dict:
    """{"shared": modules loaded before the fork, "loaded": {layer: modules loaded after importing it}}."""
    code = IMPORT_EACH_LAYER.format(shared=SHARED_LIBRARIES, layers={layer: modules(layer) for layer in FORBIDDEN})
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def denied(layer: str, loaded: list[str]) -> list[str]:
    return [m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN[layer])]


def test_the_libraries_imported_before_the_fork_are_denied_to_no_layer(imports):
    assert imports["shared"] and not any(denied(layer, imports["shared"]) for layer in FORBIDDEN)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_no_layer_above_it(layer, imports):
    above = denied(layer, imports["loaded"][layer])
    assert not above, f"importing {layer} imported {above}"


def test_every_package_says_what_it_may_import():
    for init in [*ROOT.glob("shac/**/__init__.py"), *ROOT.glob("envs/**/__init__.py")]:
        docstring = init.read_text().split('"""')[1]
        assert "import" in docstring, f"{init.relative_to(ROOT)} does not say what it may import"
