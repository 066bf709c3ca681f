"""Contact smoothing for usable gradients, and per-step clipping of the state gradient.

Modes (docs/algorithm.md, "Contacts and their gradients"):
    none: the physical contact model.
    soft: softer contacts (solref time constant and damping ratio, solimp,
        margin) for both the simulation and its gradient.
    straight_through: the simulation uses the physical model, the gradient the
        softened one: y = f(x) with dy/dx = df_soft/dx, as a custom VJP: the
        forward pass runs only the physical step and keeps its input; the
        backward pass runs the softened step from that input and pulls the
        cotangent back through it.

With `hold_linesearch`, any mode differentiates MJX's constraint solver with its
line search's step length held constant (`envs.private_apis.mjx_linesearch_step_held`):
the same simulation, a cheaper backward pass, a gradient that differs from the
exact one where a contact changes along the line.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from mujoco import mjx

from envs.physics.mjx_math import with_contractions
from envs.private_apis import mjx_linesearch_step_held

MODES = ("none", "soft", "straight_through")


@dataclass(frozen=True)
class Smoothing:
    """How contacts are simulated and differentiated.

    Attributes:
        mode: none, soft or straight_through.
        timeconst: contact solref time constant (s) of the softened model
            (MuJoCo's default is 0.02; larger is softer).
        dampratio: contact solref damping ratio of the softened model.
        solimp: contact solimp (dmin, dmax, width, midpoint, power) of the softened model.
        margin: extra contact margin (m) of the softened model: contacts act
            before touching, so their gradient is seen earlier.
        state_grad_clip: if > 0, the gradient flowing back through the state
            at each control step is clipped to this global norm (per env).
        state_grad_decay: the gradient flowing back through the state is
            multiplied by this factor at each control step (1: exact; 0.9
            weighs a step k steps back by 0.9^k), so the actor's gradient leans
            on the near future while the window and its critic targets keep
            their length. The forward pass is unchanged.
        hold_linesearch: differentiate the solver's line search with its step
            length held (the values unchanged; docs/algorithm.md, "Contacts and
            their gradients"). Playground's tasks hold it always.
    """

    mode: str = "none"
    timeconst: float = 0.05
    dampratio: float = 1.0
    solimp: tuple[float, ...] = (0.9, 0.95, 0.001, 0.5, 2.0)
    margin: float = 0.0
    state_grad_clip: float = 0.0
    state_grad_decay: float = 1.0
    hold_linesearch: bool = False

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown smoothing mode '{self.mode}'; available: {', '.join(MODES)}")
        if self.timeconst <= 0 or self.dampratio <= 0:
            raise ValueError(f"smoothing timeconst and dampratio must be > 0, got {self.timeconst}, {self.dampratio}")
        if len(self.solimp) != 5:
            raise ValueError(f"smoothing solimp must have 5 values, got {list(self.solimp)}")
        if self.margin < 0 or self.state_grad_clip < 0:
            raise ValueError(
                f"smoothing margin and state_grad_clip must be >= 0, got {self.margin}, {self.state_grad_clip}"
            )
        if not 0.0 <= self.state_grad_decay <= 1.0:
            raise ValueError(f"smoothing state_grad_decay must be in [0, 1], got {self.state_grad_decay}")

    def soften(self, model: mjx.Model) -> mjx.Model:
        """`model` with every geom's and pair's contact parameters softened."""
        solref = jnp.array([self.timeconst, self.dampratio], model.geom_solref.dtype)
        solimp = jnp.array(self.solimp, model.geom_solimp.dtype)
        return model.replace(
            geom_solref=jnp.broadcast_to(solref, model.geom_solref.shape),
            geom_solimp=jnp.broadcast_to(solimp, model.geom_solimp.shape),
            geom_margin=model.geom_margin + self.margin,
            pair_solref=jnp.broadcast_to(solref, model.pair_solref.shape),
            pair_solimp=jnp.broadcast_to(solimp, model.pair_solimp.shape),
            pair_margin=model.pair_margin + self.margin,
        )

    @with_contractions
    def step(self, model: mjx.Model, data: mjx.Data) -> mjx.Data:
        """One physics step of `model` under this smoothing (MJX's math as contractions: `envs.physics.mjx_math`)."""
        with self.linesearch():
            if self.mode == "none":
                return mjx.step(model, data)
            if self.mode == "soft":
                return mjx.step(self.soften(model), data)
            return _straight_through_step(self, model, data)

    def linesearch(self) -> contextlib.AbstractContextManager:
        """The block within which MJX's steps are traced: the line search's step held if `hold_linesearch`."""
        return mjx_linesearch_step_held() if self.hold_linesearch else contextlib.nullcontext()


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _straight_through_step(smoothing: Smoothing, model: mjx.Model, data: mjx.Data) -> mjx.Data:
    """`mjx.step(model, data)`, differentiated as `mjx.step(smoothing.soften(model), data)`."""
    return mjx.step(model, data)


def _straight_through_forward(smoothing, model, data):
    return mjx.step(model, data), (model, data)


@with_contractions
def _straight_through_backward(smoothing, inputs, cotangent):
    with smoothing.linesearch():
        _, pullback = jax.vjp(lambda m, d: mjx.step(smoothing.soften(m), d), *inputs)
    return pullback(cotangent)


_straight_through_step.defvjp(_straight_through_forward, _straight_through_backward)


def _times(tree, scale):
    """`tree` with every floating-point leaf multiplied by the scalar `scale` (other leaves as they are)."""

    def times(x):
        return x * jnp.asarray(scale, x.dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x

    return jax.tree.map(times, tree)


@jax.custom_vjp
def clip_gradient(data: mjx.Data, max_norm: float) -> mjx.Data:
    """Identity on `data`; its cotangent is rescaled to at most `max_norm` (global norm)."""
    return data


def _clip_forward(data, max_norm):
    return data, max_norm


def _clip_backward(max_norm, cotangent):
    leaves = [x for x in jax.tree.leaves(cotangent) if jnp.issubdtype(x.dtype, jnp.floating)]
    norm = jnp.sqrt(sum(jnp.sum(x**2) for x in leaves))
    scale = jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-12))
    return _times(cotangent, scale), jnp.zeros_like(max_norm)


clip_gradient.defvjp(_clip_forward, _clip_backward)


@jax.custom_vjp
def scale_gradient(data: mjx.Data, factor: float) -> mjx.Data:
    """Identity on `data`; its cotangent is multiplied by `factor`."""
    return data


def _scale_forward(data, factor):
    return data, factor


def _scale_backward(factor, cotangent):
    return _times(cotangent, factor), jnp.zeros_like(factor)


scale_gradient.defvjp(_scale_forward, _scale_backward)
