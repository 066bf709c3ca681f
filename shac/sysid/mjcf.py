"""The identified model written back as MJCF: the environment's MJCF with the fitted values in place.

`identified_xml` takes the spec of the MJCF the fit's model compiled from (for
an environment, `MjxEnv.mjcf_spec`: its file with the same physics options and
time step applied), sets each `element:name:attribute` value on its element,
and returns `spec.to_xml()`. The spec's attributes are the MJCF's: a hinge's
springref is set in degrees under `<compiler angle="degree">`, a position
servo's kp is gainprm[0] and -biasprm[1] of the `<general>` actuator it
compiles to, and a body's mass is written as an explicit `<inertial>` with the
inertia the fit scaled with it. The text is then compiled again and compared
with the fit's model (every field a parameter writes, the body inertias, the
sizes and the solver options); MuJoCo's XML writer keeps 6 significant digits,
so values agree to a relative 1e-5. A value the spec cannot express, or any
other difference, is one `ValueError` line, and no text is returned: no file
with a wrong value is written.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from pathlib import Path

import mujoco
import numpy as np

from envs.physics.parameters import ATTRIBUTES, ModelParameter

RTOL = 1e-5
"""Relative agreement of the MJCF written back with the fitted model (the XML writer keeps 6 digits)."""
COMPARED_FIELDS = sorted({write.field for writes in ATTRIBUTES.values() for write in writes} | {"body_inertia"})
COMPARED_SIZES = ("nq", "nv", "nu", "nbody", "njnt", "ngeom")
COMPARED_OPTIONS = ("timestep", "integrator", "solver", "iterations", "ls_iterations", "disableflags", "enableflags")


def fitted_model(model: mujoco.MjModel, values: Mapping[str, float]) -> mujoco.MjModel:
    """A copy of `model` with each `element:name:attribute` value written (`ModelParameter.write_mj`)."""
    fitted = copy.deepcopy(model)
    for key, value in values.items():
        ModelParameter.parse(key, fitted).write_mj(fitted, float(value))
    return fitted


def set_values(spec: mujoco.MjSpec, fitted: mujoco.MjModel, values: Mapping[str, float]) -> None:
    """Sets each value on its element of `spec` (uncompiled), in the MJCF's units.

    Args:
        spec: the MJCF `fitted` was compiled from.
        fitted: that model with `values` written (`fitted_model`): a body mass
            takes its inertia, centre of mass and inertial frame from it.
        values: `element:name:attribute` -> value, in the compiled model's units.

    Raises:
        ValueError: one line naming a value the spec cannot express.
    """
    finders = {"joint": spec.joint, "body": spec.body, "geom": spec.geom, "pair": spec.pair, "actuator": spec.actuator}
    for key, value in values.items():
        ModelParameter.parse(key, fitted)  # a known key naming an element of the model
        element, name, attribute = key.split(":")
        target = finders[element](name)
        if target is None:
            raise ValueError(f"cannot write {key} as MJCF: the spec has no {element} named '{name}'")
        value = float(value)
        if element == "joint":
            if attribute in ("damping", "stiffness"):
                getattr(target, attribute)[0] = value
            elif attribute == "limit_timeconst":
                target.solref_limit[0] = value
            elif attribute == "springref":
                degrees = spec.compiler.degree and target.type == mujoco.mjtJoint.mjJNT_HINGE
                target.springref = math.degrees(value) if degrees else value
            else:
                setattr(target, attribute, value)
        elif element == "body":
            if spec.compiler.inertiafromgeom == mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE:
                raise ValueError(
                    f"cannot write {key} as MJCF: the model computes every inertia from its geoms (<compiler "
                    'inertiafromgeom="true">), which overrides an explicit body mass'
                )
            body = fitted.body(name).id
            target.mass = float(fitted.body_mass[body])
            target.inertia = fitted.body_inertia[body]
            target.ipos = fitted.body_ipos[body]
            target.iquat = fitted.body_iquat[body]
            target.explicitinertial = True
        elif element == "geom":
            target.friction[{"friction": 0, "torsional_friction": 1, "rolling_friction": 2}[attribute]] = value
        elif element == "pair":
            for column in {"friction": (0, 1), "torsional_friction": (2,), "rolling_friction": (3, 4)}[attribute]:
                target.friction[column] = value
        elif attribute == "gear":
            target.gear[0] = value
        elif attribute == "gain":
            target.gainprm[0] = value
        elif attribute == "kp":
            target.gainprm[0] = value
            target.biasprm[1] = -value
        elif attribute == "kv":
            target.biasprm[2] = -value
        else:
            raise ValueError(f"cannot write {key} as MJCF: no MJCF attribute is known for it")


def identified_xml(spec: mujoco.MjSpec, model: mujoco.MjModel, values: Mapping[str, float], comment: str = "") -> str:
    """The MJCF text of `model` with `values` in place, checked by compiling it again.

    Args:
        spec: a fresh, uncompiled spec of the MJCF `model` compiled from (changed here).
        model: the compiled model the values are relative to (the fit's).
        values: `element:name:attribute` -> value, in the compiled model's units.
        comment: text put in an XML comment before the root element (e.g. what
            was fitted, and the control delay, which is no model attribute).

    Raises:
        ValueError: one line naming a value the spec cannot express, or a field
            in which the text compiles to something other than the fitted model.
    """
    fitted = fitted_model(model, values)
    set_values(spec, fitted, values)
    _absolute_asset_dirs(spec)
    try:
        spec.compile()
        text = spec.to_xml()
        written = mujoco.MjModel.from_xml_string(text)
    except Exception as e:  # MuJoCo's compiler and writer raise ValueError or its own errors
        raise ValueError(f"the MJCF with the fitted values does not compile: {str(e).splitlines()[0]}") from None
    _compare(written, fitted, values)
    if comment:
        text = "<!--\n" + comment.replace("--", "- -").rstrip() + "\n-->\n" + text
    return text


def _absolute_asset_dirs(spec: mujoco.MjSpec) -> None:
    """Points the mesh and texture directories at the original MJCF's folder when assets are read from
    files, so the text finds them wherever it is written."""
    assets = [*spec.meshes, *spec.textures, *spec.hfields, *spec.skins]
    if not any(getattr(asset, "file", "") for asset in assets):
        return
    folder = Path(spec.modelfiledir).resolve()
    spec.meshdir = str(folder / spec.meshdir)
    spec.texturedir = str(folder / spec.texturedir)


def _compare(written: mujoco.MjModel, fitted: mujoco.MjModel, values: Mapping[str, float]) -> None:
    """Raises a one-line ValueError where `written` differs from `fitted`: first a value of `values`,
    then any compared field."""
    for size in COMPARED_SIZES:
        if getattr(written, size) != getattr(fitted, size):
            raise ValueError(
                f"the MJCF written back has {size}={getattr(written, size)}, the fitted model {getattr(fitted, size)}"
            )
    for key, value in values.items():
        got = ModelParameter.parse(key, written).read(written)
        if not math.isclose(got, value, rel_tol=RTOL, abs_tol=1e-12):
            raise ValueError(
                f"MjSpec cannot express {key}: the MJCF written back compiles to {got:.6g}, not {value:.6g}"
            )
    for option in COMPARED_OPTIONS:
        a, b = getattr(written.opt, option), getattr(fitted.opt, option)
        if not np.isclose(a, b, rtol=RTOL, atol=0.0):
            raise ValueError(f"the MJCF written back has opt.{option} {a}, the fitted model {b}")
    for field in COMPARED_FIELDS:
        a, b = getattr(written, field), getattr(fitted, field)
        close = np.isclose(a, b, rtol=RTOL, atol=1e-9)
        if not close.all():
            index = np.unravel_index(np.flatnonzero(~close)[0], a.shape)
            raise ValueError(
                f"the MJCF written back differs from the fitted model in {field}{list(index)}: "
                f"{a[index]:.6g}, not {b[index]:.6g}"
            )
