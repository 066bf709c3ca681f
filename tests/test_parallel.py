"""Data parallelism: the env batch split over devices and over processes trains as on one device.

Two CPU devices are forced in a subprocess (`XLA_FLAGS` must be set before jax
starts); two processes on localhost form a `jax.distributed` run of one device
each. Both end with the parameters of the same run on one device, up to the
order of floating-point sums.
"""

import json
import os
import shutil
import socket
import subprocess

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec

import envs
from shac.core.algorithm import Shac
from shac.run import parallel
from shac.run.serialization import load_config
from tests.forked_python import ForkedProcess, run_python, start_python
from tests.run_states import checkpoint_arrays
from tests.toy_env import LineEnv, RegisteredLineEnv
from tests.two_devices import CONFIG

TWO_DEVICES = {**os.environ, "XLA_FLAGS": f"{os.environ['XLA_FLAGS']} --xla_force_host_platform_device_count=2"}
TIMEOUT = 300


@pytest.fixture(scope="module", autouse=True)
def line_env():
    """The toy env registered as `line` while this module runs (the others see only the real tasks)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(envs._REGISTRY, "line", RegisteredLineEnv)
        yield


def test_state_shardings_split_the_env_batch_and_replicate_the_rest():
    shac = Shac(CONFIG, LineEnv())
    mesh = parallel.make_mesh(CONFIG.num_envs, jax.devices()[:1])
    shardings = parallel.state_shardings(mesh, jax.eval_shape(shac.init, jax.random.key(0)))
    split = jax.tree.leaves((shardings.env_state, shardings.episodes))
    whole = jax.tree.leaves(shardings.replace(env_state=None, episodes=None))
    assert split and all(s.spec == PartitionSpec("batch") for s in split)
    assert whole and all(s.spec == PartitionSpec() for s in whole)


def test_two_devices_end_like_one(tmp_path):
    out = tmp_path / "states.npz"
    result = run_python("-m", "tests.two_devices", str(out), env=TWO_DEVICES, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = np.load(out)
    layout = json.loads(str(saved["layout"]))
    # 8 envs with obs [2] over 2 devices: a [4, 2] block on each; parameters whole on both
    assert layout == {
        "obs_devices": 2,
        "obs_shard_shapes": [[4, 2], [4, 2]],
        "param_devices": 2,
        "param_replicated": True,
    }
    names = [k.removeprefix("one/") for k in saved.files if k.startswith("one/")]
    assert any(name.startswith("actor_params/") for name in names)
    for name in names:
        np.testing.assert_allclose(saved[f"two/{name}"], saved[f"one/{name}"], rtol=1e-5, atol=1e-6, err_msg=name)


def test_num_envs_must_divide_over_the_devices(tmp_path):
    result = run_python("-m", "tests.toy_train", "algo.num_envs=5", f"hydra.run.dir={tmp_path}", env=TWO_DEVICES)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "config error: algo.num_envs=5 must be divisible by the number of devices (2), e.g. algo.num_envs=4"
    )


def toy_train(*args: str) -> ForkedProcess | subprocess.Popen:
    return start_python("-m", "tests.toy_train", *args)


def finish(processes: list[ForkedProcess | subprocess.Popen]) -> list[tuple[int, str, str]]:
    """Waits for every process (killing all of them if one hangs); (exit code, stdout, stderr) of each."""
    try:
        outputs = [p.communicate(timeout=TIMEOUT) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    return [(p.returncode, out, err) for p, (out, err) in zip(processes, outputs, strict=True)]


def two_processes(*args: str) -> list[tuple[int, str, str]]:
    """`tests.toy_train` as a two-process jax.distributed run on localhost."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    distributed = ["distributed.enabled=true", f"distributed.coordinator_address=127.0.0.1:{port}"]
    distributed.append("distributed.num_processes=2")
    return finish([toy_train(*args, *distributed, f"distributed.process_id={i}") for i in range(2)])


@pytest.fixture(scope="module")
def distributed_run(tmp_path_factory):
    """The toy run for 3 epochs by one process, and by two processes: straight through, then again from epoch 2.

    Returns the two run directories, the final states (single, two processes,
    two processes resumed) and each stage's (exit code, stdout, stderr) per process.
    """
    single, multi = tmp_path_factory.mktemp("single"), tmp_path_factory.mktemp("multi")
    reference = toy_train(f"hydra.run.dir={single}", "algo.max_epochs=3")
    stages = {"trained": two_processes(f"hydra.run.dir={multi}", "algo.max_epochs=3", "checkpoint.every=2")}
    stages["single"] = finish([reference])
    check_exit_codes(stages)
    config = load_config(single)
    line = Shac(config.algo, RegisteredLineEnv(episode_length=config.env.episode_length))  # the runs' shapes
    states = {"single": checkpoint_arrays(single, 3, line), "trained": checkpoint_arrays(multi, 3, line)}
    shutil.rmtree(multi / "checkpoints" / "3")
    stages["resumed"] = two_processes(f"resume={multi}", "algo.max_epochs=3")  # toy_train.ARGS say 2
    check_exit_codes(stages)
    states["resumed"] = checkpoint_arrays(multi, 3, line)
    return single, multi, states, stages


def check_exit_codes(stages: dict[str, list[tuple[int, str, str]]]) -> None:
    for stage, results in stages.items():
        for process, (code, _, stderr) in enumerate(results):
            assert code == 0, f"{stage}, process {process}: {stderr[-3000:]}"


@pytest.mark.parametrize("stage", ["trained", "resumed"])
def test_two_processes_train_like_one(distributed_run, stage):
    _, _, states, _ = distributed_run
    expected, actual = states["single"], states[stage]
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_only_process_0_writes_and_reports(distributed_run):
    _, multi, _, stages = distributed_run
    for (_, first, _), (_, second, _) in (stages["trained"], stages["resumed"]):
        assert f"run directory: {multi}" in first
        assert "run directory" not in second
    records = [json.loads(line) for line in (multi / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3]  # one writer; the resume replaced epoch 3's record
    assert records[-1]["env_steps"] == 3 * 4 * 4  # global: 3 epochs of 4 envs (2 per process) x 4 steps
    assert sorted(int(p.name) for p in (multi / "checkpoints").iterdir()) == [2, 3]
    assert (multi / "policy.msgpack").is_file()


def test_a_run_outside_a_sweep_has_no_wandb_group(distributed_run):
    single, multi, _, _ = distributed_run
    for run_dir in (single, multi):
        assert json.loads((run_dir / "config.json").read_text())["logger"]["group"] is None
