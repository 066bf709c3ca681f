"""MJX's small-vector math as contractions with constant tensors, for a cheap reverse mode.

MJX writes quaternion products, rotation matrices and 3x3 products entry by entry
(`u[0] * v[0] - u[1] * v[1] ...`). Every entry read is a slice, and the transpose of a
slice is a pad to the full size followed by an add: the gradient of one ant step ran
thousands of these tiny ops, which on the CPU cost more than the physics itself
(docs/benchmarks.md, "Gradient overhead"). Written as contractions, the values agree to
float rounding and the backward pass is a few dot products.

`contractions()` swaps these functions into MJX while a step is traced (MJX looks them
up at trace time; the private hook is `envs.private_apis.mjx_math_swapped`) and restores
MJX's own afterwards, so other users of MJX in the same process are unaffected.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from envs.private_apis import mjx_math_swapped


def _quat_mul_tensor() -> np.ndarray:
    """float32 [4, 4, 4] T with (u * v)_i = sum_jk T_ijk u_j v_k (w, x, y, z order)."""
    t = np.zeros((4, 4, 4), np.float32)
    terms = [
        [(0, 0, 1), (1, 1, -1), (2, 2, -1), (3, 3, -1)],
        [(0, 1, 1), (1, 0, 1), (2, 3, 1), (3, 2, -1)],
        [(0, 2, 1), (1, 3, -1), (2, 0, 1), (3, 1, 1)],
        [(0, 3, 1), (1, 2, 1), (2, 1, -1), (3, 0, 1)],
    ]
    for i, row in enumerate(terms):
        for j, k, sign in row:
            t[i, j, k] = sign
    return t


def _rotation_tensor() -> np.ndarray:
    """float32 [3, 3, 4, 4] T with R(q)_ab = sum_jk T_abjk q_j q_k, MJX's `quat_to_mat` formula."""
    t = np.zeros((3, 3, 4, 4), np.float32)
    entries = {
        (0, 0): [((0, 0), 1), ((1, 1), 1), ((2, 2), -1), ((3, 3), -1)],
        (0, 1): [((1, 2), 2), ((0, 3), -2)],
        (0, 2): [((1, 3), 2), ((0, 2), 2)],
        (1, 0): [((1, 2), 2), ((0, 3), 2)],
        (1, 1): [((0, 0), 1), ((1, 1), -1), ((2, 2), 1), ((3, 3), -1)],
        (1, 2): [((2, 3), 2), ((0, 1), -2)],
        (2, 0): [((1, 3), 2), ((0, 2), -2)],
        (2, 1): [((2, 3), 2), ((0, 1), 2)],
        (2, 2): [((0, 0), 1), ((1, 1), -1), ((2, 2), -1), ((3, 3), 1)],
    }
    for (a, b), terms in entries.items():
        for (j, k), coefficient in terms:
            t[a, b, j, k] = coefficient
    return t


QUAT_MUL = _quat_mul_tensor()
ROTATION = _rotation_tensor()


def quat_mul(u: jax.Array, v: jax.Array) -> jax.Array:
    """Quaternion product u * v of two [4] quaternions (w, x, y, z)."""
    return jnp.einsum("ijk,j,k->i", QUAT_MUL.astype(u.dtype), u, v)


def quat_to_mat(q: jax.Array) -> jax.Array:
    """[3, 3] rotation matrix of the unit quaternion q [4]."""
    return jnp.einsum("abjk,j,k->ab", ROTATION.astype(q.dtype), q, q)


def rotate(vec: jax.Array, quat: jax.Array) -> jax.Array:
    """vec [3] rotated by the unit quaternion quat [4]."""
    if vec.ndim != 1:
        raise ValueError("vec must have no batch dimensions.")
    return jnp.einsum("abjk,j,k,b->a", ROTATION.astype(quat.dtype), quat, quat, vec)


def matmul_unroll(a: jax.Array, b: jax.Array) -> jax.Array:
    """a @ b of small matrices."""
    return a @ b


REPLACEMENTS: dict[str, Callable] = {
    "quat_mul": quat_mul,
    "quat_to_mat": quat_to_mat,
    "rotate": rotate,
    "matmul_unroll": matmul_unroll,
}


@contextlib.contextmanager
def contractions() -> Iterator[None]:
    """MJX traces with the functions of `REPLACEMENTS` inside the block, with its own outside."""
    with mjx_math_swapped(REPLACEMENTS):
        yield


def with_contractions(fn: Callable) -> Callable:
    """`fn`, traced inside `contractions()`."""

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        with contractions():
            return fn(*args, **kwargs)

    return traced
