"""What the data can and cannot tell about identified parameters.

The fit's information matrix about the parameters, F = J^T J of the
noise-weighted residuals with every segment start state free (the Schur
complement in `shac.sysid.least_squares`), is the inverse covariance of the
estimates. Taken in relative units (d residuals / d log(values)), its inverse
gives relative standard errors and 95% intervals, and its eigen-decomposition
the combinations of parameters the data pins down (large eigenvalues) or
leaves free (small ones), which are flagged in plain language. A parameter
that may be 0 (the control delay) is taken in a fixed unit instead (the sample
spacing), its interval is cut at 0, and it is printed in milliseconds.

Each flag ends with advice: the excitation that would resolve it, derived from
the physics of the two parameters with the largest components in the flagged
direction (`ADVICE_RULES`, by attribute pair) and from what their joint did in
the recordings (`recorded_motion`: speed and position range, dominant
frequency), with the `launch/record_trajectory.py` command that records it.
"""

from __future__ import annotations

from collections.abc import Callable

import mujoco
import numpy as np
from matplotlib.figure import Figure

from envs.physics.parameters import servo_kind
from shac.sysid.noise import MISFIT_LIMIT
from shac.sysid.recording import Trajectory
from shac.sysid.signals import DELAY

Z_95 = 1.959964
MILLISECONDS = (DELAY,)
"""Parameters in seconds, reported in milliseconds too (an `ms` entry in the report, the printed line)."""
SINGULAR_RTOL = 1e-12
"""Eigenvalues of the relative information below this fraction of the largest count as zero (undetermined)."""


def analyze(
    keys: tuple[str, ...],
    values: np.ndarray,
    information: np.ndarray,
    reliable: bool = True,
    max_relative_std: float = 0.05,
    component_threshold: float = 0.3,
    units: dict[str, float] | None = None,
    motion: dict | None = None,
) -> dict:
    """The identifiability report of an estimate.

    Args:
        keys: parameter names, P of them.
        values: float [P] estimates.
        information: float [P, P] the information matrix about the values
            (inverse covariance), with the segment start states eliminated.
        reliable: whether the fit converged; recorded with every interval.
        max_relative_std: a direction whose relative standard deviation
            exceeds this is flagged as unresolved.
        component_threshold: parameters whose |component| in a flagged
            direction exceeds this are named in its flag.
        units: parameters (>= 0, possibly 0) judged in a fixed unit rather than
            relative to their value, key -> unit: their `relative_std` is the
            standard error in that unit, their interval is cut at 0, and their
            entry records the `unit`. A parameter estimated at exactly 0 (a bound the
            fit may reach) is judged so in the model's unit (1), not relative to 0.
        motion: `recorded_motion` of the fit's recordings: the advice on a flagged
            direction is then derived from the parameters' physics and what the
            joints did (`ADVICE_RULES`); without it, the generic advice.

    Returns:
        A JSON-ready dict: `parameters` (estimate, std_error, relative_std,
        ci95, reliable per key; `unit` for those in `units`; `ms` with estimate,
        std_error and ci95 in milliseconds for a delay), `directions`
        (eigenvalue, relative_std, unit vector per key, weakest first), `flags`
        (plain-language sentences, each ending with its advice), `advice` (one
        dict per flag, `advise`), `condition_number`, and `motion` when given.
    """
    p = len(keys)
    units = {key: 1.0 for key, value in zip(keys, values, strict=True) if value == 0} | (units or {})
    scale = np.array([units.get(key, values[i]) for i, key in enumerate(keys)], np.float64)
    fisher = information * scale[:, None] * scale[None, :]
    finite = np.isfinite(fisher)
    if not finite.all():  # an unstable simulation in the last Jacobian: its entries carry no information
        fisher, reliable = np.where(finite, fisher, 0.0), False
    eigenvalues, eigenvectors = np.linalg.eigh(fisher)
    determined = eigenvalues > SINGULAR_RTOL * max(eigenvalues.max(), 0.0)
    inverse = np.where(determined, 1.0 / np.where(determined, eigenvalues, 1.0), np.inf)
    share = eigenvectors**2  # share[i, k]: how much of direction k parameter i carries
    variance = np.multiply(share, inverse[None], out=np.zeros_like(share), where=share > 1e-12).sum(axis=1)
    relative_std = np.sqrt(variance)

    parameters = {}
    for i, key in enumerate(keys):
        std_error = float(scale[i] * relative_std[i])
        low, high = float(values[i] - Z_95 * std_error), float(values[i] + Z_95 * std_error)
        entry = {
            "estimate": float(values[i]),
            "std_error": std_error,
            "relative_std": float(relative_std[i]),
            "ci95": [max(low, 0.0) if key in units else low, high],
            "reliable": reliable,
        }
        if key in units:
            entry["unit"] = float(units[key])
        if key in MILLISECONDS:
            entry["ms"] = {
                "estimate": 1000 * entry["estimate"],
                "std_error": 1000 * std_error,
                "ci95": [1000 * bound for bound in entry["ci95"]],
            }
        parameters[key] = entry
    directions, flags, advice = [], [], []
    effects = np.sqrt(np.maximum(np.diag(fisher), 0.0))
    for k in range(p):
        direction_std = float(np.sqrt(inverse[k]))
        vector = eigenvectors[:, k] * np.sign(eigenvectors[np.argmax(np.abs(eigenvectors[:, k])), k])
        directions.append(
            {
                "eigenvalue": float(eigenvalues[k]),
                "relative_std": direction_std,
                "vector": {key: float(vector[i]) for i, key in enumerate(keys)},
            }
        )
        if direction_std > max_relative_std:
            involved = [keys[i] for i in np.argsort(-np.abs(vector)) if abs(vector[i]) > component_threshold]
            flag, flag_advice = _flag(involved, vector, keys, direction_std, effects, motion)
            flags.append(flag)
            advice.append(flag_advice)
    positive = eigenvalues[determined]
    return {
        "parameters": parameters,
        "directions": directions,
        "flags": flags,
        "advice": advice,
        "condition_number": float(positive.max() / positive.min()) if positive.size == p else float("inf"),
        **({"motion": motion} if motion is not None else {}),
    }


