"""metrics.jsonl is always written; W&B files only when W&B is on; plain progress lines off a terminal, their
steps/s, ETA and return; the JSON last line of launch/train.py."""

import json
import math
import re
import sys
import time

from shac.config import AlgoConfig, LoggerConfig, TrainConfig
from shac.run import tracking
from shac.run.tracking import (
    METRICS_FILE,
    WANDB_ID_FILE,
    Pace,
    RecentReturns,
    Tracker,
    log_artifact,
    progress_line,
    read_records,
)
from tests.forked_python import run_python


def config(mode):
    return TrainConfig(logger=LoggerConfig(mode=mode, progress=False))


def test_disabled_mode_writes_metrics_and_nothing_for_wandb(tmp_path):
    with Tracker(config("disabled"), tmp_path) as tracker:
        tracker.log(1, 2048, {"critic/loss": 0.5, "train/episode_return": float("nan")})
        tracker.log(2, 4096, {"critic/loss": 0.25, "train/episode_return": -10.0})
    records = [json.loads(line) for line in (tmp_path / METRICS_FILE).read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2]
    assert [r["env_steps"] for r in records] == [2048, 4096]
    assert records[0]["train/episode_return"] is None  # non-finite becomes null, keeping valid JSON
    assert records[1]["critic/loss"] == 0.25
    assert all(r["wall_time_s"] >= 0 for r in records)
    assert not (tmp_path / "wandb").exists()


