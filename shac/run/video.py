"""Videos of deterministic episodes, rendered with MuJoCo's renderer.

Rendering needs an OpenGL backend chosen before `mujoco` is imported; the
launch scripts set `MUJOCO_GL=egl` (headless) unless it is already set.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import imageio.v2 as imageio
import mujoco
import numpy as np

from shac.run.evaluate import Episode

WIDTH, HEIGHT = 320, 240
CAMERA_AZIMUTH, CAMERA_ELEVATION = 90.0, -15.0
"""The camera looks along +y (the plane of the planar tasks), slightly from above."""


def _root_body(model: mujoco.MjModel) -> int:
    """The first body below the world (the one the camera follows or centres on)."""
    return 1 if model.nbody > 1 else 0


def _camera(model: mujoco.MjModel, data: mujoco.MjData) -> mujoco.MjvCamera:
    """A free camera framing the moving bodies of `data`'s initial pose."""
    root = _root_body(model)
    moving = model.geom_bodyid != 0
    if moving.any():
        offsets = np.linalg.norm(data.geom_xpos[moving] - data.xpos[root], axis=-1)
        radius = float(np.max(offsets + model.geom_rbound[moving]))
    else:
        radius = float(model.stat.extent)
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    camera.azimuth, camera.elevation = CAMERA_AZIMUTH, CAMERA_ELEVATION
    camera.distance = 4.0 * radius
    camera.lookat[:] = data.xpos[root]
    return camera


def render(model: mujoco.MjModel, qpos: np.ndarray, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """Frames of a trajectory of joint positions.

    The camera follows the root body when it floats freely (locomotion) and
    stays centred on its initial position otherwise (cart-pole, pendulum).

    Args:
        model: the MuJoCo model (`env.mj_model`).
        qpos: float [T, nq] joint positions, one frame each.

    Returns:
        uint8 [T, height, width, 3] RGB frames.
    """
    data = mujoco.MjData(model)
    data.qpos[:] = qpos[0]
    mujoco.mj_forward(model, data)
    camera = _camera(model, data)
    root = _root_body(model)
    free_root = any(
        model.jnt_bodyid[j] == root and model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE for j in range(model.njnt)
    )
    frames = np.empty((len(qpos), height, width, 3), np.uint8)
    with mujoco.Renderer(model, height=height, width=width) as renderer:
        for t, q in enumerate(qpos):
            data.qpos[:] = q
            mujoco.mj_forward(model, data)
            if free_root:
                camera.lookat[:] = data.xpos[root]
            renderer.update_scene(data, camera=camera)
            frames[t] = renderer.render()
    return frames


def write_mp4(path: Path, frames: np.ndarray, fps: float) -> Path:
    """Encodes uint8 [T, H, W, 3] frames as an H.264 mp4 (imageio's bundled ffmpeg)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # imageio starts ffmpeg with fork + exec; JAX's warning about forking a threaded process
        # concerns forks that keep running Python, not this.
        warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
        with imageio.get_writer(path, fps=fps, codec="libx264", macro_block_size=8) as writer:
            for frame in frames:
                writer.append_data(frame)
    return path


def episode_video(path: Path, model: mujoco.MjModel, episode: Episode, ctrl_dt: float) -> Path:
    """Renders `episode` up to its end (initial state included) at real-time speed into `path`."""
    steps = int(np.asarray(episode.alive).sum())
    qpos = np.asarray(episode.qpos)[: steps + 1]
    frames = render(model, qpos[np.isfinite(qpos).all(axis=1)])  # not the state of a step that exploded
    return write_mp4(path, frames, fps=1.0 / ctrl_dt)
