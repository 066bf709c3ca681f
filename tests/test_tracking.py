"""metrics.jsonl is always written; W&B files only when W&B is on."""

import json

from shac.config import LoggerConfig, TrainConfig
from shac.tracking import METRICS_FILE, Tracker


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