def test_offline_mode_writes_a_wandb_run_without_an_account(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    with Tracker(config("offline"), tmp_path) as tracker:
        tracker.log(1, 2048, {"critic/loss": 0.5})
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert list(runs[0].glob("*.wandb"))
    assert (tmp_path / METRICS_FILE).is_file()


def test_a_resumed_tracker_keeps_records_up_to_its_start_and_continues_the_clock(tmp_path):
    with Tracker(config("disabled"), tmp_path) as tracker:
        for epoch in range(1, 6):
            tracker.log(epoch, epoch * 10, {"critic/loss": float(epoch)})
    lines = (tmp_path / METRICS_FILE).read_text().splitlines()
    kept_clock = json.loads(lines[2])["wall_time_s"]
    (tmp_path / METRICS_FILE).write_text("\n".join(lines) + '\n{"epoch": 6, "env_st')  # a line cut by a kill
    with Tracker(config("disabled"), tmp_path, start_epoch=3) as tracker:
        assert tracker.last_record["epoch"] == 3
        tracker.log(4, 40, {"critic/loss": -4.0})
    records = read_records(tmp_path)
    assert [r["epoch"] for r in records] == [1, 2, 3, 4]
    assert records[-1]["critic/loss"] == -4.0
    assert records[-1]["wall_time_s"] >= kept_clock


def test_offline_run_logs_video_and_artifacts_into_one_wandb_run_across_resumes(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    video = tmp_path / "epoch_1.mp4"
    video.write_bytes(b"\0" * 64)
    with Tracker(config("offline"), tmp_path) as tracker:
        tracker.log(1, 2048, {"critic/loss": 0.5})
        tracker.log_video(1, video)
    run_id = (tmp_path / WANDB_ID_FILE).read_text().strip()
    log_artifact(config("offline"), tmp_path, "policy", "model", [video])
    runs = sorted((tmp_path / "wandb").glob(f"offline-run-*-{run_id}*"))
    assert len(runs) == 2  # the training run and the export, under one W&B id
    assert list(runs[0].glob("files/media/videos/eval/video_1_*.mp4"))
    assert written_within(next(runs[1].glob("*.wandb")), f"policy-{run_id}".encode(), seconds=60)


def written_within(path, content: bytes, seconds: float) -> bool:
    """Whether `content` appears in the file at `path` within `seconds`. W&B's service process writes a run's
    file on its own: on a loaded CPU the export's records reached it after `finish` returned (the file held only
    its header when first read)."""
    deadline = time.monotonic() + seconds
    while content not in path.read_bytes():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def test_a_warning_shows_at_the_end_of_the_progress_line_until_cleared(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # the live bar is for terminals only
    progress = TrainConfig(logger=LoggerConfig(mode="disabled", progress=True))
    with Tracker(progress, tmp_path) as tracker:
        task = tracker._progress.tasks[0]
        assert task.fields["warning"] == ""
        tracker.warn("BAD EPOCH 3: actor update skipped (non-finite gradient); 1 in a row")
        assert task.fields["warning"] == "| BAD EPOCH 3: actor update skipped (non-finite gradient); 1 in a row"
        tracker.warn("")
        assert task.fields["warning"] == ""


def test_the_live_bar_shows_the_recent_return_and_no_rate_before_a_second_epoch(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    progress = TrainConfig(algo=AlgoConfig(num_envs=2), logger=LoggerConfig(mode="disabled", progress=True))
    with Tracker(progress, tmp_path) as tracker:
        tracker.compiled(41.0)
        metrics = {"train/episodes": 2.0, "train/episode_return": -7.0}
        tracker.epoch_done(1, 16, metrics)
        tracker.log(1, 16, metrics)
        fields = tracker._progress.tasks[0].fields
        assert (fields["episode_return"], fields["steps_per_s"], fields["eta"]) == ("-7.0 (2 ep)", "-", "-")
        tracker.epoch_done(2, 32, metrics)
        tracker.log(2, 32, metrics)
        assert fields["steps_per_s"] != "-" and fields["eta"] != "-"


def test_off_a_terminal_a_warning_is_a_line_of_its_own(tmp_path, capsys):
    progress = TrainConfig(logger=LoggerConfig(mode="disabled", progress=True))
    with Tracker(progress, tmp_path) as tracker:
        assert tracker._progress is None  # pytest's captured stdout is not a terminal
        tracker.warn("BAD EPOCH 3: actor update skipped (non-finite gradient); 1 in a row")
        tracker.warn("")
    assert capsys.readouterr().out == "warning: BAD EPOCH 3: actor update skipped (non-finite gradient); 1 in a row\n"


def test_progress_line_by_hand():
    # 88 s = 0:01:28, 792 s = 0:13:12
    line = progress_line(50, 500, 1_024_000, (-450.23, 1_280), 11_636.4, 88.0, 792.0)
    assert line == (
        "epoch 50/500 | 1,024,000 steps | return -450.2 (1,280 ep) | 11,636 steps/s | elapsed 0:01:28 | ETA 0:13:12"
    )
    assert progress_line(1, 500, 2048, None, None, 41.0, None) == (
        "epoch 1/500 | 2,048 steps | return - | - steps/s | elapsed 0:00:41 | ETA -"
    )
    assert progress_line(1, 500, 2048, None, None, 41.0, None, max_env_steps=4_096_000) == (
        "epoch 1/500 | 2,048/4,096,000 steps | return - | - steps/s | elapsed 0:00:41 | ETA -"
    )


def test_pace_leaves_out_the_first_epoch_and_takes_medians_of_the_recent_ones():
    pace = Pace(window=3)
    pace.add(1, 2048, 41.0)  # the end of the first epoch: its 41 s, compilation included, count nowhere
    assert pace.steps_per_s() is None and pace.seconds_per_epoch() is None
    for epoch, end in [(2, 41.5), (3, 42.0), (4, 50.5), (5, 51.5)]:  # epoch 4 stalls (an evaluation compiling)
        pace.add(epoch, epoch * 2048, end)
    # the window holds epochs 3, 4 and 5, of 0.5, 8.5 and 1.0 s (a mean would say 3.33 s)
    assert pace.seconds_per_epoch() == 1.0
    assert pace.steps_per_s() == 2048.0
    pace.add(7, 7 * 2048, 52.5)  # two epochs between two ends: 0.5 s each
    pace.add(8, 8 * 2048, 53.0)
    assert pace.seconds_per_epoch() == 0.5  # epochs 5, 6-7 and 8, the stall gone
    assert pace.steps_per_s() == 4096.0


def test_recent_returns_go_back_until_they_hold_the_minimum_count():
    returns = RecentReturns(min_episodes=4)
    returns.add(0, float("nan"))  # no episode ended
    assert returns.mean() is None
    returns.add(2, -10.0)
    assert returns.mean() == (-10.0, 2)
    returns.add(1, -40.0)
    assert returns.mean() == (-20.0, 3)  # (2 x -10 - 40) / 3
    returns.add(0, float("nan"))
    returns.add(3, 20.0)
    assert returns.mean() == (5.0, 4)  # the latest 3 and the 1 before them make 4: the 2 at -10 drop out
    returns.add(4, 1.0)
    assert returns.mean() == (1.0, 4)
    returns.add(1, float("nan"))  # a non-finite return shows, until it is old enough to drop out
    mean, episodes = returns.mean()
    assert math.isnan(mean) and episodes == 5
    returns.add(4, 3.0)
    assert returns.mean() == (3.0, 4)


def test_the_compile_time_is_a_line_of_its_own_and_returns_show_once_an_episode_ends(tmp_path, capsys):
    progress = TrainConfig(
        algo=AlgoConfig(num_envs=2, max_epochs=4), logger=LoggerConfig(mode="disabled", progress=True, progress_every=1)
    )
    with Tracker(progress, tmp_path) as tracker:
        tracker.compiled(41.4)
        for epoch, (episodes, episode_return) in enumerate([(0, float("nan")), (2, -7.0), (0, float("nan"))], 1):
            metrics = {"train/episodes": episodes, "train/episode_return": episode_return}
            tracker.epoch_done(epoch, epoch * 16, metrics)
            tracker.log(epoch, epoch * 16, metrics)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "compiled in 41 s"
    assert [m[4] for m in map(LINE.match, lines[1:])] == ["-", "-7.0 (2 ep)", "-7.0 (2 ep)"]
    assert " - steps/s " in lines[1] and lines[1].endswith("ETA -")  # one epoch ended: no rate yet
    assert " - steps/s " not in lines[2] and not lines[2].endswith("ETA -")


LINE = re.compile(
    r"^epoch (\d+)/(\d+) \| ([\d,]+) steps \| return (-|-?[\d.]+ \([\d,]+ ep\)) \| (-|[\d,]+) steps/s \| "
    r"elapsed \d+:\d\d:\d\d \| ETA (-|\d+:\d\d:\d\d)$"
)
"""A complete plain progress line."""


def test_a_training_run_redirected_to_a_file_prints_complete_progress_lines(tmp_path):
    # the toy env's run (tests/toy_train.py) with progress on and stdout a file, as on a cluster
    overrides = ["logger.progress=true", "logger.progress_every=2", "algo.max_epochs=5", f"hydra.run.dir={tmp_path}"]
    result = run_python("-m", "tests.toy_train", *overrides)  # stdout captured: not a terminal
    assert result.returncode == 0, result.stderr[-3000:]
    text = result.stdout
    assert "\x1b" not in text and "\r" not in text  # no terminal control codes: no live bar
    output = text.splitlines()
    assert re.fullmatch(r"compiled in \d+ s", output[0])  # the first epoch, before any progress line
    lines = [m for m in map(LINE.match, output) if m]
    # every 2 epochs and the last; each line whole, its steps 4 envs x 4 steps per epoch
    assert [(m[1], m[2], m[3]) for m in lines] == [("2", "5", "32"), ("4", "5", "64"), ("5", "5", "80")]
    # each env's 4-step episode ends every epoch: the latest epoch's 4 episodes; rates from epochs 2 on
    assert all(m[4].endswith(" (4 ep)") and m[5] != "-" and m[6] != "-" for m in lines)
    summary = json.loads(output[-1])  # the last line is JSON, as launch/evaluate.py's
    assert (summary["epoch"], summary["env_steps"]) == (5, 80)
    assert isinstance(summary["eval/mean_return"], float) and summary["wall_time_s"] > 0


def test_the_eta_ends_at_the_step_budget_where_it_comes_before_max_epochs(tmp_path, monkeypatch):
    def eta_after_three_epochs(algo: AlgoConfig, run_dir) -> float:
        run_dir.mkdir()
        readings = iter([0.0, 10.0, 11.0, 12.0])  # the tracker's start, then one epoch of 16 steps ending each second
        monkeypatch.setattr(tracking, "time", type("Clock", (), {"perf_counter": staticmethod(lambda: next(readings))}))
        with Tracker(TrainConfig(algo=algo, logger=LoggerConfig(mode="disabled")), run_dir) as tracker:
            for epoch in (1, 2, 3):
                tracker.epoch_done(epoch, 16 * epoch, {"train/episodes": 0.0, "train/episode_return": float("nan")})
            return tracker._eta(3)

    # 16 steps/s and 1 s per epoch: the 97 epochs left are 97 s, the 16 steps left of the budget 1 s
    assert eta_after_three_epochs(AlgoConfig(max_epochs=100), tmp_path / "epochs") == 97.0
    assert eta_after_three_epochs(AlgoConfig(max_epochs=100, max_env_steps=64), tmp_path / "steps") == 1.0
