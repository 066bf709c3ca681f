"""End to end through the command line: train the pendulum, check the run directory, evaluate and export it."""

import json
import shutil
from pathlib import Path

import imageio.v3 as iio
import jax
import numpy as np
import onnxruntime
import pytest

from launch import cli
from launch.record_trajectory import RecordArgs, policy_controller, simulate
from shac.run.commands import evaluate_run
from shac.run.evaluate import run_episode
from shac.run.export import policy_function
from shac.run.serialization import load_run_policy
from shac.sysid.recording import record
from shac.tools.falls import fall_report_of_run
from tests.conftest import run_cli as run

REQUIRED_METRICS = {"epoch", "env_steps", "wall_time_s", "train/episode_return", "actor/grad_norm", "critic/loss"}
# Hanging still scores about -987 (-(pi^2) per step for 100 steps); a policy that swings the
# pendulum up and holds it scores above -550 (seed 0 reaches about -320 at 150 epochs).
THRESHOLD = -550.0


def test_run_directory_holds_config_metrics_wandb_and_policy(pendulum_run):
    records = [json.loads(line) for line in (pendulum_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == list(range(1, 151))
    assert all(r.keys() >= REQUIRED_METRICS for r in records)
    assert all(f"reward/{term}" in records[-1] for term in ("angle", "angular_velocity", "control"))
    assert records[-1]["env_steps"] == 150 * 64 * 32
    config = json.loads((pendulum_run / "config.json").read_text())
    assert config["env"]["name"] == "pendulum_swingup" and config["algo"]["max_epochs"] == 150
    assert (pendulum_run / ".hydra" / "config.yaml").is_file()
    assert (pendulum_run / "policy.msgpack").stat().st_size > 0
    assert sorted(int(p.name) for p in (pendulum_run / "checkpoints").iterdir()) == [50, 100, 150]
    assert sorted(p.name for p in (pendulum_run / "videos").iterdir()) == [
        "epoch_100.mp4",
        "epoch_150.mp4",
        "epoch_50.mp4",
    ]
    training_run = sorted((pendulum_run / "wandb").glob("offline-run-*"))[0]  # the export adds one later
    logged = next(training_run.glob("*.wandb")).read_bytes()
    run_id = (pendulum_run / "wandb_run_id").read_text().strip()
    for artifact in (f"checkpoint-{run_id}", f"policy-{run_id}"):  # the final checkpoint and policy
        assert artifact.encode() in logged
    assert list(training_run.glob("files/media/videos/eval/video_150_*.mp4"))


def test_pendulum_learns_to_swing_up(pendulum_run):
    records = [json.loads(line) for line in (pendulum_run / "metrics.jsonl").read_text().splitlines()]
    evals = [r["eval/mean_return"] for r in records if "eval/mean_return" in r]
    assert len(evals) == 3
    assert [r["eval/terminated"] for r in records if "eval/terminated" in r] == [0.0] * 3
    assert evals[-1] > THRESHOLD, evals
    assert evals[-1] > evals[0] + 100.0, evals


def test_evaluate_cli_prints_a_json_line(pendulum_run):
    summary = json.loads(run("launch/evaluate.py", f"run_dir={pendulum_run}", "episodes=8").strip().splitlines()[-1])
    assert summary["episodes"] == 8
    assert summary["mean_return"] > THRESHOLD
    assert summary["std_return"] >= 0.0
    assert (summary["mean_length"], summary["terminated"]) == (100.0, 0.0)  # the pendulum never terminates


def test_the_fall_report_summarises_its_own_episodes_as_the_evaluation_does(pendulum_run):
    report = fall_report_of_run(str(pendulum_run), episodes=4, seed=2)
    assert (report["episodes"], report["falls"], report["before_fall"]) == (4, 0, None)  # the pendulum never falls
    evaluation = evaluate_run(str(pendulum_run), episodes=4, seed=2)
    assert report["evaluation"].keys() == evaluation.keys()
    assert (report["evaluation"]["mean_length"], report["evaluation"]["terminated"]) == (100.0, 0.0)
    # a swing-up is not chaotic over 100 steps: the two programs' episodes end alike
    assert report["evaluation"]["mean_return"] == pytest.approx(evaluation["mean_return"], rel=1e-4)
    assert "perturbed" not in report
    perturbed = fall_report_of_run(str(pendulum_run), episodes=4, seed=2, perturb=1e-6)["perturbed"]
    assert (perturbed["falls"], perturbed["outcome_changed"], perturbed["length_changed"]) == (0, 0, 0)
    assert perturbed["evaluation"]["mean_return"] == pytest.approx(evaluation["mean_return"], rel=1e-3)
    with pytest.raises(ValueError, match=r"perturb must be >= 0 \(0: no perturbed pass\), got -1.0"):
        fall_report_of_run(str(pendulum_run), perturb=-1.0)


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # imageio reads through an ffmpeg subprocess
def test_evaluate_cli_evaluates_a_checkpoint_over_episodes_of_a_given_length_and_writes_its_video(pendulum_run):
    args = ["checkpoint=50", "episodes=4", "video=true", "episode_length=20"]  # shorter than the run's window too
    line = run("launch/evaluate.py", f"run_dir={pendulum_run}", *args)
    summary = json.loads(line.strip().splitlines()[-1])
    assert (summary["episodes"], summary["mean_length"]) == (4, 20.0)  # the run's episodes last 100 steps
    video = iio.imread(summary["video"])
    assert video.shape[0] == 21  # the initial state and 20 steps
    assert summary["video"] == str(pendulum_run / "videos" / "evaluate_50_seed0.mp4")


def test_a_softened_run_is_evaluated_under_the_physical_contact_model_on_request(pendulum_run, tmp_path):
    config = json.loads((pendulum_run / "config.json").read_text())
    config["smoothing"]["mode"] = "soft"
    (tmp_path / "config.json").write_text(json.dumps(config))
    shutil.copy(pendulum_run / "policy.msgpack", tmp_path)
    trained, physical = load_run_policy(tmp_path), load_run_policy(tmp_path, physical=True)
    assert (trained.env.smoothing.mode, physical.env.smoothing.mode) == ("soft", "none")
    assert physical.config.smoothing.mode == "none"
    jax.tree.map(np.testing.assert_array_equal, trained.actor_params, physical.actor_params)


def test_a_closed_loop_recording_follows_the_policy_as_its_episode_does_and_replays_open_loop(pendulum_run):
    def args(*argv):
        return cli.parse(RecordArgs, ["env=pendulum_swingup", "out=x.npz", f"policy={pendulum_run}", *argv], "usage")

    def recorded(*argv):
        return simulate(args(*argv), env, controller)[0]

    env, controller = policy_controller(args())
    # without noise or dither, MuJoCo's C simulator under the policy retraces the policy's MJX episode
    alone = recorded("seconds=2", "amplitudes=[0]", "frequencies=[1]", "qpos_noise=0", "qvel_noise=0")
    policy = load_run_policy(pendulum_run)
    episode = run_episode(env, policy.actor, policy.actor_params, policy.normalizer, jax.random.key(0))
    np.testing.assert_allclose(alone.qpos, episode.qpos[: len(alone.qpos)], atol=1e-3)
    np.testing.assert_allclose(alone.ctrl[:-1], episode.actions[: len(alone.ctrl) - 1], atol=1e-3)
    assert np.ptp(alone.qpos) > 0.1  # it swings: the policy acts, the pendulum does not hang still
    # with a dither the commands differ from the policy's alone, and are recorded as applied: replayed open
    # loop they retrace the recording
    dithered = recorded("seconds=2", "amplitudes=[0.3]", "frequencies=[7]", "qpos_noise=0", "qvel_noise=0")
    assert np.abs(dithered.ctrl - alone.ctrl).max() > 0.1
    replayed = record(env.mj_model, dithered.ctrl, dithered.qpos[0], dithered.qvel[0], env.ctrl_dt)
    np.testing.assert_allclose(replayed.qpos, dithered.qpos, atol=1e-9)


def test_evaluate_refuses_an_episode_length_below_one_before_loading_the_run(tmp_path):
    with pytest.raises(ValueError, match=r"episode_length must be >= 1 .* got 0"):
        evaluate_run(str(tmp_path), episode_length=0)


def test_export_cli_writes_a_policy_onnxruntime_runs_like_jax(pendulum_run):
    spec_path = run("launch/export.py", f"run_dir={pendulum_run}").strip().splitlines()[-1]
    spec = json.loads(Path(spec_path).read_text())
    assert (spec["env"], spec["obs_size"], spec["action_size"]) == ("pendulum_swingup", 3, 1)
    assert spec["source"] == str(pendulum_run / "policy.msgpack")
    policy = load_run_policy(pendulum_run)
    obs = np.random.default_rng(0).normal(0.0, 2.0, (64, 3)).astype(np.float32)
    session = onnxruntime.InferenceSession(str(pendulum_run / "policy.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(
        session.run(["action"], {"obs": obs})[0], np.asarray(jax.jit(policy_function(policy))(obs)), atol=1e-5
    )
