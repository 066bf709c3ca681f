"""The controls the model receives: the recorded commands, delayed by a control delay.

A recording's `ctrl` column holds the commands as they were sent (logged), each
held from its sample time t_k to the next (a zero-order hold). A real actuator
applies them some time d >= 0 later: command k acts from t_k + d to t_{k+1} + d,
and until the first command arrives (the first d seconds of each contiguous
stretch) the first one is held. d is the parameter `signal:ctrl:delay`, in
seconds, given or fitted next to the model parameters; `split` routes keys
starting with `signal:` here (they are not model fields).

MuJoCo holds the control constant over each physics step of length h (the
model's time step, n = dt / h steps per sample). The control applied during
physics step j, which covers [t_0 + j h, t_0 + (j + 1) h), is the mean of the
delayed command over that step, which is the linear interpolation at j - d / h of
the per-step command sequence U (each command repeated n times):

    u_j(d) = f U[j - m - 1] + (1 - f) U[j - m],   m = floor(d / h),  f = d / h - m,

with indices before the stretch's first step held at that step. This is the
delayed zero-order hold itself when d is a multiple of h, and continuous and
piecewise linear in d in between, with derivative (U[j - m - 1] - U[j - m]) / h
(taken on the side of increasing d, so it is the useful one at d = 0): a fit can
follow it, where a shifted zero-order hold sampled at the step starts is
piecewise constant in d, with zero derivative almost everywhere. With d = 0
every physics step gets exactly its recorded command, as without a delay. The
same function makes the controls of MuJoCo's C simulator (recordings,
finite-difference Jacobians) and of MJX (the fit's autodiff), so both follow one
convention.
"""

from __future__ import annotations

import numpy as np

PREFIX = "signal:"
DELAY = "signal:ctrl:delay"
ACCEPTED = {DELAY: "seconds from sending a command to its taking effect, >= 0"}
"""The signal parameters, each with what it means."""
DEFAULT_UPPER_FRACTION = 0.1
"""A fitted delay is bounded above by this fraction of the longest contiguous stretch, unless given."""


def is_signal(key: str) -> bool:
    """Whether `key` names a parameter of the measured signals rather than of the model."""
    return key.startswith(PREFIX)


def check_key(key: str) -> None:
    """Raises a one-line ValueError for a `signal:` key that is not accepted, naming the accepted ones."""
    if key in ACCEPTED:
        return
    accepted = "; ".join(f"{k} ({meaning})" for k, meaning in ACCEPTED.items())
    parts = key.split(":")
    known_signals = {k.split(":")[1] for k in ACCEPTED}
    if len(parts) != 3:
        why = "is not signal:name:attribute"
    elif parts[1] not in known_signals:
        why = f"names an unknown signal '{parts[1]}'"
    else:
        why = f"names an unknown attribute '{parts[2]}' of signal '{parts[1]}'"
    raise ValueError(f"parameter '{key}' {why}; accepted: {accepted}")


def split(keys: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(model keys, signal keys) of `keys`, in order; every signal key is checked (`check_key`)."""
    model_keys, signal_keys = [], []
    for key in keys:
        if is_signal(key):
            check_key(key)
            signal_keys.append(key)
        else:
            model_keys.append(key)
    return model_keys, signal_keys


def split_values(values: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """`{key: value}` split like `split`: (model values, signal values)."""
    model_keys, signal_keys = split(list(values))
    return {k: values[k] for k in model_keys}, {k: values[k] for k in signal_keys}


def check_delay(delay: float, seconds: float, what: str = "delay", where: str = "the recording") -> None:
    """Raises a one-line ValueError if `delay` is negative or longer than `seconds` (the length of `where`).

    Args:
        what: how the value was given, e.g. "initial delay" or "true delay".
    """
    if not np.isfinite(delay) or delay < 0:
        raise ValueError(f"{what} {DELAY}={delay:g} s must be >= 0 (a command cannot act before it is sent)")
    if delay > seconds:
        raise ValueError(
            f"{what} {DELAY}={delay:g} s is longer than {where} ({seconds:g} s); give it in seconds, "
            "e.g. 0.02 for 20 ms"
        )


def step_controls(ctrl, start_rows, first_rows, samples: int, n_substeps: int, delay, step_seconds: float, xp=np):
    """The controls of every physics step of segments, under a delay (module docstring).

    Works on numpy (`xp=np`) and JAX (`xp=jax.numpy`, differentiable in `delay`)
    arrays alike; `start_rows` and `first_rows` may be arrays [S] or scalars
    (inside `vmap`), giving outputs with or without the leading S.

    Args:
        ctrl: [T, nu] the recorded commands, one per sample.
        start_rows: int [S] the row of each segment's first sample.
        first_rows: int [S] the first row of the contiguous stretch holding each segment.
        samples: K, the control intervals per segment (its samples - 1).
        n_substeps: physics steps per sample.
        delay: d >= 0, seconds (a scalar; traced under JAX).
        step_seconds: h, the physics time step.

    Returns:
        [S, K, n_substeps, nu] the control held during each physics step.
    """
    shift = delay / step_seconds
    whole = xp.floor(shift)
    fraction = shift - whole
    whole = whole.astype(int) if xp is np else whole.astype(xp.int32)
    steps = xp.asarray(start_rows)[..., None] * n_substeps + xp.arange(samples * n_substeps)
    first = xp.asarray(first_rows)[..., None] * n_substeps
    before = xp.maximum(steps - whole - 1, first) // n_substeps
    at = xp.maximum(steps - whole, first) // n_substeps
    controls = fraction * ctrl[before] + (1 - fraction) * ctrl[at]  # [..., K n, nu]
    return controls.reshape(*controls.shape[:-2], samples, n_substeps, ctrl.shape[-1])


def controls_phrase(fitted: bool, delay: float) -> str:
    """How the noise model treats the controls: exact, or delayed by the fitted or given delay."""
    if fitted:
        return "controls delayed by the fitted delay, otherwise exact"
    if delay > 0:
        return f"controls delayed by {1000 * delay:.4g} ms (given), otherwise exact"
    return "exact controls"