def _flag(
    involved: list[str],
    vector: np.ndarray,
    keys: tuple[str, ...],
    direction_std: float,
    effects: np.ndarray,
    motion: dict | None,
) -> tuple[str, dict]:
    """A sentence on one unresolved direction and its advice (`advise`); `effects` are the norms of weighted
    d residuals / d log(value)."""
    spread = f"±{100 * direction_std:.0f}% along this direction"
    if len(involved) == 1:
        weak = keys.index(involved[0])
        others = [i for i in range(len(keys)) if i != weak]
        if effects[weak] == 0 or not others:
            advice = advise((involved[0],), motion, GENERIC_SINGLE)
            if effects[weak] == 0:
                return (
                    f"{involved[0]} is not determined: nothing in this data depends on it (with contact_free, a "
                    f"parameter only contacts show); {advice['text']}."
                ), advice
            return f"{involved[0]} is poorly determined ({spread}); {advice['text']}.", advice
        strong = max(others, key=lambda i: effects[i])
        ratio = effects[strong] / max(effects[weak], 1e-300)
        advice = advise((involved[0], keys[strong]), motion)
        return (
            f"{involved[0]} is poorly determined ({spread}): its effect on this data is {ratio:.3g}x smaller than "
            f"that of {keys[strong]}, which absorbs it; the data cannot separate {involved[0]} from "
            f"{keys[strong]}: {advice['text']}."
        ), advice
    signs = {key: np.sign(vector[keys.index(key)]) for key in involved}
    relation = "trade off" if len(set(signs.values())) > 1 else "move together"
    names = ", ".join(involved[:-1]) + f" and {involved[-1]}"
    advice = advise(tuple(involved[:2]), motion)
    return f"{names} {relation} ({spread}): the data cannot separate them; {advice['text']}.", advice


# --- advice: the excitation that would resolve a flagged direction ---

