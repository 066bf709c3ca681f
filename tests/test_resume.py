"""Interrupt and resume through the command line: SIGINT, SIGKILL, then exact continuation.

The end-to-end pendulum run (conftest) is the uninterrupted reference. The same
config is launched again, stopped with SIGINT, resumed, killed with SIGKILL after
a later checkpoint, and resumed again; it must end with the same training state
(every parameter, optimiser moment, normaliser statistic, env state, the key) and
write the same metrics. Sharing the reference run's config also shares its
compiled epoch through the persistent compilation cache.
"""

import json
import os
import signal
import time

import numpy as np
import pytest

from shac.run.checkpoint import Checkpointer
from tests.conftest import OPTIMIZED_ENV, PENDULUM_ARGS
from tests.forked_python import start_python
from tests.run_states import checkpoint_arrays

EPOCHS, CHECKPOINT_EVERY = 150, 20
# W&B and the checkpoint interval do not change what is trained
INTERRUPTED_ARGS = [*PENDULUM_ARGS, "logger=disabled", f"checkpoint.every={CHECKPOINT_EVERY}"]
TIMEOUT = 600


def launch(*args):
    # as the reference run: its compiled epoch is shared through the cache
    return start_python("launch/train.py", *args, env=OPTIMIZED_ENV)


def finish(process):
    stdout, stderr = process.communicate(timeout=TIMEOUT)
    return process.returncode, stdout, stderr


def records(run_dir):
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def steps(run_dir, attempts=50):
    """The run's checkpointed epochs, listed again (up to `attempts` times) if the running process deletes
    an old one meanwhile."""
    for _ in range(attempts - 1):
        try:
            return Checkpointer(run_dir).steps()
        except FileNotFoundError:  # orbax keeps the latest few: one it listed was removed before it was read
            time.sleep(0.02)
    return Checkpointer(run_dir).steps()


def wait_for(condition, process, what):
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert process.poll() is None, f"the run ended before {what}: {process.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """A run stopped by SIGINT, resumed, SIGKILLed, resumed; what each stage left behind."""
    run_dir = tmp_path_factory.mktemp("interrupted")
    stages = {}
    process = launch(*INTERRUPTED_ARGS, f"hydra.run.dir={run_dir}")
    wait_for(lambda: len(records(run_dir)) >= 3, process, "the third epoch")
    process.send_signal(signal.SIGINT)
    code, _, stderr = finish(process)
    stages["sigint"] = {"code": code, "stderr": stderr, "steps": steps(run_dir), "records": records(run_dir)}

    process = launch(f"resume={run_dir}")
    first = stages["sigint"]["steps"][-1]
    wait_for(lambda: any(s > first for s in steps(run_dir)), process, "a checkpoint after resuming")
    os.kill(process.pid, signal.SIGKILL)
    code, _, stderr = finish(process)
    stages["sigkill"] = {"code": code, "steps": steps(run_dir), "records": records(run_dir)}

    code, stdout, stderr = finish(launch(f"resume={run_dir}"))
    assert code == 0, stderr[-3000:]
    stages["resumed"] = {"stdout": stdout, "stderr": stderr, "records": records(run_dir)}
    return run_dir, stages


def test_sigint_saves_a_checkpoint_of_the_current_epoch_and_exits_130(interrupted):
    run_dir, stages = interrupted
    sigint = stages["sigint"]
    assert sigint["code"] == 128 + signal.SIGINT, sigint["stderr"][-3000:]
    last_epoch = sigint["records"][-1]["epoch"]
    assert sigint["steps"][-1] == last_epoch < EPOCHS
    assert (
        f"stopped by SIGINT after epoch {last_epoch}; continue with: python launch/train.py resume={run_dir}"
        in (sigint["stderr"])
    )


def test_sigkill_leaves_complete_checkpoints_and_the_resume_repeats_nothing(interrupted):
    _, stages = interrupted
    killed = stages["sigkill"]
    assert killed["code"] == -signal.SIGKILL
    assert all(step % CHECKPOINT_EVERY == 0 or step == stages["sigint"]["steps"][-1] for step in killed["steps"])
    epochs = [r["epoch"] for r in stages["resumed"]["records"]]
    assert epochs == list(range(1, EPOCHS + 1))  # records after the resumed checkpoint were dropped, not doubled


def test_resumed_run_ends_exactly_as_the_uninterrupted_one(pendulum_run, interrupted):
    run_dir, stages = interrupted
    expected, actual = (checkpoint_arrays(run, EPOCHS) for run in (pendulum_run, run_dir))
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=0, atol=1e-6, err_msg=name)
    for want, got in zip(records(pendulum_run), stages["resumed"]["records"], strict=True):
        want.pop("wall_time_s"), got.pop("wall_time_s")
        assert got == want  # training and evaluation metrics, epoch by epoch
    assert "eval/mean_return" in stages["resumed"]["records"][-1]


def test_resuming_with_other_shapes_fails_with_a_clear_message(interrupted):
    run_dir, _ = interrupted
    start = time.monotonic()
    code, _, stderr = finish(launch(f"resume={run_dir}", "algo.num_envs=8"))
    assert code != 0
    message = stderr.strip().splitlines()[-1]
    assert message.startswith(f"error: cannot resume from '{run_dir / 'checkpoints'}/{EPOCHS}'"), message
    assert "algo.num_envs: 64 -> 8" in message
    assert time.monotonic() - start < 90  # it stops before compiling anything
