"""The training loop's guards, on the toy env: bad epochs stop a run, a second signal stops it at once."""

import dataclasses
import itertools
import os
import signal

import jax.numpy as jnp
import pytest

from shac.config import CheckpointConfig, EnvConfig, EvalConfig, LoggerConfig, LoopConfig, TrainConfig
from shac.run import parallel
from shac.run import train as train_module
from shac.run.checkpoint import Checkpointer
from shac.run.tracking import read_records
from tests import tiny_configs
from tests.forked_python import run_python

CONFIG = TrainConfig(
    env=EnvConfig(name="tests.toy_env:RegisteredLineEnv", episode_length=4),
    algo=dataclasses.replace(tiny_configs.SHAC, max_epochs=20),
    eval=EvalConfig(every=0, episodes=2),
    logger=LoggerConfig(mode="disabled", progress=False),
    checkpoint=CheckpointConfig(every=2),
    train=LoopConfig(max_bad_epochs=3),
)


def test_bad_epochs_stop_the_run_with_a_checkpoint_of_the_last_good_state(tmp_path, monkeypatch):
    sharded_epoch = parallel.sharded_epoch

    def going_bad_at_epoch_4(shac, mesh):
        epoch_fn = sharded_epoch(shac, mesh)

        def epoch(state):
            state, metrics = epoch_fn(state)
            if int(state.epoch) >= 4:  # as if every actor gradient from epoch 4 on were non-finite
                metrics = {**metrics, "actor/skipped": jnp.float32(1.0)}
            return state, metrics

        return epoch

    monkeypatch.setattr(parallel, "sharded_epoch", going_bad_at_epoch_4)
    with pytest.raises(
        train_module.TrainingDiverged, match=r"the last good state \(epoch 3\) is the newest checkpoint"
    ):
        train_module.train(CONFIG, tmp_path)
    # saved at 2 (checkpoint.every), not at 4 (bad), and the last good epoch, 3, when stopping after 6
    assert Checkpointer(tmp_path).steps() == [2, 3]
    assert [r["train/bad_epochs"] for r in read_records(tmp_path)] == [0, 0, 0, 1, 2, 3]


def test_evaluations_last_eval_episode_length_steps_while_training_episodes_keep_theirs(tmp_path):
    from shac.run.commands import evaluate_run

    algo = dataclasses.replace(CONFIG.algo, max_epochs=2)  # 4-step windows over 4-step training episodes
    config = dataclasses.replace(CONFIG, algo=algo, eval=EvalConfig(every=1, episodes=2, episode_length=7))
    train_module.train(config, tmp_path)
    records = read_records(tmp_path)
    assert [r["eval/mean_length"] for r in records] == [7.0, 7.0]
    assert [r["train/episode_length"] for r in records] == [4.0, 4.0]
    # launch/evaluate.py's default is the run's evaluation length; episode_length= still overrides it
    assert evaluate_run(str(tmp_path), episodes=2)["mean_length"] == 7.0
    assert evaluate_run(str(tmp_path), episodes=2, episode_length=3)["mean_length"] == 3.0


def test_a_second_signal_exits_at_once_with_one_line(monkeypatch, capsys):
    exits = []

    def fake_exit(code):
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    with train_module._StopSignals() as stop:
        stop._handle(signal.SIGINT, None)  # the first asks for a checkpoint after this epoch
        assert stop.received == signal.SIGINT and not exits
        with pytest.raises(SystemExit):
            stop._handle(signal.SIGINT, None)
    assert exits == [130]
    assert capsys.readouterr().err.splitlines() == [
        "second SIGINT: stopped at once without a checkpoint; resume continues from the last complete one"
    ]


def test_a_run_whose_every_step_is_nonfinite_stops_in_one_line_with_a_non_zero_exit_and_no_policy(tmp_path):
    # every step of `line_nan` is non-finite: each epoch skips its actor update and resets all 4 envs
    result = run_python(
        "-m", "tests.toy_train", "env.name=line_nan", "train.max_bad_epochs=2", f"hydra.run.dir={tmp_path}", timeout=300
    )
    assert result.returncode == 1
    warning = "BAD EPOCH 1: actor update skipped (non-finite gradient); 1 in a row (stopping at train.max_bad_epochs=2)"
    assert warning in result.stdout and warning in (tmp_path / "train.log").read_text()  # Hydra's console and log
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: stopped after epoch 2: 2 epochs in a row skipped their actor update or reset more than half the envs "
        "as non-finite or too fast (train.max_bad_epochs); no epoch of this launch was good, so nothing was "
        "checkpointed. The physics or the learning rate is likely wrong: check randomization ranges, "
        "env.max_velocity, smoothing, algo.actor_lr"
    )
    records = read_records(tmp_path)
    assert [r["train/bad_epochs"] for r in records] == [1, 2]
    assert all(r["resets/nonfinite_envs"] == 4 and r["resets/nonfinite"] == 16 for r in records)  # N = 4, N h = 16
    assert not (tmp_path / "policy.msgpack").exists()
    assert Checkpointer(tmp_path).steps() == []
    assert not (tmp_path / "run.lock").exists()  # released