GENERIC = "add faster and larger motions"
"""The advice for a pair of parameters no rule of `ADVICE_RULES` covers (or without the recorded motion)."""
GENERIC_SINGLE = "add motions that excite it"
"""The advice for a lone parameter whose joint moved (or without the recorded motion)."""
CONTACT_FRICTION = (
    "record that contact slipping: a contact's friction acts on the data only while the contact slips, twists or "
    "rolls, and MuJoCo uses the larger of the two touching geoms' frictions (e.g. push or pull the body along the "
    "surface with its joints held still)"
)
"""The advice for a direction that involves a geom's or a contact pair's friction, whatever the joints did."""
PERCENTILES = (5.0, 95.0)
"""The recorded speed and position range of a joint: these percentiles of |qvel| and of qpos, over all recordings."""
BARELY_MOVES = {"hinge": 0.05, "slide": 0.005}
"""A joint whose position range (`PERCENTILES`) is below this (rad, m) barely moved: its parameters are weak
whatever they are paired with."""
SWEEP_MOTION = {"hinge": 0.3, "slide": 0.03}
"""The amplitude of motion (rad, m) assumed when a sweep's frequencies are chosen for a speed: a joint moving
sinusoidally with amplitude A at f Hz reaches speeds up to 2 pi f A."""
SLOW_SHARE = 0.25
"""Damping and friction: the recording lacks slow motion when the 5th percentile of |qvel| is above this share
of the 95th (the joint never slows down much), else it lacks fast motion."""
MOTOR_AMPLITUDE = 0.5
"""The control amplitude the advice suggests for an actuator that is not a position servo (controls in [-1, 1])."""
UNITS = {"hinge": ("rad", "rad/s"), "slide": ("m", "m/s")}
JOINT_TRANSMISSIONS = (int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_JOINTINPARENT))
"""`mjtTrn` values of an actuator that drives one joint (mjTRN_JOINT, mjTRN_JOINTINPARENT)."""


def recorded_motion(
    model: mujoco.MjModel,
    keys: tuple[str, ...],
    trajectories: Trajectory | list[Trajectory],
    env: str | None = None,
) -> dict:
    """What the recordings did, per joint, for the advice on unresolved directions (JSON-ready).

    Args:
        model: the model the recordings are of.
        keys: the fitted parameters (`element:name:attribute`).
        trajectories: a `Trajectory` or a list of them (the fit's recordings).
        env: the registered environment, named in the `record_trajectory` commands of the advice.

    Returns:
        `env`, `dt` (the sample spacing), `seconds` (the longest recording), `nv`; `joints`: per hinge or
        slide joint its `type`, `unit`, `speed` (`PERCENTILES` of |qvel|), `position` (`PERCENTILES` of qpos),
        `dominant_hz` (the peak of the spectrum of its velocity) and the `actuators` that drive it;
        `actuators`: per actuator its `joint` (None unless its transmission is a joint), `gear`,
        `position_servo` and `ctrl` (`PERCENTILES` of its command); `parameters`: per key the joints it acts
        on (a joint's own; an actuator's joint; a body's or geom's joints and those of the bodies carrying it).
    """
    trajectories = [trajectories] if isinstance(trajectories, Trajectory) else list(trajectories)
    joint_types = {int(mujoco.mjtJoint.mjJNT_HINGE): "hinge", int(mujoco.mjtJoint.mjJNT_SLIDE): "slide"}

    def spread(values: list[np.ndarray]) -> list[float]:
        return np.percentile(np.concatenate(values), PERCENTILES).tolist()

    actuators = {}
    for a in range(model.nu):
        driven = int(model.actuator_trntype[a]) in JOINT_TRANSMISSIONS
        actuators[_name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a)] = {
            "joint": _name(model, mujoco.mjtObj.mjOBJ_JOINT, model.actuator_trnid[a, 0]) if driven else None,
            "gear": float(model.actuator_gear[a, 0]),
            "position_servo": servo_kind(model, a) == "position",
            "ctrl": spread([t.ctrl[:, a] for t in trajectories]),
        }
    joints = {}
    for j in range(model.njnt):
        kind = joint_types.get(int(model.jnt_type[j]))
        if kind is None:
            continue
        dof, address = int(model.jnt_dofadr[j]), int(model.jnt_qposadr[j])
        joint = _name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        joints[joint] = {
            "type": kind,
            "unit": UNITS[kind][0],
            "speed": spread([np.abs(t.qvel[:, dof]) for t in trajectories]),
            "position": spread([t.qpos[:, address] for t in trajectories]),
            "dominant_hz": _dominant_hz(trajectories, dof),
            "actuators": [a for a, entry in actuators.items() if entry["joint"] == joint],
        }
    return {
        "env": env,
        "dt": float(trajectories[0].dt),
        "seconds": float(max(t.time[-1] - t.time[0] for t in trajectories)),
        "nv": int(model.nv),
        "joints": joints,
        "actuators": actuators,
        "parameters": {key: _parameter_joints(model, key) for key in keys},
    }


