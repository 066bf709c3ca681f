"""MJX's small-vector math as contractions: the same values and derivatives as MJX's own."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mujoco import mjx

import envs
from envs.physics import mjx_math as contracted
from envs.private_apis import mjx_math_function

RNG = np.random.default_rng(0)
CASES = {
    "quat_mul": (RNG.normal(size=4), RNG.normal(size=4)),
    "quat_to_mat": (RNG.normal(size=4),),
    "rotate": (RNG.normal(size=3), RNG.normal(size=4)),
    "matmul_unroll": (RNG.normal(size=(3, 3)), RNG.normal(size=(3, 4))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_vector_jacobian_products_match_mjx(name):
    args = [jnp.asarray(a, jnp.float32) for a in CASES[name]]
    ours, theirs = contracted.REPLACEMENTS[name], mjx_math_function(name)
    np.testing.assert_allclose(ours(*args), theirs(*args), rtol=1e-5, atol=1e-6)
    cotangent = jnp.asarray(RNG.normal(size=np.shape(theirs(*args))), jnp.float32)
    _, pull_ours = jax.vjp(ours, *args)
    _, pull_theirs = jax.vjp(theirs, *args)
    for a, b in zip(pull_ours(cotangent), pull_theirs(cotangent), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_contractions_are_swapped_in_only_inside_the_block():
    original = mjx_math_function("quat_mul")
    with contracted.contractions():
        assert mjx_math_function("quat_mul") is contracted.quat_mul
        with contracted.contractions():
            pass
        assert mjx_math_function("quat_mul") is contracted.quat_mul
    assert mjx_math_function("quat_mul") is original


@pytest.mark.slow
def test_ant_step_jacobian_matches_mjx_autodiff():
    # one physics step of the ant (free joint: quaternion products, rotations) from a moving state
    env = envs.make("ant")
    data = jax.jit(env.reset)(jax.random.key(0)).pipeline_state
    data = data.replace(qvel=jnp.asarray(RNG.normal(size=env.mj_model.nv), jnp.float32))

    def step(qpos, qvel, ctrl):
        out = mjx.step(env.mjx_model, data.replace(qpos=qpos, qvel=qvel, ctrl=ctrl))
        return jnp.concatenate([out.qpos, out.qvel])

    args = (data.qpos, data.qvel, 0.5 * jnp.ones(env.action_size))
    theirs = jax.jit(jax.jacrev(step, argnums=(0, 1, 2)))(*args)
    ours = jax.jit(contracted.with_contractions(jax.jacrev(step, argnums=(0, 1, 2))))(*args)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * float(jnp.abs(b).max()))
