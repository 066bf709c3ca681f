"""A robot's own CSV log read as a `Trajectory`, through a column map and units.

A real log names its columns its own way and keeps its own units. The column
map says which CSV column holds the time, each joint's position and velocity
(by the model's joint name) and each actuator's command (by the model's
actuator name); the units say how to convert them to the model's (SI,
radians). For `envs/assets/arm.xml`, a log with the header

    t_ms,base_pos_deg,base_vel_dps,base_cmd_deg,shoulder_pos_deg,shoulder_vel_dps,shoulder_cmd_deg,...

reads with (YAML, the same structure as `columns=` and `units=` of `launch/sysid.py`)

    columns:
      time: t_ms
      qpos: {base_yaw: base_pos_deg, shoulder_pitch: shoulder_pos_deg, ...}   # joint -> column
      qvel: {base_yaw: base_vel_dps, shoulder_pitch: shoulder_vel_dps, ...}   # joint -> column
      ctrl: {base_yaw: base_cmd_deg, shoulder_pitch: shoulder_cmd_deg, ...}   # actuator -> column
    units:
      time: ms                  # s | ms | us                       (default s)
      angle: deg                # rad | deg, hinge positions        (default rad)
      angular_velocity: deg/s   # rad/s | deg/s | rpm, hinge velocities (default rad/s)
      linear: mm                # m | mm, slide positions, and per second their velocities (default m)
      ctrl: deg                 # native | deg, or {actuator: native | deg, ...} (default native)

Hinge joints take the angle units, slide joints the linear ones; a free or
ball joint cannot be mapped (write the native format instead). A control is in
the actuator's own units (`native`: what MuJoCo's `ctrl` holds), or in degrees
for a position servo on a hinge joint (converted to radians). Every joint of
the model needs a position column and every actuator a control column; a
velocity column is optional per joint (a log of encoder positions alone leaves
`qvel` out): a joint without one has its velocity unmeasured, nan in the
trajectory, and the fit weighs its positions alone. The result is the native
`Trajectory` (qpos, qvel and ctrl in the model's qpos, dof and actuator order),
so the fit is the same either way.
Every problem with the map or the file is one `ValueError` line, raised before
anything is fitted; rows are counted from 0 after the header, as `Trajectory.check`
counts them, with the file's line number where the file is cited.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from envs.physics.parameters import servo_kind
from shac.sysid.recording import Trajectory

SECTIONS = ("time", "qpos", "qvel", "ctrl")
UNITS: dict[str, dict[str, float]] = {
    "time": {"s": 1.0, "ms": 1e-3, "us": 1e-6},
    "angle": {"rad": 1.0, "deg": math.pi / 180},
    "angular_velocity": {"rad/s": 1.0, "deg/s": math.pi / 180, "rpm": 2 * math.pi / 60},
    "linear": {"m": 1.0, "mm": 1e-3},
    "ctrl": {"native": 1.0, "deg": math.pi / 180},
}
"""Accepted units per quantity: name -> factor to the model's unit; the first is the default."""


