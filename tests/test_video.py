"""Rendering with MuJoCo's renderer (headless EGL, set up in conftest) and mp4 encoding."""

import imageio.v3 as iio
import numpy as np
import pytest

import envs
from shac.run.evaluate import Episode
from shac.run.video import HEIGHT, WIDTH, episode_video, render


def test_render_draws_each_pose():
    model = envs.make("pendulum_swingup").mj_model
    frames = render(model, np.array([[np.pi], [np.pi], [0.0]]))  # hanging, hanging, upright
    assert frames.shape == (3, HEIGHT, WIDTH, 3) and frames.dtype == np.uint8
    assert frames[0].std() > 0  # something was drawn
    np.testing.assert_array_equal(frames[0], frames[1])
    assert np.abs(frames[0].astype(int) - frames[2]).sum() > 0


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # imageio reads through an ffmpeg subprocess
def test_episode_video_covers_the_episode_up_to_its_end(tmp_path):
    env = envs.make("pendulum_swingup")
    steps = 10
    qpos = np.pi + np.linspace(0.0, 1.0, 21)[:, None]  # 20 steps recorded, the episode ended after 10
    alive = (np.arange(20) < steps).astype(np.float32)
    episode = Episode(obs=np.zeros((20, 3)), actions=np.zeros((20, 1)), qpos=qpos, rewards=np.zeros(20), alive=alive)
    path = episode_video(tmp_path / "videos" / "episode.mp4", env.mj_model, episode, env.ctrl_dt)
    video = iio.imread(path)
    assert video.shape == (steps + 1, HEIGHT, WIDTH, 3)  # the initial state and one frame per step
    assert iio.immeta(path)["fps"] == 1.0 / env.ctrl_dt


@pytest.mark.parametrize("name", ["ant", "half_cheetah"])
def test_a_walker_far_from_the_start_still_walks_over_a_textured_ground_that_shows_its_motion(name):
    model = envs.make(name).mj_model
    start = model.qpos0.copy()
    far, further = start.copy(), start.copy()
    far[0], further[0] = 100.0, 100.5  # past the 40 m plane these tasks had, half a checker square apart
    frames = render(model, np.stack([far, further]))
    ground = frames[:, 2 * HEIGHT // 3 :].astype(int)  # the lower third: ground in front of the robot
    assert ground[0].std() > 5  # a pattern, not a uniform colour (or the black beyond a finite plane)
    assert np.abs(ground[0] - ground[1]).mean() > 1  # the camera follows: the ground moves past