def _dominant_hz(trajectories: list[Trajectory], dof: int) -> float:
    """The frequency (Hz) of the strongest peak of the velocity spectrum of `dof`, over every contiguous stretch."""
    best_amplitude, best_hz = 0.0, 0.0
    for trajectory in trajectories:
        for rows in trajectory.stretches():
            velocity = trajectory.qvel[rows, dof]
            if len(velocity) < 8:
                continue
            window = np.hanning(len(velocity))
            amplitude = np.abs(np.fft.rfft((velocity - velocity.mean()) * window)) / window.sum()
            k = 1 + int(np.argmax(amplitude[1:]))
            if amplitude[k] > best_amplitude:
                best_amplitude, best_hz = float(amplitude[k]), float(np.fft.rfftfreq(len(velocity), trajectory.dt)[k])
    return best_hz


def _name(model: mujoco.MjModel, kind: mujoco.mjtObj, i: int) -> str:
    """The name of element `i` of `kind`, or e.g. `joint3` for an unnamed one."""
    return mujoco.mj_id2name(model, kind, int(i)) or f"{kind.name.removeprefix('mjOBJ_').lower()}{i}"


def _parameter_joints(model: mujoco.MjModel, key: str) -> list[str]:
    """The names of the joints a parameter acts on, its own first (see `recorded_motion`)."""
    element, name, _ = key.split(":")
    if element == "joint":
        return [name]
    if element == "actuator":
        a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name)
        driven = int(model.actuator_trntype[a]) in JOINT_TRANSMISSIONS
        return [_name(model, mujoco.mjtObj.mjOBJ_JOINT, model.actuator_trnid[a, 0])] if driven else []
    if element in ("body", "geom"):
        kind = mujoco.mjtObj.mjOBJ_BODY if element == "body" else mujoco.mjtObj.mjOBJ_GEOM
        i = mujoco.mj_name2id(model, kind, name)
        body = i if element == "body" else int(model.geom_bodyid[i])
        joints = []
        while body > 0:
            joints += [
                _name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(model.njnt) if model.jnt_bodyid[j] == body
            ]
            body = int(model.body_parentid[body])
        return joints
    return []


def _one_digit(x: float) -> float:
    """`x` rounded to one significant digit (0.53 -> 0.5, 1.44 -> 1)."""
    return float(f"{x:.1g}")


def _speeds(low: float, high: float, unit: str) -> str:
    return f"{low:.2g}-{high:.2g} {unit}"


def _sweep(joint: str, motion: dict, band_hz: tuple[float, float], servo_motion: float | None = None) -> dict:
    """`record_trajectory` arguments of a sweep over `band_hz` (limited to a quarter of the sampling rate) on
    `joint`'s actuators (all actuators if none drives it), long enough for one period of its lowest
    frequency and at least as long as the longest recording. The amplitude: `MOTOR_AMPLITUDE` for a motor, a
    position servo's targets `servo_motion` (default `SWEEP_MOTION`) times its gear."""
    entry = motion["joints"][joint]
    top = 0.25 / motion["dt"]
    low, high = (min(max(_one_digit(f), 0.01), top) for f in band_hz)
    servos = [motion["actuators"][a] for a in entry["actuators"] if motion["actuators"][a]["position_servo"]]
    amplitude = MOTOR_AMPLITUDE
    if servos:
        amplitude = min(1.0, (servo_motion or SWEEP_MOTION[entry["type"]]) * abs(servos[0]["gear"]))
    record = {"excitation": "sweep", "sweep_hz": [low, high], "sweep_amplitude": _one_digit(amplitude)}
    if entry["actuators"]:
        record["actuators"] = list(entry["actuators"])
    record["seconds"] = float(np.ceil(max(motion["seconds"], 1.0 / min(low, high))))
    record["dt"] = motion["dt"]
    return record


