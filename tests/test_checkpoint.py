"""Checkpoints of the full training state: round trip, refusals, fallbacks and clear errors.

Built on the pendulum's real (MJX) training state, straight from `Shac.init`, so
nothing here compiles an epoch.
"""

import dataclasses
import json
import logging
import os
import shutil
import socket

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shac.config import (
    AlgoConfig,
    CheckpointConfig,
    EnvConfig,
    LoggerConfig,
    TrainConfig,
    make_env,
    to_train_config,
)
from shac.core.algorithm import Shac
from shac.run import train as train_module
from shac.run.checkpoint import (
    Checkpointer,
    CheckpointError,
    IncompatibleCheckpointError,
    arrays_to_state,
    state_arrays,
)
from shac.run.run_dir import LOCK_FILE, RunDirectoryInUseError
from shac.run.serialization import save_config

CONFIG = TrainConfig(
    env=EnvConfig(name="pendulum_swingup"),
    algo=AlgoConfig(num_envs=4, horizon=4, max_epochs=10, actor_hidden=(8,), critic_hidden=(8,), critic_minibatches=2),
    logger=LoggerConfig(mode="disabled", progress=False),
    checkpoint=CheckpointConfig(every=2, max_to_keep=2),
)


def abstract_state(config):
    shac = Shac(config.algo, make_env(config.env))
    return jax.eval_shape(shac.init, jax.random.key(config.seed))


@pytest.fixture(scope="module")
def states():
    """(state, abstract state) of CONFIG, with distinct values in every float array."""
    shac = Shac(CONFIG.algo, make_env(CONFIG.env))

    @jax.jit
    def init(key):
        def vary(x):
            if not jnp.issubdtype(x.dtype, jnp.floating):
                return x
            return x + 0.5 * jnp.arange(x.size, dtype=x.dtype).reshape(x.shape)

        return jax.tree.map(vary, shac.init(key))

    return init(jax.random.key(CONFIG.seed)), abstract_state(CONFIG)


def at_epoch(state, epoch):
    return state.replace(epoch=jnp.asarray(epoch, jnp.int32))


