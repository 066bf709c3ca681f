"""Physical model parameters named by MJCF element and attribute, read and written on MJX models.

A parameter is written `element:name:attribute`, e.g. `joint:hinge:damping`,
`body:pole:mass`, `geom:bob:friction`, `actuator:servo:kp`. System
identification estimates such parameters; domain randomisation samples them
per environment. Writing goes through `mjx.Model.replace`, so gradients flow
into the values; `ModelParameter.write_mj` writes the same entries of a MuJoCo
(C) model. Accepted (values in the compiled model's units: radians, not the
MJCF's degrees):

    joint:<name>:damping             dof_damping of each of the joint's dofs
    joint:<name>:frictionloss        dof_frictionloss of each of the joint's dofs
    joint:<name>:armature            dof_armature of each of the joint's dofs
    joint:<name>:stiffness           jnt_stiffness (one per joint, whatever its dofs)
    joint:<name>:springref           qpos_spring: the spring's rest position (hinge and slide joints)
    joint:<name>:limit_timeconst     jnt_solref[:, 0]: the time constant of the joint's limit (s; MuJoCo's
                                     default 0.02; limited joints only)
    body:<name>:mass                 body_mass, with body_inertia scaled by the same ratio
    body:<name>:ipos_x|ipos_y|ipos_z body_ipos[:, 0|1|2]: the centre of mass in the body's frame (metres),
                                     the inertia about it unchanged
    body:<name>:spread_x|y|z         body_inertia through the mass's root-mean-square extent along
                                     one axis of the inertial frame (metres, `spread`)
    geom:<name>:friction             geom_friction[:, 0], sliding
    geom:<name>:torsional_friction   geom_friction[:, 1]
    geom:<name>:rolling_friction     geom_friction[:, 2]
    pair:<name>:friction             pair_friction[:, 0] and [:, 1]: an explicit contact pair's sliding
                                     friction, the same along both tangent directions
    pair:<name>:torsional_friction   pair_friction[:, 2]
    pair:<name>:rolling_friction     pair_friction[:, 3] and [:, 4]
    actuator:<name>:gear             actuator_gear[:, 0]
    actuator:<name>:gain             actuator_gainprm[:, 0] (a fixed gain, not a <position>/<velocity> servo's)
    actuator:<name>:kp               actuator_gainprm[:, 0] = kp and actuator_biasprm[:, 1] = -kp (position actuators)
    actuator:<name>:kv               actuator_biasprm[:, 2] = -kv (position actuators)

A body's rotational inertia is three spreads rather than three moments: the
principal moments of inertia about the centre of mass are I_x = m (r_y^2 + r_z^2)
and its two permutations, where r_i = sqrt(integral of x_i^2 dm / m) is the
mass's spread along axis i of the inertial frame (`body_iquat`). Any positive
spreads give moments that obey the triangle inequality, so every value a fit or
a randomisation visits is a rigid body that exists, and the mass and the spreads
are independent: a new mass scales the moments and keeps the spreads. A centre
of mass moved with the inertia about it kept is a consistent rigid body at any
position too. Three of a body's ten inertial parameters stay the model's: the
orientation of its principal axes.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx


@dataclass(frozen=True)
class FieldWrite:
    """One model entry a parameter sets: `field[rows, column] = sign * value`.

    Attributes:
        field: the `mjx.Model` / `mujoco.MjModel` field, e.g. `actuator_biasprm` (float [n, 10]).
        column: index into the field's second axis, or None for a field of one axis (float [n]).
        sign: +1 or -1 (MuJoCo stores a position servo's stiffness and damping negated in its bias).
    """

    field: str
    column: int | None = None
    sign: float = 1.0


# (element, attribute) -> the entries it writes; the first is the one read back
ATTRIBUTES: dict[tuple[str, str], tuple[FieldWrite, ...]] = {
    ("joint", "damping"): (FieldWrite("dof_damping"),),
    ("joint", "frictionloss"): (FieldWrite("dof_frictionloss"),),
    ("joint", "armature"): (FieldWrite("dof_armature"),),
    ("joint", "stiffness"): (FieldWrite("jnt_stiffness"),),
    ("joint", "springref"): (FieldWrite("qpos_spring"),),
    ("joint", "limit_timeconst"): (FieldWrite("jnt_solref", 0),),
    ("body", "mass"): (FieldWrite("body_mass"),),
    ("body", "ipos_x"): (FieldWrite("body_ipos", 0),),
    ("body", "ipos_y"): (FieldWrite("body_ipos", 1),),
    ("body", "ipos_z"): (FieldWrite("body_ipos", 2),),
    ("body", "spread_x"): (FieldWrite("body_inertia"),),
    ("body", "spread_y"): (FieldWrite("body_inertia"),),
    ("body", "spread_z"): (FieldWrite("body_inertia"),),
    ("geom", "friction"): (FieldWrite("geom_friction", 0),),
    ("geom", "torsional_friction"): (FieldWrite("geom_friction", 1),),
    ("geom", "rolling_friction"): (FieldWrite("geom_friction", 2),),
    ("pair", "friction"): (FieldWrite("pair_friction", 0), FieldWrite("pair_friction", 1)),
    ("pair", "torsional_friction"): (FieldWrite("pair_friction", 2),),
    ("pair", "rolling_friction"): (FieldWrite("pair_friction", 3), FieldWrite("pair_friction", 4)),
    ("actuator", "gear"): (FieldWrite("actuator_gear", 0),),
    ("actuator", "gain"): (FieldWrite("actuator_gainprm", 0),),
    ("actuator", "kp"): (FieldWrite("actuator_gainprm", 0), FieldWrite("actuator_biasprm", 1, -1.0)),
    ("actuator", "kv"): (FieldWrite("actuator_biasprm", 2, -1.0),),
}
ANY_SIGN = ("springref", "ipos_x", "ipos_y", "ipos_z")
"""Attributes that are positions, so may take either sign (every other one has a sign rule, `check_range`)."""
SPREAD_AXES = {"spread_x": 0, "spread_y": 1, "spread_z": 2}
"""Attributes written through `spread` (not set directly): the axis of the inertial frame each one is along."""
_OBJECT_TYPES = {
    "joint": mujoco.mjtObj.mjOBJ_JOINT,
    "body": mujoco.mjtObj.mjOBJ_BODY,
    "geom": mujoco.mjtObj.mjOBJ_GEOM,
    "pair": mujoco.mjtObj.mjOBJ_PAIR,
    "actuator": mujoco.mjtObj.mjOBJ_ACTUATOR,
}


def _accepted() -> str:
    """'joint:<name>:damping|frictionloss|..., body:<name>:mass, ...'."""
    by_element: dict[str, list[str]] = {}
    for element, attribute in ATTRIBUTES:
        by_element.setdefault(element, []).append(attribute)
    return ", ".join(f"{element}:<name>:{'|'.join(names)}" for element, names in by_element.items())


@dataclass(frozen=True)
class ModelParameter:
    """One named physical parameter of a MuJoCo model.

    Attributes:
        key: `element:name:attribute`, as the user wrote it.
        rows: indices into the first axis of every written field (the dofs of a
            joint for `dof_*` fields, the joint's qpos address for `qpos_spring`,
            else the element's id).
        writes: the entries set together; the value is read from the first.
    """

    key: str
    rows: tuple[int, ...]
    writes: tuple[FieldWrite, ...]

    @property
    def attribute(self) -> str:
        return self.key.rsplit(":", 1)[1]

    @classmethod
    def parse(cls, key: str, model: mujoco.MjModel) -> ModelParameter:
        """Resolves `element:name:attribute` in `model`.

        Raises:
            ValueError: malformed key, unknown or unsupported attribute, unknown name, or an
                attribute the element cannot take (kp on a motor, springref on a ball joint).
        """
        parts = key.split(":")
        if len(parts) != 3:
            raise ValueError(f"parameter '{key}' is not element:name:attribute; accepted: {_accepted()}")
        element, name, attribute = parts
        if (element, attribute) == ("body", "ipos"):
            raise ValueError(
                f"parameter '{key}' is three values; give one axis at a time: body:{name}:ipos_x, ipos_y or ipos_z "
                "(the centre of mass in the body's frame, metres)"
            )
        if (element, attribute) == ("body", "inertia"):
            raise ValueError(
                f"parameter '{key}' is three principal moments that must obey the triangle inequality; give the "
                f"mass's spread along each axis of the inertial frame instead: body:{name}:spread_x, spread_y or "
                "spread_z (metres; any positive spreads make a consistent inertia, and body:<name>:mass scales it)"
            )
        if (element, attribute) not in ATTRIBUTES:
            raise ValueError(f"unsupported parameter '{key}'; accepted: {_accepted()}")
        object_id = mujoco.mj_name2id(model, _OBJECT_TYPES[element], name)
        if object_id < 0:
            names = [mujoco.mj_id2name(model, _OBJECT_TYPES[element], i) for i in range(_count(model, element))]
            plural = "bodies" if element == "body" else f"{element}s"
            raise ValueError(f"no {element} named '{name}' in the model; {plural}: {', '.join(map(str, names))}")
        if element == "actuator":
            _check_actuator(model, key, object_id, attribute)
        if attribute == "limit_timeconst" and not model.jnt_limited[object_id]:
            raise ValueError(f"parameter '{key}': joint '{name}' has no limit (no range), so no limit to soften")
        writes = ATTRIBUTES[(element, attribute)]
        return cls(key=key, rows=_rows(model, key, writes[0].field, object_id), writes=writes)

    def check_range(self, low: float, high: float, model: mujoco.MjModel) -> None:
        """Fails unless every value in [low, high] is physically valid for this parameter of `model`.

        Masses must be positive (the inertia is scaled with the mass, so it stays
        positive too, which needs a body with mass to scale from), and so must a
        body's spreads (of a body with mass) and a
        position servo's kp (0 disconnects it); a gear or gain range must keep the
        sign of the model's value and exclude zero (zero disconnects the actuator,
        a flipped sign reverses it); a joint limit's time constant must be at least twice the time step
        (MuJoCo simulates a shorter one as that); a springref and a centre of mass (positions) may take any value;
        everything else (damping, frictionloss, armature, stiffness, kv and the
        geoms' and pairs' frictions) must be non-negative.

        Raises:
            ValueError: naming the parameter, the range and what is accepted.
        """
        shown = f"randomization range of '{self.key}' [{low}, {high}]"
        if not (np.isfinite(low) and np.isfinite(high)):
            raise ValueError(f"{shown} must be finite")
        if not low <= high:
            raise ValueError(f"randomization range of '{self.key}' has low {low} > high {high}")
        self._check_physical(low, high, model, shown)

    def check_value(self, value: float, model: mujoco.MjModel) -> None:
        """Fails unless `value` is physically valid for this parameter of `model` (the rules of `check_range`).

        Raises:
            ValueError: naming the parameter, the value and what is accepted.
        """
        shown = f"'{self.key}' = {value}"
        if not np.isfinite(value):
            raise ValueError(f"{shown} must be finite")
        self._check_physical(value, value, model, shown)

    def _check_physical(self, low: float, high: float, model: mujoco.MjModel, shown: str) -> None:
        """The physical rules of `check_range` on finite low <= high; `shown` names them in the message."""
        nominal = self.read(model)
        if self.attribute in SPREAD_AXES:
            if low <= 0.0:
                raise ValueError(f"{shown} must be > 0 (the mass's extent along an axis of the inertial frame)")
            if model.body_mass[self.rows[0]] <= 0.0:
                raise ValueError(f"{shown}: the body has no mass in the model to spread")
        elif self.attribute == "mass":
            if low <= 0.0:
                raise ValueError(f"{shown} must be > 0 (a mass; the inertia is scaled with it)")
            if nominal <= 0.0:
                raise ValueError(f"{shown}: the body has no mass in the model to scale its inertia from")
        elif self.attribute == "limit_timeconst":
            shortest = 2.0 * float(model.opt.timestep)
            if not model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_REFSAFE and low < shortest:
                raise ValueError(
                    f"{shown} must be >= {shortest:g} s, twice the time step (MuJoCo simulates a shorter time "
                    "constant as that)"
                )
            if low <= 0.0:
                raise ValueError(f"{shown} must be > 0 (a time constant; MuJoCo reads a negative one as a stiffness)")
        elif self.attribute == "kp":
            if low <= 0.0:
                raise ValueError(f"{shown} must be > 0 (a position gain; 0 disconnects the servo)")
        elif self.attribute in ("gear", "gain"):
            if not ((nominal > 0.0 and low > 0.0) or (nominal < 0.0 and high < 0.0)):
                sign = "< 0" if nominal < 0.0 else "> 0"
                raise ValueError(
                    f"{shown} must be {sign}, the sign of the model's {self.attribute} {nominal} (0 disconnects it)"
                )
        elif self.attribute not in ANY_SIGN and low < 0.0:
            raise ValueError(f"{shown} must be >= 0 ({self.attribute} cannot be negative)")

    def read(self, model: mujoco.MjModel | mjx.Model) -> float:
        """The current value (the first row's, for a multi-dof joint), from the first written entry."""
        if self.attribute in SPREAD_AXES:
            inertia, mass = np.asarray(model.body_inertia)[self.rows[0]], float(model.body_mass[self.rows[0]])
            moment = second_moments(inertia)[SPREAD_AXES[self.attribute]]
            return float(np.sqrt(max(moment, 0.0) / mass)) if mass > 0.0 else 0.0
        first = self.writes[0]
        values = np.asarray(getattr(model, first.field))[self.rows[0]]
        value = first.sign * float(values if first.column is None else values[first.column])
        return value + 0.0  # a kv of 0, stored negated, reads 0.0 rather than -0.0

    def write(self, model: mjx.Model, value: jax.Array) -> mjx.Model:
        """`model` with this parameter set to `value` (float []); differentiable in `value`."""
        if self.attribute in SPREAD_AXES:
            row = self.rows[0]
            inertia = with_spread(model.body_inertia[row], model.body_mass[row], SPREAD_AXES[self.attribute], value)
            return model.replace(body_inertia=model.body_inertia.at[row].set(inertia))
        rows = np.asarray(self.rows)
        changes = {}
        for entry in self.writes:
            array = changes.get(entry.field, getattr(model, entry.field))
            index = rows if entry.column is None else (rows, entry.column)
            changes[entry.field] = array.at[index].set(entry.sign * value)
        if self.attribute == "mass":  # scale the inertia with the mass: same shape, new density
            ratio = value / jnp.maximum(model.body_mass[rows[0]], 1e-12)
            # gather and set: JAX differentiates `.at[].multiply` only with unique_indices=True (a sysid fit's jvp)
            changes["body_inertia"] = model.body_inertia.at[rows].set(model.body_inertia[rows] * ratio)
        return model.replace(**changes)

    def write_mj(self, model: mujoco.MjModel, value: float) -> None:
        """Sets the parameter in place on a MuJoCo (C) model: the same entries as `write`."""
        rows = list(self.rows)
        if self.attribute in SPREAD_AXES:
            inertia, mass = model.body_inertia[rows[0]], model.body_mass[rows[0]]
            model.body_inertia[rows[0]] = with_spread(inertia, mass, SPREAD_AXES[self.attribute], value)  # a new array
            return
        if self.attribute == "mass":
            model.body_inertia[rows] *= value / max(float(model.body_mass[rows[0]]), 1e-12)
        for entry in self.writes:
            array = getattr(model, entry.field)
            if entry.column is None:
                array[rows] = entry.sign * value
            else:
                array[rows, entry.column] = entry.sign * value


def second_moments(inertia: np.ndarray | jax.Array) -> np.ndarray | jax.Array:
    """The mass's second moments about the centre of mass along the principal axes, integral of x_i^2 dm
    (float [3]), from the principal moments of inertia (float [3]): (I_y + I_z - I_x) / 2 and permutations."""
    return 0.5 * (inertia.sum() - 2.0 * inertia)


def with_spread(
    inertia: np.ndarray | jax.Array, mass: float | jax.Array, axis: int, spread: float | jax.Array
) -> np.ndarray | jax.Array:
    """Principal moments of inertia (float [3]) with the mass's spread along `axis` set to `spread` (metres)
    and the other two spreads kept: the second moment along `axis` becomes mass * spread^2, which adds the
    same amount to the two moments about the other axes. Differentiable in all four arguments."""
    change = mass * spread**2 - second_moments(inertia)[axis]
    return inertia + change * (1.0 - np.eye(3)[axis])


_COUNTS = {"joint": "njnt", "body": "nbody", "geom": "ngeom", "pair": "npair", "actuator": "nu"}


def _count(model: mujoco.MjModel, element: str) -> int:
    return getattr(model, _COUNTS[element])


def _rows(model: mujoco.MjModel, key: str, field: str, object_id: int) -> tuple[int, ...]:
    """Indices into `field`'s first axis for element `object_id`: a joint's dofs (`dof_*`, [nv]),
    its one qpos (`qpos_spring`, [nq]; hinge and slide joints only), else the id itself."""
    if field.startswith("dof_"):
        last = model.jnt_dofadr[object_id + 1] if object_id + 1 < model.njnt else model.nv
        return tuple(range(model.jnt_dofadr[object_id], last))
    if field == "qpos_spring":
        joint_type = mujoco.mjtJoint(model.jnt_type[object_id])
        if joint_type not in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            kind = joint_type.name.removeprefix("mjJNT_").lower()
            raise ValueError(
                f"parameter '{key}': a {kind} joint's spring reference is a pose, not one value; "
                "springref is accepted for hinge and slide joints"
            )
        return (int(model.jnt_qposadr[object_id]),)
    return (object_id,)


def servo_kind(model: mujoco.MjModel, actuator_id: int) -> str | None:
    """'position' or 'velocity' for a servo as MJCF's `<position>` or `<velocity>` compiles it (a fixed
    gain g and an affine bias whose position term, or else velocity term, is -g), None for any other."""
    if (
        model.actuator_gaintype[actuator_id] != mujoco.mjtGain.mjGAIN_FIXED
        or model.actuator_biastype[actuator_id] != mujoco.mjtBias.mjBIAS_AFFINE
    ):
        return None
    gain, bias = model.actuator_gainprm[actuator_id, 0], model.actuator_biasprm[actuator_id]
    if bias[1] == -gain:
        return "position"
    if bias[1] == 0.0 and bias[2] == -gain:
        return "velocity"
    return None


def _check_actuator(model: mujoco.MjModel, key: str, actuator_id: int, attribute: str) -> None:
    """Refuses kp and kv on an actuator that is not a position servo, and gain on a servo (whose bias is
    tied to its gain) or on a gain that is not fixed: writing those entries alone would break it."""
    name, servo = key.split(":")[1], servo_kind(model, actuator_id)
    if attribute in ("kp", "kv") and servo != "position":
        raise ValueError(
            f"parameter '{key}': actuator '{name}' is not a position servo (kp and kv need gaintype fixed, "
            "biastype affine and biasprm[1] == -gainprm[0], as <position> compiles)"
            + ("; use actuator:<name>:gain" if servo is None else "")
        )
    if attribute == "gain":
        if model.actuator_gaintype[actuator_id] != mujoco.mjtGain.mjGAIN_FIXED:
            gaintype = mujoco.mjtGain(model.actuator_gaintype[actuator_id]).name.removeprefix("mjGAIN_").lower()
            raise ValueError(f"parameter '{key}': actuator '{name}' has gaintype {gaintype}; gain needs a fixed gain")
        if servo is not None:
            instead = (
                "use actuator:<name>:kp, which writes both"
                if servo == "position"
                else "a velocity servo's kv (gainprm[0] and biasprm[2] together) is not supported yet"
            )
            raise ValueError(
                f"parameter '{key}': actuator '{name}' is a {servo} servo whose bias is tied to its gain "
                f"(as <{servo}> compiles), so gain alone would break it; {instead}"
            )


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