def _vary_speed(why: str, joint: str, motion: dict) -> dict:
    """Speed-dependent against speed-independent (damping against frictionloss): widen the speed range, slower
    if the joint never slowed down much (`SLOW_SHARE`), else faster; the sweep's frequencies from the speeds
    (`SWEEP_MOTION`), a slow one from rest."""
    entry = motion["joints"][joint]
    low, high = entry["speed"]
    unit = UNITS[entry["type"]][1]
    amplitude = SWEEP_MOTION[entry["type"]]
    if low > SLOW_SHARE * high:
        top = _one_digit(low / 10)
        target = [_one_digit(top / 10), top]
        text = (
            f"{why}; record joint {joint} at speeds well below the current {_speeds(low, high, unit)} "
            f"(e.g. slow sweeps around {_speeds(*target, unit)}) as well as fast ones"
        )
        record = _sweep(joint, motion, tuple(v / (2 * np.pi * amplitude) for v in target))
        record["qvel0"] = [0.0] * motion["nv"]  # from rest
    else:
        target = [_one_digit(3 * high), _one_digit(10 * high)]
        text = (
            f"{why}; record joint {joint} at speeds well above the current {_speeds(low, high, unit)} "
            f"(e.g. sweeps reaching {_speeds(*target, unit)}) as well as slow ones"
        )
        record = _sweep(joint, motion, tuple(v / (2 * np.pi * amplitude) for v in target))
    return {"text": text, "record": record, "speeds": {"recorded": [low, high], "advised": target, "unit": unit}}


def _vary_acceleration(why: str, joint: str, motion: dict) -> dict:
    """Acceleration against speed, weight or friction (armature): 2-5 times the current dominant frequency."""
    f = motion["joints"][joint]["dominant_hz"]
    top = 0.25 / motion["dt"]
    record = _sweep(joint, motion, (min(2 * f, top / 2), 5 * f))
    limited = (
        f"; the sampling (dt={motion['dt']:g} s) limits it to {top:g} Hz: sample faster to go higher"
        if 5 * f > top
        else ""
    )
    text = (
        f"{why}; vary the acceleration: record joint {joint} with higher-frequency excitation, about "
        f"{record['sweep_hz'][0]:g}-{record['sweep_hz'][1]:g} Hz (2-5x the current dominant frequency {f:.2g} Hz"
        f"{limited})"
    )
    return {"text": text, "record": record, "dominant_hz": f}


def _vary_frequency(why: str, joint: str, motion: dict) -> dict:
    """Forces whose shares change with frequency (gear, kp or mass against damping): a wide sweep, from a fifth
    to 5 times the current dominant frequency."""
    f = motion["joints"][joint]["dominant_hz"]
    record = _sweep(joint, motion, (f / 5, 5 * f))
    text = (
        f"{why}; vary the frequency: sweep joint {joint} from about {record['sweep_hz'][0]:g} to "
        f"{record['sweep_hz'][1]:g} Hz, around the current dominant frequency {f:.2g} Hz"
    )
    return {"text": text, "record": record, "dominant_hz": f}


def _vary_target(why: str, joint: str, motion: dict) -> dict | None:
    """A servo's kp against a joint spring: move the target over a wider range, slowly enough to settle."""
    entry = motion["joints"][joint]
    servos = [a for a in entry["actuators"] if motion["actuators"][a]["position_servo"]]
    if not servos:
        return None
    low, high = motion["actuators"][servos[0]]["ctrl"]
    gear = abs(motion["actuators"][servos[0]]["gear"])
    record = _sweep(joint, motion, (0.05, 0.5), max(SWEEP_MOTION[entry["type"]], (high - low) / gear))
    text = (
        f"{why}; vary the target of actuator {servos[0]} over a wider range than the current {low:.2g} to "
        f"{high:.2g}, slowly enough for joint {joint} to settle (a sweep of 0.05-0.5 Hz)"
    )
    return {"text": text, "record": record}


def _inseparable(why: str, joint: str, motion: dict) -> dict:
    """Two parameters that enter the dynamics as one product: no experiment helps."""
    return {
        "text": f"{why}; no excitation separates them: fit one and hold the other at a known value (init=[...])",
        "record": None,
    }