def assert_states_equal(a, b):
    a, b = state_arrays(a), state_arrays(b)
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_state_arrays_round_trip_rewraps_the_key_and_rebuilds_empty_arrays(states):
    state, abstract = states
    arrays = state_arrays(state)
    assert "key" in arrays and arrays["key"].dtype == jnp.uint32  # the raw key data, not a typed key
    zero_size = [x for x in jax.tree.leaves(state) if x.size == 0]
    assert zero_size  # MJX keeps some (e.g. `act` of a model without activations) ...
    assert len(arrays) == len(jax.tree.leaves(state)) - len(zero_size)  # ... which are left out ...
    rebuilt = arrays_to_state(arrays, abstract)
    assert jax.tree.structure(rebuilt) == jax.tree.structure(state)
    for x, y in zip(jax.tree.leaves(rebuilt), jax.tree.leaves(state), strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype  # ... and come back with their shapes
    assert jax.random.key_data(rebuilt.key).tolist() == jax.random.key_data(state.key).tolist()


def test_save_and_restore_every_array_of_the_state(tmp_path, states):
    state, abstract = states
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        assert checkpoints.save(at_epoch(state, 2), CONFIG)
        checkpoints.wait_until_finished()
        assert checkpoints.steps() == [2]
        restored = checkpoints.restore(2, abstract, CONFIG)
        saved_config = checkpoints.saved_config(2)
    assert_states_equal(restored, at_epoch(state, 2))
    assert to_train_config(saved_config) == CONFIG
    # uncommitted, as a fresh state is: committed inputs would make the jitted epoch compile anew
    assert not any(x.committed for x in jax.tree.leaves(restored))


def test_max_to_keep_deletes_the_oldest(tmp_path, states):
    state, _ = states
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        for epoch in (2, 4, 6):
            checkpoints.save(at_epoch(state, epoch), CONFIG)
        checkpoints.wait_until_finished()
        assert checkpoints.steps() == [4, 6]  # max_to_keep = 2


def test_nonfinite_state_is_never_written(tmp_path, states, caplog):
    state, _ = states
    kernel = state.critic_params["params"]["MLP_0"]["Dense_0"]["kernel"]
    poisoned = jax.tree.map(lambda x: x, state)
    poisoned.critic_params["params"]["MLP_0"]["Dense_0"]["kernel"] = kernel.at[0, 0].set(jnp.nan)
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints, caplog.at_level(logging.ERROR):
        assert checkpoints.save(at_epoch(state, 2), CONFIG)
        assert not checkpoints.save(at_epoch(poisoned, 4), CONFIG)
        checkpoints.wait_until_finished()
        assert checkpoints.steps() == [2]
    assert "not saving the checkpoint of epoch 4" in caplog.text
    assert "critic_params/params/MLP_0/Dense_0/kernel" in caplog.text


def test_a_partial_checkpoint_is_never_taken_as_complete(tmp_path, states):
    state, abstract = states
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        checkpoints.save(at_epoch(state, 2), CONFIG)
    # what a run killed while saving epoch 4 leaves: orbax's temporary directory, half written
    partial = tmp_path / "checkpoints" / "4.orbax-checkpoint-tmp-1764460800"
    shutil.copytree(tmp_path / "checkpoints" / "2", partial)
    shutil.rmtree(partial / "state")
    reader = Checkpointer(tmp_path)
    assert reader.steps() == [2]  # readers ignore it (and leave it alone: a writer may be busy)
    assert partial.exists()
    with Checkpointer(tmp_path, CONFIG.checkpoint) as writer:  # a resumed run's writer removes it
        assert not partial.exists()
        assert int(writer.restore_latest(abstract, CONFIG).epoch) == 2


def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_and_says_so(tmp_path, states, caplog):
    state, abstract = states
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        checkpoints.save(at_epoch(state, 2), CONFIG)
        checkpoints.save(at_epoch(state, 4), CONFIG)
    for path in (tmp_path / "checkpoints" / "4" / "state").rglob("*"):
        if path.is_file():
            path.write_bytes(b"garbage")
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        with pytest.raises(CheckpointError, match=f"checkpoint '{tmp_path / 'checkpoints' / '4'}' is unreadable"):
            checkpoints.restore(4, abstract, CONFIG)
        with caplog.at_level(logging.WARNING):
            restored = checkpoints.restore_latest(abstract, CONFIG)
    assert int(restored.epoch) == 2
    assert f"checkpoint '{tmp_path / 'checkpoints' / '4'}' is unreadable" in caplog.text
    assert f"resuming from the older checkpoint '{tmp_path / 'checkpoints' / '2'}'" in caplog.text


def test_a_training_run_discards_the_unreadable_checkpoints_it_falls_back_from_and_saves_their_epochs_again(
    tmp_path, states, caplog
):
    state, abstract = states
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        checkpoints.save(at_epoch(state, 2), CONFIG)
        checkpoints.save(at_epoch(state, 4), CONFIG)
    newest = tmp_path / "checkpoints" / "4"
    data = max((p for p in (newest / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # truncated, as by a full disk
    with Checkpointer(tmp_path) as reader:  # evaluation or export: falls back, leaves the files alone
        assert int(reader.restore_latest(abstract, CONFIG).epoch) == 2
    assert newest.is_dir()
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints, caplog.at_level(logging.WARNING):
        assert int(checkpoints.restore_latest(abstract, CONFIG).epoch) == 2
        assert checkpoints.steps() == [2]
        # training goes on past epoch 4 and saves it again (orbax refuses a step that exists)
        assert checkpoints.save(at_epoch(state, 4), CONFIG)
        checkpoints.wait_until_finished()
        assert checkpoints.steps() == [2, 4]
        assert int(checkpoints.restore(4, abstract, CONFIG).epoch) == 4
    moved = tmp_path / "unreadable_checkpoints" / "4"
    assert (moved / "state").is_dir()
    assert f"discarded the unreadable checkpoint '{newest}' (moved to '{moved}')" in caplog.text


def test_a_checkpoint_whose_arrays_changed_on_disk_is_unreadable_and_falls_back(tmp_path, states, caplog):
    state, abstract = states
    mu = state.actor_opt_state.inner_state[1][0].mu["params"]["MLP_0"]["Dense_0"]["kernel"]
    changed = jax.tree.map(lambda x: x, state)
    changed.actor_opt_state.inner_state[1][0].mu["params"]["MLP_0"]["Dense_0"]["kernel"] = mu.at[0, 0].add(1.0)
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        checkpoints.save(at_epoch(state, 2), CONFIG)
        checkpoints.save(at_epoch(changed, 4), CONFIG)
    # checkpoint 4's arrays replaced by other bytes in a valid format: they load, but are not what was saved
    shutil.rmtree(tmp_path / "checkpoints" / "4" / "state")
    shutil.copytree(tmp_path / "checkpoints" / "2" / "state", tmp_path / "checkpoints" / "4" / "state")
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        mismatch = "checksum mismatch in actor_opt_state/inner_state/1/0/mu/params/MLP_0/Dense_0/kernel, epoch"
        with pytest.raises(CheckpointError, match=mismatch):
            checkpoints.restore(4, abstract, CONFIG)
        with caplog.at_level(logging.WARNING):
            restored = checkpoints.restore_latest(abstract, CONFIG)
    assert_states_equal(restored, at_epoch(state, 2))
    assert "its bytes changed on disk" in caplog.text


def test_missing_checkpoints_are_errors_naming_the_path(tmp_path, states):
    state, abstract = states
    with pytest.raises(CheckpointError, match=f"no complete checkpoint in '{tmp_path / 'checkpoints'}'"):
        Checkpointer(tmp_path).restore_latest(abstract, CONFIG)
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        checkpoints.save(at_epoch(state, 2), CONFIG)
        checkpoints.wait_until_finished()
        with pytest.raises(CheckpointError, match=r"no checkpoint 7 in '.*checkpoints'; available: 2"):
            checkpoints.restore(7, abstract, CONFIG)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"algo": {"num_envs": 8}}, r"env_state/done: checkpoint \(4,\) float32, config \(8,\) float32"),
        (
            {"algo": {"actor_hidden": (16,)}},
            r"actor_opt_state/inner_state/1/0/mu/params/MLP_0/Dense_0/bias: checkpoint \(8,\) float32, config \(16,\)",
        ),
        ({"env": {"name": "cartpole_swingup"}}, "env.name: checkpoint 'pendulum_swingup', config 'cartpole_swingup'"),
    ],
)
def test_a_config_that_changes_shapes_cannot_resume(tmp_path, states, change, message):
    state, _ = states
    sections = {name: dataclasses.replace(getattr(CONFIG, name), **values) for name, values in change.items()}
    changed = dataclasses.replace(CONFIG, **sections)
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        checkpoints.save(at_epoch(state, 2), CONFIG)
        checkpoints.wait_until_finished()
        with pytest.raises(IncompatibleCheckpointError, match=message) as error:
            checkpoints.restore_latest(abstract_state(changed), changed)
    assert f"cannot resume from '{tmp_path / 'checkpoints' / '2'}'" in str(error.value)
    key, value = next((f"{s}.{k}", v) for s, kv in change.items() for k, v in kv.items())
    assert f"{key}: " in str(error.value) and f"-> {list(value) if isinstance(value, tuple) else value}" in str(
        error.value
    )


