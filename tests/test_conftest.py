"""The test session's own set-up: pytest-xdist keeps each group of tests in one worker."""

import os

import pytest


@pytest.mark.skipif("PYTEST_XDIST_WORKER" not in os.environ, reason="runs in one process (-n0)")
def test_each_module_runs_as_one_group_of_the_workers_schedule(request):
    # `--dist loadgroup` schedules by the group appended to the node id; a pytest or xdist that
    # drops it spreads a module over the workers, and each worker rebuilds the module's fixtures
    assert request.node.nodeid.endswith("@test_conftest")