def _excite_joint(joint: str, motion: dict) -> dict:
    """A joint that barely moved (`BARELY_MOVES`): a sweep of 0.1-1 Hz on its actuators."""
    entry = motion["joints"][joint]
    moved = entry["position"][1] - entry["position"][0]
    text = (
        f"excite joint {joint}: it moved only {moved:.2g} {entry['unit']} "
        f"({PERCENTILES[0]:g}th-{PERCENTILES[1]:g}th percentile of its position)"
    )
    return {"text": text, "record": _sweep(joint, motion, (0.1, 1.0)), "moved": moved}


ADVICE_RULES: dict[frozenset[str], tuple[Callable[[str, str, dict], dict | None], str]] = {
    frozenset({"damping", "frictionloss"}): (
        _vary_speed,
        "damping brakes in proportion to the speed, frictionloss with a constant: they are separable only if "
        "the joint's speed varies",
    ),
    frozenset({"armature", "damping"}): (_vary_acceleration, "armature resists acceleration, damping speed"),
    frozenset({"armature", "frictionloss"}): (
        _vary_acceleration,
        "armature resists acceleration, frictionloss any motion alike",
    ),
    frozenset({"armature", "mass"}): (
        _vary_acceleration,
        "armature resists acceleration only, mass also loads the joint with its weight",
    ),
    frozenset({"damping", "mass"}): (
        _vary_frequency,
        "mass acts through weight and acceleration, damping through speed: their shares change with frequency",
    ),
    frozenset({"damping", "kp"}): (
        _vary_frequency,
        "kp acts on the tracking error, damping on the speed: their ratio changes with frequency",
    ),
    frozenset({"damping", "gear"}): (
        _vary_frequency,
        "the commanded torque (gear) is balanced by weight and springs at low frequencies, by inertia and "
        "damping at high ones",
    ),
    frozenset({"damping", "gain"}): (
        _vary_frequency,
        "the commanded torque (gain) is balanced by weight and springs at low frequencies, by inertia and "
        "damping at high ones",
    ),
    frozenset({"kp", "stiffness"}): (
        _vary_target,
        "kp pulls towards the servo's target, stiffness towards the spring's rest position: they are separable "
        "only if the target moves",
    ),
    frozenset({"damping", "kv"}): (
        _inseparable,
        "both are a torque proportional to the joint's speed (kv through the actuator's gear)",
    ),
    frozenset({"gain", "gear"}): (_inseparable, "both scale the commanded force alike"),
}
"""Advice by the attributes of the two parameters with the largest components in a flagged direction:
(builder, why). A builder gets `why`, the joint both act on and `recorded_motion`, and returns the advice's
`text` (which starts with `why`), `record` (the `launch/record_trajectory.py` arguments of the excitation, or
None) and what it measured; None falls back to `GENERIC`. Before the table, a parameter whose joint barely
moved (`BARELY_MOVES`) gets `_excite_joint`."""


def advise(keys: tuple[str, ...], motion: dict | None, generic: str = GENERIC) -> dict:
    """The advice on a flagged direction whose largest components are `keys` (one or two parameters).

    Returns:
        A JSON-ready dict: `parameters` (`keys`), `rule` (`contact friction`, `excite joint`, the attributes of
        the table's entry, or `generic`), `joint` (or None), `text` (one clause, no final stop), `command` (a
        `launch/record_trajectory.py` command line that records the excitation, or None) and the rule's
        measurements (`speeds`, `dominant_hz`, `moved`).
    """
    advice = {"parameters": list(keys), "rule": "generic", "joint": None, "text": generic, "command": None}
    if any(key.split(":")[0] in ("geom", "pair") and key.endswith("friction") for key in keys):
        return advice | {"rule": "contact friction", "text": CONTACT_FRICTION}
    if motion is None:
        return advice
    joints = [[j for j in motion["parameters"].get(key, []) if j in motion["joints"]] for key in keys]
    for key_joints in joints:
        for joint in key_joints[:1]:  # the parameter's own joint
            entry = motion["joints"][joint]
            if entry["position"][1] - entry["position"][0] < BARELY_MOVES[entry["type"]]:
                return _advice(advice, "excite joint", joint, _excite_joint(joint, motion), motion)
    attributes = frozenset(key.rsplit(":", 1)[1] for key in keys)
    shared = [j for j in joints[0] if all(j in others for others in joints[1:])]
    if len(keys) < 2 or attributes not in ADVICE_RULES or not shared:
        return advice
    builder, why = ADVICE_RULES[attributes]
    built = builder(why, shared[0], motion)
    if built is None:
        return advice
    return _advice(advice, "+".join(sorted(attributes)), shared[0], built, motion)