def test_resuming_with_changed_shapes_fails_before_anything_compiles(tmp_path, states, monkeypatch):
    state, _ = states
    save_config(tmp_path, CONFIG)
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        checkpoints.save(at_epoch(state, 2), CONFIG)

    def no_compiling(*args, **kwargs):
        raise AssertionError("jax.jit was called before the checkpoint was checked")

    monkeypatch.setattr(jax, "jit", no_compiling)
    changed = dataclasses.replace(CONFIG, algo=dataclasses.replace(CONFIG.algo, num_envs=8))
    with pytest.raises(IncompatibleCheckpointError, match=r"algo\.num_envs: 4 -> 8"):
        train_module.train(changed, tmp_path, resume=True)


def test_a_fresh_run_refuses_a_directory_with_checkpoints(tmp_path, states):
    state, _ = states
    with Checkpointer(tmp_path, CONFIG.checkpoint) as checkpoints:
        checkpoints.save(at_epoch(state, 2), CONFIG)
    with pytest.raises(FileExistsError, match=f"run directory '{tmp_path}' already holds checkpoints"):
        train_module.train(CONFIG, tmp_path)


def test_a_fresh_run_refuses_a_directory_with_another_runs_metrics(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"epoch": 1, "env_steps": 16}\n')
    with pytest.raises(FileExistsError, match=f"run directory '{tmp_path}' already holds the metrics.jsonl"):
        train_module.train(CONFIG, tmp_path)


@pytest.mark.parametrize("resume", [False, True])
def test_a_second_writer_is_refused_while_the_first_runs(tmp_path, resume):
    (tmp_path / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getppid()}))
    with pytest.raises(RunDirectoryInUseError, match=f"run directory '{tmp_path}' is in use by pid {os.getppid()}"):
        train_module.train(CONFIG, tmp_path, resume=resume)