def test_a_resumed_run_trains_past_the_corrupt_checkpoint_it_fell_back_from(tmp_path):
    def toy_train(*args):
        return run_python("-m", "tests.toy_train", "checkpoint.every=2", *args, timeout=300)

    first = toy_train("algo.max_epochs=4", f"hydra.run.dir={tmp_path}")
    assert first.returncode == 0, first.stderr[-3000:]
    newest = tmp_path / "checkpoints" / "4"
    data = max((p for p in (newest / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[:10])  # truncated
    resumed = toy_train(f"resume={tmp_path}", "algo.max_epochs=6")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    output = resumed.stdout + resumed.stderr
    assert f"checkpoint '{newest}' is unreadable" in output
    assert (
        f"discarded the unreadable checkpoint '{newest}' (moved to '{tmp_path / 'unreadable_checkpoints' / '4'}')"
        in (output)
    )
    assert Checkpointer(tmp_path).steps() == [2, 4, 6]  # epochs 3 and 4 trained again, 4 saved again
    assert [r["epoch"] for r in read_records(tmp_path)] == [1, 2, 3, 4, 5, 6]


def test_a_time_budget_stops_the_run_and_decays_the_rates_on_its_clock_and_a_resume_goes_on_from_it(
    tmp_path, monkeypatch
):
    readings = itertools.count(0.0, 0.5)  # every epoch takes 0.5 s on this clock; the first is not counted
    monkeypatch.setattr(train_module, "time", type("Clock", (), {"perf_counter": staticmethod(lambda: next(readings))}))
    algo = dataclasses.replace(CONFIG.algo, budget_minutes=2.0 / 60)
    state, _ = train_module.train(dataclasses.replace(CONFIG, algo=algo), tmp_path)
    records = read_records(tmp_path)
    # 2 s spent after epoch 5 of max_epochs=20: 0.5 s each for epochs 2 to 5
    assert int(state.epoch) == 5 and Checkpointer(tmp_path).steps() == [2, 4, 5]
    assert [r["train/seconds"] for r in records] == [0.0, 0.5, 1.0, 1.5, 2.0]
    # each epoch's decay position: max(epochs before it, seconds before it / 2 s * 20 epochs)
    positions = [0, 1, 5, 10, 15]
    expected = [algo.actor_lr + (algo.min_lr - algo.actor_lr) * p / 20 for p in positions]
    assert [r["actor/lr"] for r in records] == pytest.approx(expected)
    assert (tmp_path / "policy.msgpack").exists()

    state, _ = train_module.train(dataclasses.replace(CONFIG, algo=algo), tmp_path, resume=True)
    assert int(state.epoch) == 5 and len(read_records(tmp_path)) == 5  # the budget is spent: nothing to train

    longer = dataclasses.replace(algo, budget_minutes=3.0 / 60)
    state, _ = train_module.train(dataclasses.replace(CONFIG, algo=longer), tmp_path, resume=True)
    records = read_records(tmp_path)
    assert int(state.epoch) == 8 and [r["train/seconds"] for r in records[5:]] == [2.0, 2.5, 3.0]
    # epoch 6 starts from the checkpoint's 2 s: 2 / 3 of the decay, position 13.33 of 20
    assert records[5]["actor/lr"] == pytest.approx(algo.actor_lr + (algo.min_lr - algo.actor_lr) * 2 / 3)


def test_a_step_budget_stops_the_run_at_the_first_epoch_past_it_and_decays_the_rates_over_it(tmp_path):
    algo = dataclasses.replace(CONFIG.algo, max_env_steps=70)  # 16 steps per epoch (4 envs x 4 steps)
    state, _ = train_module.train(dataclasses.replace(CONFIG, algo=algo), tmp_path)
    records = read_records(tmp_path)
    # 64 steps after epoch 4, 80 after epoch 5: the first epoch that ends at or past 70
    assert int(state.epoch) == 5 and [r["env_steps"] for r in records] == [16, 32, 48, 64, 80]
    assert Checkpointer(tmp_path).steps() == [2, 4, 5] and (tmp_path / "policy.msgpack").exists()
    # each epoch's decay position: max(epochs before it, steps before it / 70 * 20 epochs)
    positions = [max(k, 16 * k / 70 * 20) for k in range(5)]
    expected = [algo.actor_lr + (algo.min_lr - algo.actor_lr) * min(p, 20) / 20 for p in positions]
    assert [r["actor/lr"] for r in records] == pytest.approx(expected)

    state, _ = train_module.train(dataclasses.replace(CONFIG, algo=algo), tmp_path, resume=True)
    assert int(state.epoch) == 5 and len(read_records(tmp_path)) == 5  # the budget is spent: nothing to train
    longer = dataclasses.replace(algo, max_env_steps=96)
    state, _ = train_module.train(dataclasses.replace(CONFIG, algo=longer), tmp_path, resume=True)
    assert int(state.epoch) == 6 and read_records(tmp_path)[-1]["env_steps"] == 96