def load_csv(
    path: str | Path, model: mujoco.MjModel, columns: Mapping[str, Any], units: Mapping[str, Any] | None = None
) -> Trajectory:
    """The `Trajectory` a CSV file with its own column names and units holds (format: the module docstring).

    Args:
        path: the CSV file; its first line is the header.
        model: the model whose joint and actuator names `columns` uses.
        columns: {"time": column, "qpos": {joint: column}, "qvel": {joint: column} (optional, per joint),
            "ctrl": {actuator: column}}.
        units: {"time": ..., "angle": ..., "angular_velocity": ..., "linear": ..., "ctrl": ...}, each optional.

    Raises:
        ValueError: one line for a malformed map or unit, a joint or actuator the
            model lacks (listing the model's), a free or ball joint, a joint or
            actuator left unmapped, a column the file lacks (listing its header), a
            cell that is not a number, or time stamps that do not increase.
    """
    path = Path(path)
    factors = _unit_factors(units or {})
    sources = _sources(model, columns, factors)  # (array, index, column, factor), before reading the file
    if path.suffix != ".csv":
        raise ValueError(f"a column map reads CSV files; '{path}' is not one")
    if not path.is_file():
        raise FileNotFoundError(f"no trajectory file at '{path}'")
    header, rows, lines = _read(path)
    wanted = list(dict.fromkeys(column for _, _, column, _ in sources))
    missing = [c for c in wanted if c not in header]
    if missing:
        raise ValueError(
            f"'{path}' has no column {', '.join(repr(c) for c in missing)} (named in the column map); "
            f"its header: {', '.join(header)}"
        )
    repeated = [c for c in wanted if header.count(c) > 1]
    if repeated:
        raise ValueError(f"'{path}' has the column {', '.join(repr(c) for c in repeated)} more than once in its header")
    values = {column: _column(path, rows, lines, header.index(column), column) for column in wanted}
    count = len(rows)
    arrays = {
        "time": np.zeros(count),
        "qpos": np.zeros((count, model.nq)),
        "qvel": np.full((count, model.nv), np.nan),  # unmeasured unless mapped
        "ctrl": np.zeros((count, model.nu)),
    }
    for name, index, column, factor in sources:
        if name == "time":
            arrays["time"] = values[column] * factor
        else:
            arrays[name][:, index] = values[column] * factor
    time_column = str(columns["time"])
    steps = np.diff(values[time_column])
    back = np.flatnonzero(steps <= 0)
    if back.size:
        i = int(back[0])
        t = values[time_column]
        raise ValueError(
            f"time column '{time_column}' of '{path}' does not increase: row {i + 1} (line {lines[i + 1]}, "
            f"{t[i + 1]:.10g}) follows row {i} ({t[i]:.10g}) ({back.size} such step(s)); sort the log by time "
            "and drop repeated rows"
        )
    return Trajectory(**arrays)


def _unit_factors(units: Mapping[str, Any]) -> dict[str, Any]:
    """{quantity: factor} for every quantity of `UNITS` (defaults filled in); `ctrl` may be {actuator: factor}."""
    unknown = [k for k in units if k not in UNITS]
    if unknown:
        raise ValueError(
            f"units has unknown quantity '{unknown[0]}'; accepted: {', '.join(UNITS)}{_colon_hint(unknown[0])}"
        )
    factors: dict[str, Any] = {}
    for quantity, accepted in UNITS.items():
        given = units.get(quantity)
        if given is None:
            factors[quantity] = next(iter(accepted.values()))
        elif quantity == "ctrl" and isinstance(given, Mapping):
            factors[quantity] = {str(k): _factor(f"units.ctrl.{k}", v, accepted) for k, v in given.items()}
        else:
            factors[quantity] = _factor(f"units.{quantity}", given, accepted)
    return factors


def _colon_hint(key: Any) -> str:
    """A hint for `{time:t_ms}`, which YAML reads as the key 'time:t_ms' without a value."""
    return " (write key: value, with a space after ':')" if ":" in str(key) else ""


def _factor(where: str, unit: Any, accepted: dict[str, float]) -> float:
    if not isinstance(unit, str) or unit not in accepted:
        raise ValueError(f"{where} is '{unit}'; accepted: {' | '.join(accepted)}")
    return accepted[unit]


