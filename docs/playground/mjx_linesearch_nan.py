"""MJX's NaN Jacobians at inactive constraints, and the held line-search step that removes them.

    python docs/playground/mjx_linesearch_nan.py

A cart on a slider with a limit it never reaches, and a pole (tests/assets/cart_pole_limited.xml):
the Jacobian of one `mjx.step` over 4,096 random states, counted NaN with MJX's own derivative and
with `envs.private_apis.mjx_linesearch_step_held` (docs/playground.md, "The NaN gradient").
"""

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

from envs.private_apis import mjx_linesearch_step_held

model = mjx.put_model(mujoco.MjModel.from_xml_path("tests/assets/cart_pole_limited.xml"), impl="jax")


def step(qpos, qvel):
    return mjx.step(model, mjx.make_data(model).replace(qpos=qpos, qvel=qvel)).qvel


n = 4096
qpos = jnp.stack(
    [
        jax.random.uniform(jax.random.key(0), (n,), minval=-0.5, maxval=0.5),
        jax.random.uniform(jax.random.key(1), (n,), minval=-3.14, maxval=3.14),
    ],
    1,
)
qvel = 0.1 * jax.random.normal(jax.random.key(2), (n, 2))


def nan_jacobians() -> int:
    """States whose Jacobian (with respect to qpos or qvel) has a NaN."""
    jacobians = jax.jit(jax.vmap(jax.jacrev(step, argnums=(0, 1))))(qpos, qvel)
    finite = jnp.stack([jnp.isfinite(j).all(axis=(1, 2)) for j in jacobians]).all(axis=0)
    return int((~finite).sum())


print(f"MJX's derivative: {nan_jacobians()} NaN Jacobians of {n} states")
with mjx_linesearch_step_held():
    print(f"step length held: {nan_jacobians()} NaN Jacobians of {n} states")
