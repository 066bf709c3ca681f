"""The contact-free stretches of a recording: a legged robot's body identified where its simulation is smooth.

Every model here runs its constraint solver for one iteration, so a step with
contacts depends on the solver's warm start, which a recorded state does not
carry, and the cost of a fit through contacts switching on and off is too rough
for its Jacobians (docs/transfer.md, Limits). Between contacts (a hopper in
flight, a leg in swing, an arm in free space) the simulation is smooth and
needs no hidden state: the body's masses and inertias show in how the motors
move the links against each other. `contact_free` keeps only those samples, as
the stretches of a trajectory with gaps (`Trajectory.stretches`), so segments
never cross a contact. What only contacts show (a foot's friction) is then not
in the data, and the report flags it as unresolved. Joint limits stay: a limit
is one constraint row, which a single Newton iteration solves.
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np

from shac.sysid.fit import MIN_SEGMENT_SAMPLES
from shac.sysid.recording import Trajectory

CONTACT_MARGIN = 0.01
"""A recorded state counts as in contact when two geoms that collide are within this distance (m): sensor noise
and the motion between samples must not hide a touch."""
CONTACT_TYPES = (
    mujoco.mjtConstraint.mjCNSTR_CONTACT_FRICTIONLESS,
    mujoco.mjtConstraint.mjCNSTR_CONTACT_PYRAMIDAL,
    mujoco.mjtConstraint.mjCNSTR_CONTACT_ELLIPTIC,
)


def in_contact(trajectory: Trajectory, model: mujoco.MjModel, margin: float = CONTACT_MARGIN) -> np.ndarray:
    """[T] bool: whether the model, at each recorded state, has a contact within `margin` (m)."""
    model = copy.deepcopy(model)
    model.geom_margin += margin
    data = mujoco.MjData(model)
    touching = np.zeros(len(trajectory.time), bool)
    for row, qpos in enumerate(trajectory.qpos):  # which constraints act depends on the positions alone
        data.qpos = qpos
        mujoco.mj_forward(model, data)
        touching[row] = np.isin(data.efc_type[: data.nefc], CONTACT_TYPES).any()
    return touching


def contact_free(trajectory: Trajectory, model: mujoco.MjModel, margin: float = CONTACT_MARGIN) -> Trajectory:
    """The runs of samples away from every contact that are long enough for a segment.

    A sample is kept when it and both its neighbours are free of contact
    (`in_contact`): a touch between two samples shows at one of them, so no step
    between two kept samples holds a contact. Runs shorter than
    `MIN_SEGMENT_SAMPLES` cannot hold a segment and are dropped too.

    Args:
        trajectory: a checked recording, T samples.
        model: the model whose geoms and collision filters decide what touches.

    Returns:
        The kept samples with their time stamps as recorded: the dropped ones leave gaps, which split the
        recording into stretches (`Trajectory.stretches`).

    Raises:
        ValueError: no run of `MIN_SEGMENT_SAMPLES` consecutive samples is free of contact.
    """
    free = ~in_contact(trajectory, model, margin)
    keep = free.copy()
    keep[1:] &= free[:-1]
    keep[:-1] &= free[1:]
    for stretch in trajectory.stretches():
        for run in _runs(keep[stretch]):
            if run.stop - run.start < MIN_SEGMENT_SAMPLES:
                keep[stretch][run] = False
    if not keep.any():
        raise ValueError(
            f"no {MIN_SEGMENT_SAMPLES} consecutive samples of {len(keep)} are free of contact (within {margin:g} m) "
            "in the model; contact_free needs a recording with flight, swing or free-space phases"
        )
    return trajectory.select(keep)


def _runs(mask: np.ndarray) -> list[slice]:
    """The runs of True in a [T] bool mask, in order."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return [slice(a, b) for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True)]
