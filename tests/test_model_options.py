"""Model options: MJCF values changed before the model compiles (envs/physics/model_options.py)."""

import re

import mujoco
import numpy as np
import pytest

import envs
from envs.base import ASSETS
from envs.physics.model_options import compile_model
from shac.config import EnvConfig, make_env


def ant(options, substeps=None):
    return compile_model(mujoco.MjSpec.from_file(str(ASSETS / "ant.xml")), options, substeps, 1 / 60)


def test_no_options_compile_the_mjcf_as_it_is():
    reference = mujoco.MjModel.from_xml_path(str(ASSETS / "ant.xml"))
    model = ant({})
    np.testing.assert_array_equal(model.body_mass, reference.body_mass)
    assert model.opt.timestep == reference.opt.timestep


def test_density_scales_every_derived_mass_and_inertia():
    light, heavy = ant({}), ant({"geom:*:density": 1000.0})
    # the MJCF's density is 5: every body built from geom volumes is 200 times heavier; the foot
    # spheres carry an explicit mass="0" and keep it
    np.testing.assert_allclose(heavy.body_mass[1:], 200 * light.body_mass[1:], rtol=1e-6)
    np.testing.assert_allclose(heavy.body_inertia[1:], 200 * light.body_inertia[1:], rtol=1e-6)
    assert heavy.body_subtreemass[1] == pytest.approx(182.176, rel=1e-4)


def test_joint_wildcard_means_the_actuated_joints():
    model = ant(
        {"joint:*:armature": 0.05, "joint:*:damping": 2.0, "joint:*:limit_timeconst": 0.1, "actuator:*:gear": 200.0}
    )
    # dofs 0-5 are the free joint (never changed by `*`), 6-13 the eight motor hinges
    np.testing.assert_array_equal(model.dof_armature, [0.0] * 6 + [0.05] * 8)
    np.testing.assert_array_equal(model.dof_damping, [0.0] * 6 + [2.0] * 8)
    np.testing.assert_array_equal(model.actuator_gear[:, 0], [200.0] * 8)
    np.testing.assert_array_equal(model.jnt_solref[1:], [[0.1, 1.0]] * 8)
    np.testing.assert_array_equal(model.jnt_solref[0], [0.02, 1.0])


def test_named_elements_change_alone():
    model = ant({"joint:hip_1:armature": 0.5, "geom:front_left_foot:friction": 0.75})
    np.testing.assert_array_equal(model.dof_armature[6:8], [0.5, 1.0])
    foot = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "front_left_foot")
    assert model.geom_friction[foot, 0] == 0.75
    assert model.geom_friction[foot + 1, 0] != 0.75


def test_substeps_set_the_time_step_and_the_env_follows():
    env = make_env(EnvConfig(name="ant", substeps=4, physics={"joint:*:armature": 0.1}))
    assert env.n_substeps == 4
    assert env.mj_model.opt.timestep == pytest.approx(1 / 240)
    np.testing.assert_allclose(np.asarray(env.mjx_model.dof_armature)[6:], 0.1)


@pytest.mark.parametrize(
    ("options", "substeps", "message"),
    [
        ({"joint:*:mass": 1.0}, None, "unknown physics option 'joint:*:mass'; accepted: joint:<name|*>:armature"),
        ({"armature": 1.0}, None, "unknown physics option 'armature'"),
        ({"joint:hip_9:armature": 1.0}, None, "no joint named 'hip_9' in the model; joints: root, hip_1"),
        ({"geom:*:density": -1.0}, None, "physics option 'geom:*:density' must be >= 0, got -1.0"),
        ({}, 0, "substeps must be >= 1, got 0"),
    ],
)
def test_bad_options_are_named(options, substeps, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        envs.make("ant", physics=options, substeps=substeps)
