"""Physics options: MJCF values changed before the model compiles.

A task's MJCF file fixes its robot; these options change it without editing
the file, so a study of the physics (how heavy, how stiff, how finely
stepped) is a config change. Values are written on a `mujoco.MjSpec` and the
model is compiled from it, so quantities the compiler derives (masses and
inertias from densities, for example) follow.

An option is `element:name:attribute=value`, where `name` is one element's
name or `*` for all of them. For joints, `*` means the joints that an
actuator drives (the robot's motors), never a free or ball joint. Accepted:

    joint:<name>:armature     rotor inertia added to the joint (kg m^2)
    joint:<name>:damping      joint damping (N m s / rad)
    joint:<name>:frictionloss dry friction of the joint (N m)
    joint:<name>:limit_timeconst  solref time constant of the joint's limit (s; MuJoCo's default
                              0.02; larger is softer: a joint pressed into its limit still moves
                              with its torque, as the penalty-spring limits of other simulators do)
    geom:<name>:density       density of the geom (kg / m^3; geoms with an explicit mass keep it)
    geom:<name>:friction      sliding friction coefficient
    actuator:<name>:gear      actuator gear (torque per unit of control for a motor)
"""

from __future__ import annotations

from collections.abc import Mapping

import mujoco

_SETTERS = {
    ("joint", "armature"): lambda joint, value: setattr(joint, "armature", value),
    ("joint", "damping"): lambda joint, value: joint.damping.__setitem__(0, value),
    ("joint", "frictionloss"): lambda joint, value: setattr(joint, "frictionloss", value),
    ("joint", "limit_timeconst"): lambda joint, value: joint.solref_limit.__setitem__(0, value),
    ("geom", "density"): lambda geom, value: setattr(geom, "density", value),
    ("geom", "friction"): lambda geom, value: geom.friction.__setitem__(0, value),
    ("actuator", "gear"): lambda actuator, value: actuator.gear.__setitem__(0, value),
}
ACCEPTED = ", ".join(f"{element}:<name|*>:{attribute}" for element, attribute in _SETTERS)


def compile_model(spec: mujoco.MjSpec, options: Mapping[str, float], substeps: int | None, ctrl_dt: float):
    """Compiles `spec` with `options` applied and, if given, `substeps` physics steps per control step.

    Args:
        spec: the task's MJCF as a spec (changed in place).
        options: `element:name:attribute` -> value (see the module docstring).
        substeps: physics steps per control period (the time step becomes
            `ctrl_dt / substeps`); None keeps the MJCF's time step.
        ctrl_dt: the control period in seconds.

    Returns:
        The compiled `mujoco.MjModel`.

    Raises:
        ValueError: a malformed or unknown option, a name not in the model, a
            negative value, or substeps < 1; the message names the accepted ones.
    """
    apply_options(spec, options, substeps, ctrl_dt)
    return spec.compile()


def apply_options(spec: mujoco.MjSpec, options: Mapping[str, float], substeps: int | None, ctrl_dt: float) -> None:
    """Writes `options` and the time step `substeps` implies on `spec`, uncompiled (see `compile_model`)."""
    if substeps is not None:
        if substeps < 1:
            raise ValueError(f"substeps must be >= 1, got {substeps}")
        spec.option.timestep = ctrl_dt / substeps
    for key, value in options.items():
        parts = key.split(":")
        if len(parts) != 3 or (parts[0], parts[2]) not in _SETTERS:
            raise ValueError(f"unknown physics option '{key}'; accepted: {ACCEPTED}")
        element, name, attribute = parts
        if value < 0:
            raise ValueError(f"physics option '{key}' must be >= 0, got {value}")
        targets = _elements(spec, element, name)
        for target in targets:
            _SETTERS[(element, attribute)](target, float(value))


def _elements(spec: mujoco.MjSpec, element: str, name: str) -> list:
    """The spec's elements of kind `element` named `name` (`*`: all, or for joints all actuated ones)."""
    every = {"joint": spec.joints, "geom": spec.geoms, "actuator": spec.actuators}[element]
    if name == "*":
        if element != "joint":
            return list(every)
        actuated = {actuator.target for actuator in spec.actuators}
        return [joint for joint in every if joint.name in actuated]
    found = [e for e in every if e.name == name]
    if not found:
        names = ", ".join(e.name for e in every if e.name)
        raise ValueError(f"no {element} named '{name}' in the model; {element}s: {names}")
    return found