def _advice(advice: dict, rule: str, joint: str, built: dict, motion: dict) -> dict:
    record = built.pop("record")
    return advice | built | {"rule": rule, "joint": joint, "command": _command(record, motion, rule, joint)}


def _command(record: dict | None, motion: dict, rule: str, joint: str) -> str | None:
    """The `launch/record_trajectory.py` command line of `record` (list arguments quoted for the shell)."""
    if record is None:
        return None
    stem = {"damping+frictionloss": "speeds", "excite joint": "excite"}.get(rule, "sweep")
    parts = ["python launch/record_trajectory.py", f"env={motion['env'] or '<env>'}", f"out={stem}_{joint}.npz"]
    for key, value in record.items():
        if isinstance(value, list):
            parts.append(f'"{key}=[{",".join(v if isinstance(v, str) else f"{v:g}" for v in value)}]"')
        else:
            parts.append(f"{key}={value if isinstance(value, str) else f'{value:g}'}")
    return " ".join(parts)


def summary_lines(report: dict) -> list[str]:
    """The printed summary: convergence first, one line per parameter, the noise model, then the flags, each
    followed by the command that records its advice's excitation (`  record it: ...`) where there is one.

    Args:
        report: `analyze`'s dict with the fit's `converged`, `stalled`, `steps`, `step_length`
            (standard errors; optionally `parameter_step_errors` and `misfit`) and `noise` (`noise_model_line`'s
            input) added; with several `recordings` (each a dict of `file`, `seconds`, `samples`,
            `segments` and `noise` {qpos, qvel}), one line per recording follows the noise model.
    """
    remaining = f"the Gauss-Newton step {report['step_length']:.2g} standard errors long"
    if "parameter_step_errors" in report:
        remaining += f", moving no parameter by more than {report['parameter_step_errors']:.2g} of its standard error"
    stall = "the cost stopped decreasing (the simulation is not smooth at this scale)"
    if report["converged"]:
        lines = [f"converged after {report['steps']} steps, {remaining}" + (f"; {stall}" if report["stalled"] else "")]
    else:
        why = stall if report["stalled"] else "stopped at the step limit"
        lines = [
            f"NOT CONVERGED after {report['steps']} steps: {why}, {remaining}; "
            "every estimate and interval below is unreliable"
        ]
    if report.get("misfit", 0.0) > MISFIT_LIMIT:
        lines.append(
            f"MISFIT: the residuals are {report['misfit']:.3g} times the noise the data show: the model does not "
            "explain the recordings (a wrong minimum, or physics the model lacks) or their noise is not white "
            "(filtered or quantized signals hide it from the third differences this compares with: give the "
            "sensors' noise, qpos_noise= and qvel_noise=), and the intervals below, which assume white noise "
            "the model explains, are too narrow"
        )
    for key, entry in report["parameters"].items():
        low, high = entry["ci95"]
        if "ms" in entry:
            ms = entry["ms"]
            lines.append(
                f"{key}: {ms['estimate']:.4g} ms ± {ms['std_error']:.2g} ms, "
                f"95% CI [{ms['ci95'][0]:.4g}, {ms['ci95'][1]:.4g}] ms"
                + ("" if entry["reliable"] else " (unreliable: not converged)")
            )
            continue
        lines.append(
            f"{key}: {entry['estimate']:.6g} ± {entry['std_error']:.2g} "
            f"({100 * entry['relative_std']:.2f}%), 95% CI [{low:.6g}, {high:.6g}]"
            + ("" if entry["reliable"] else " (unreliable: not converged)")
        )
    lines.append(noise_model_line(report["noise"]))
    recordings = report.get("recordings", [])
    if len(recordings) > 1:
        lines.extend(recording_line(recording) for recording in recordings)
    lines.append(f"condition number {report['condition_number']:.3g}")
    advice = report.get("advice") or [{"command": None}] * len(report["flags"])
    for flag, entry in zip(report["flags"], advice, strict=True):
        lines.append(f"FLAG: {flag}")
        if entry["command"]:
            lines.append(f"  record it: {entry['command']}")
    if not report["flags"]:
        lines.append("every direction is resolved")
    return lines