def _sources(
    model: mujoco.MjModel, columns: Mapping[str, Any], factors: dict[str, Any]
) -> list[tuple[str, int, str, float]]:
    """(array, column index in it, CSV column, factor) for every value the map reads, checked against `model`."""
    unknown = [k for k in columns if k not in SECTIONS]
    if unknown:
        raise ValueError(
            f"columns has unknown key '{unknown[0]}'; accepted: {', '.join(SECTIONS)}{_colon_hint(unknown[0])}"
        )
    time = columns.get("time")
    if time is None or isinstance(time, Mapping):
        raise ValueError(f"columns.time must name the time column, e.g. time: t_ms; got {time}")
    maps = {section: _names(section, columns.get(section) or {}) for section in SECTIONS[1:]}

    joints = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(model.njnt)]
    actuators = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a) for a in range(model.nu)]
    for section, kind, names in (("qpos", "joint", joints), ("qvel", "joint", joints), ("ctrl", "actuator", actuators)):
        strangers = [name for name in maps[section] if name not in names]
        if strangers:
            raise ValueError(
                f"columns.{section} names {kind}s not in the model: {', '.join(strangers)}; the model's {kind}s: "
                f"{', '.join(str(n) for n in names)}"
            )
    for j, name in enumerate(joints):
        kind = mujoco.mjtJoint(model.jnt_type[j])
        if kind not in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            joint_type = kind.name.removeprefix("mjJNT_").lower()
            raise ValueError(
                f"joint '{name}' is a {joint_type} joint; a column map takes hinge and slide joints only "
                "(write the native format, qpos_0, ..., qvel_0, ..., instead)"
            )
    for section, what, kind, names in (
        ("qpos", "a position", "joint", joints),
        ("ctrl", "a control", "actuator", actuators),
    ):
        unmapped = [name or f"#{i} (unnamed)" for i, name in enumerate(names) if name not in maps[section]]
        if unmapped:
            raise ValueError(f"{kind}s of the model without {what} column (columns.{section}): {', '.join(unmapped)}")
    ctrl_units = factors["ctrl"]
    if isinstance(ctrl_units, dict):
        strangers = [name for name in ctrl_units if name not in actuators]
        if strangers:
            raise ValueError(
                f"units.ctrl names actuators not in the model: {', '.join(strangers)}; the model's actuators: "
                f"{', '.join(str(n) for n in actuators)}"
            )

    sources = [("time", 0, str(time), factors["time"])]
    for j, name in enumerate(joints):
        hinge = model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE
        sources.append(("qpos", int(model.jnt_qposadr[j]), maps["qpos"][name], factors["angle" if hinge else "linear"]))
        if name in maps["qvel"]:
            speed = factors["angular_velocity" if hinge else "linear"]
            sources.append(("qvel", int(model.jnt_dofadr[j]), maps["qvel"][name], speed))
    for a, name in enumerate(actuators):
        factor = ctrl_units.get(name, 1.0) if isinstance(ctrl_units, dict) else ctrl_units
        if factor != 1.0 and not _hinge_position_servo(model, a):
            raise ValueError(
                f"units.ctrl deg applies to position servos on hinge joints; actuator '{name}' is not one "
                "(give its control in its own units: native)"
            )
        sources.append(("ctrl", a, maps["ctrl"][name], factor))
    return sources


def _names(section: str, mapping: Any) -> dict[str, str]:
    """{name: column} of one section, with a hint for YAML written without a space after ':'."""
    if not isinstance(mapping, Mapping):
        raise ValueError(f"columns.{section} must map names to columns, e.g. {{hinge: hinge_pos}}; got '{mapping}'")
    for name, column in mapping.items():
        if column is None or isinstance(column, Mapping):
            raise ValueError(f"columns.{section}.{name} has no column name; write name: column, with a space after ':'")
    return {str(name): str(column) for name, column in mapping.items()}


def _hinge_position_servo(model: mujoco.MjModel, actuator: int) -> bool:
    """Whether the actuator is a position servo (as `<position>` compiles) driving a hinge joint."""
    if model.actuator_trntype[actuator] != mujoco.mjtTrn.mjTRN_JOINT:
        return False
    joint = model.actuator_trnid[actuator, 0]
    return bool(
        model.jnt_type[joint] == mujoco.mjtJoint.mjJNT_HINGE
        and servo_kind(model, actuator) == "position"
        and model.actuator_gainprm[actuator, 0] != 0
    )


def _read(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """The header (names stripped), the data rows and each row's line in the file; empty lines are
    skipped, and a row of another width than the header fails in one line."""
    rows, lines = [], []
    with path.open(newline="", encoding="utf-8-sig") as file:
        reader = csv.reader(file)
        header = [name.strip() for name in next(reader, [])]
        for row in reader:
            if row:
                rows.append(row)
                lines.append(reader.line_num)
    if not header:
        raise ValueError(f"'{path}' is empty; the first line must be the header")
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(
                f"row {i} (line {lines[i]}) of '{path}' has {len(row)} fields but the header has {len(header)}"
            )
    return header, rows, lines


def _column(path: Path, rows: list[list[str]], lines: list[int], index: int, name: str) -> np.ndarray:
    """float [T] of one column; an empty cell is nan (`Trajectory.check` names such rows)."""
    values = np.empty(len(rows))
    for i, row in enumerate(rows):
        cell = row[index].strip()
        try:
            values[i] = float(cell) if cell else np.nan
        except ValueError:
            raise ValueError(
                f"row {i} (line {lines[i]}) of '{path}', column '{name}', holds '{cell}', not a number"
            ) from None
    return values
