"""Physical model parameters named by MJCF element and attribute, read and written on MJX models.

A parameter is written `element:name:attribute`, e.g. `joint:hinge:damping`,
`body:pole:mass`, `geom:bob:friction`, `actuator:torque:gear`. System
identification estimates such parameters; domain randomisation samples them
per environment. Writing goes through `mjx.Model.replace`, so gradients flow
into the values.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

# attribute -> (element, mjx.Model field, column of that field or None for all)
ATTRIBUTES = {
    ("joint", "damping"): ("dof_damping", None),
    ("joint", "frictionloss"): ("dof_frictionloss", None),
    ("joint", "armature"): ("dof_armature", None),
    ("body", "mass"): ("body_mass", None),
    ("geom", "friction"): ("geom_friction", 0),
    ("actuator", "gear"): ("actuator_gear", 0),
}
_OBJECT_TYPES = {
    "joint": mujoco.mjtObj.mjOBJ_JOINT,
    "body": mujoco.mjtObj.mjOBJ_BODY,
    "geom": mujoco.mjtObj.mjOBJ_GEOM,
    "actuator": mujoco.mjtObj.mjOBJ_ACTUATOR,
}


@dataclass(frozen=True)
class ModelParameter:
    """One named physical parameter of a MuJoCo model.

    Attributes:
        key: `element:name:attribute`, as the user wrote it.
        field: the `mjx.Model` field holding it.
        rows: indices into the field's first axis (the dofs of a joint, or one id).
        column: index into the field's second axis, or None.
    """

    key: str
    field: str
    rows: tuple[int, ...]
    column: int | None

    @classmethod
    def parse(cls, key: str, model: mujoco.MjModel) -> ModelParameter:
        """Resolves `element:name:attribute` in `model`.

        Raises:
            ValueError: malformed key, unknown attribute or name, naming the accepted ones.
        """
        parts = key.split(":")
        accepted = ", ".join(f"{e}:<name>:{a}" for e, a in ATTRIBUTES)
        if len(parts) != 3:
            raise ValueError(f"parameter '{key}' is not element:name:attribute; accepted: {accepted}")
        element, name, attribute = parts
        if (element, attribute) not in ATTRIBUTES:
            raise ValueError(f"unsupported parameter '{key}'; accepted: {accepted}")
        object_id = mujoco.mj_name2id(model, _OBJECT_TYPES[element], name)
        if object_id < 0:
            names = [mujoco.mj_id2name(model, _OBJECT_TYPES[element], i) for i in range(_count(model, element))]
            raise ValueError(f"no {element} named '{name}' in the model; {element}s: {', '.join(map(str, names))}")
        field, column = ATTRIBUTES[(element, attribute)]
        if element == "joint":
            first = model.jnt_dofadr[object_id]
            last = model.jnt_dofadr[object_id + 1] if object_id + 1 < model.njnt else model.nv
            rows = tuple(range(first, last))
        else:
            rows = (object_id,)
        return cls(key=key, field=field, rows=rows, column=column)

    def check_range(self, low: float, high: float, model: mujoco.MjModel) -> None:
        """Fails unless every value in [low, high] is physically valid for this parameter of `model`.

        Masses must be positive (the inertia is scaled with the mass, so it stays
        positive too, which needs a body with mass to scale from); damping,
        armature, frictionloss and friction must be non-negative; a gear range
        must keep the sign of the model's gear and exclude zero (a zero gear
        disconnects the actuator, a flipped one reverses it).

        Raises:
            ValueError: naming the parameter, the range and what is accepted.
        """
        shown = f"randomization range of '{self.key}' [{low}, {high}]"
        if not (np.isfinite(low) and np.isfinite(high)):
            raise ValueError(f"{shown} must be finite")
        if not low <= high:
            raise ValueError(f"randomization range of '{self.key}' has low {low} > high {high}")
        nominal = self.read(model)
        if self.field == "body_mass":
            if low <= 0.0:
                raise ValueError(f"{shown} must be > 0 (a mass; the inertia is scaled with it)")
            if nominal <= 0.0:
                raise ValueError(f"{shown}: the body has no mass in the model to scale its inertia from")
        elif self.field == "actuator_gear":
            if not ((nominal > 0.0 and low > 0.0) or (nominal < 0.0 and high < 0.0)):
                sign = "< 0" if nominal < 0.0 else "> 0"
                raise ValueError(f"{shown} must be {sign}, the sign of the model's gear {nominal} (0 disconnects it)")
        elif low < 0.0:
            raise ValueError(f"{shown} must be >= 0 ({self.field.split('_', 1)[1]} cannot be negative)")

    def read(self, model: mujoco.MjModel | mjx.Model) -> float:
        """The current value (the first row's, for a multi-dof joint)."""
        values = np.asarray(getattr(model, self.field))[self.rows[0]]
        return float(values if self.column is None else values[self.column])

    def write(self, model: mjx.Model, value: jax.Array) -> mjx.Model:
        """`model` with this parameter set to `value` (float32 []); differentiable in `value`."""
        array = getattr(model, self.field)
        rows = np.asarray(self.rows)
        index = rows if self.column is None else (rows, self.column)
        changes = {self.field: array.at[index].set(value)}
        if self.field == "body_mass":  # scale the inertia with the mass: same shape, new density
            ratio = value / jnp.maximum(array[rows[0]], 1e-12)
            changes["body_inertia"] = model.body_inertia.at[rows].multiply(ratio)
        return model.replace(**changes)

    def write_mj(self, model: mujoco.MjModel, value: float) -> None:
        """Sets the parameter in place on a MuJoCo (C) model."""
        array = getattr(model, self.field)
        if self.field == "body_mass":
            model.body_inertia[list(self.rows)] *= value / max(float(array[self.rows[0]]), 1e-12)
        if self.column is None:
            array[list(self.rows)] = value
        else:
            array[list(self.rows), self.column] = value


def _count(model: mujoco.MjModel, element: str) -> int:
    return {"joint": model.njnt, "body": model.nbody, "geom": model.ngeom, "actuator": model.nu}[element]


def parse_all(keys: list[str] | tuple[str, ...], model: mujoco.MjModel) -> tuple[ModelParameter, ...]:
    """Resolves several keys; duplicates are an error."""
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate parameters in {list(keys)}")
    return tuple(ModelParameter.parse(key, model) for key in keys)


def write_all(model: mjx.Model, parameters: tuple[ModelParameter, ...], values: jax.Array) -> mjx.Model:
    """`model` with `parameters[i]` set to `values[i]` (float32 [P])."""
    for i, parameter in enumerate(parameters):
        model = parameter.write(model, values[i])
    return model