def noise_model_line(noise: dict) -> str:
    """One sentence on the assumed noise.

    `noise` holds `source` (given or estimated), `qpos` and `qvel` lists (left
    out when several recordings have one set each: `recording_line`), and
    `controls` (`shac.sysid.signals.controls_phrase`; default "exact controls").
    """
    if "qpos" in noise:
        return (
            "noise model: independent Gaussian measurement noise per coordinate, constant in time, "
            f"{noise.get('controls', 'exact controls')}; standard deviations ({noise['source']}): {_stds(noise)}"
        )
    return (
        "noise model: independent Gaussian measurement noise per coordinate and recording, constant in time, "
        f"{noise.get('controls', 'exact controls')}; standard deviations ({noise['source']}) per recording:"
    )


def recording_line(recording: dict) -> str:
    """One line on one of several recordings: its file, length, segments, noise standard deviations and the
    model values that held for it alone (`variant`, where given)."""
    variant = ", ".join(f"{key}={value:g}" for key, value in recording.get("variant", {}).items())
    return (
        f"  {recording['file']}: {recording['seconds']:.4g} s, {recording['samples']} samples, "
        f"{recording['segments']} segments; {_stds(recording['noise'])}" + (f"; with {variant}" if variant else "")
    )


def _stds(noise: dict) -> str:
    """'qpos [...], qvel [...]', a velocity nobody measured (None) shown as 'not measured'."""
    return ", ".join(
        f"{name} [{', '.join('not measured' if s is None else f'{s:.3g}' for s in noise[name])}]"
        for name in ("qpos", "qvel")
    )


def least_identifiable_pair(report: dict) -> tuple[str, ...]:
    """The (up to) two parameters with the largest components in the weakest direction."""
    vector = report["directions"][0]["vector"]
    return tuple(sorted(vector, key=lambda key: -abs(vector[key]))[:2])


def plot_landscape(
    loss_fn: Callable[[np.ndarray], np.ndarray], keys: tuple[str, ...], report: dict, path: str, points: int = 21
) -> None:
    """Writes a PNG of the loss over the least identifiable pair (or the one parameter).

    Each axis spans the estimate times exp(+-3 relative standard errors), at
    least +-10% and at most a factor e; for a parameter in a fixed unit (the
    delay), the estimate +- as many units, cut at 0. Other parameters stay at their estimates.

    Args:
        loss_fn: values float [G, P] -> losses float [G].
    """
    values = np.array([report["parameters"][key]["estimate"] for key in keys])
    pair = least_identifiable_pair(report)
    spans = {key: float(np.clip(3 * report["parameters"][key]["relative_std"], 0.1, 1.0)) for key in pair}
    axes = {}
    for key in pair:
        entry, value, span = report["parameters"][key], values[keys.index(key)], spans[key]
        if "unit" in entry:
            axes[key] = np.linspace(max(value - span * entry["unit"], 0.0), value + span * entry["unit"], points)
        else:
            axes[key] = value * np.exp(np.linspace(-span, span, points))
    figure = Figure(figsize=(5.5, 4.5), layout="constrained")
    ax = figure.subplots()
    if len(pair) == 1:
        grid = np.repeat(values[None], points, axis=0)
        grid[:, keys.index(pair[0])] = axes[pair[0]]
        ax.plot(axes[pair[0]], loss_fn(grid))
        ax.set_xlabel(pair[0])
        ax.set_ylabel("loss")
    else:
        x, y = np.meshgrid(axes[pair[0]], axes[pair[1]])
        grid = np.repeat(values[None], x.size, axis=0)
        grid[:, keys.index(pair[0])] = x.ravel()
        grid[:, keys.index(pair[1])] = y.ravel()
        losses = np.asarray(loss_fn(grid)).reshape(x.shape)
        contour = ax.contourf(x, y, np.log10(losses), levels=20, cmap="viridis")
        figure.colorbar(contour, ax=ax, label="log10 loss")
        ax.plot(values[keys.index(pair[0])], values[keys.index(pair[1])], "r+", markersize=12, label="estimate")
        ax.set_xlabel(pair[0])
        ax.set_ylabel(pair[1])
        ax.legend(loc="upper right")
    ax.set_title("loss landscape, least identifiable direction")
    figure.savefig(path, dpi=100)
