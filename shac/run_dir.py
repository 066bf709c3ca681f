"""Who may write a run directory: one writer at a time (a lock file), and never over another run's results.

`RunLock` holds `<run_dir>/run.lock` (JSON: the holder's host and pid) for the
life of a training run. A second writer is refused while the holder lives; a
lock left by a process that died (on this host) is taken over with a warning.
A lock written on another host is never taken over: only its owner can tell
whether it still runs, so the user deletes it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path

from shac.checkpoint import CHECKPOINT_DIR
from shac.tracking import read_records

LOCK_FILE = "run.lock"

log = logging.getLogger(__name__)


class RunDirectoryInUseError(RuntimeError):
    """Another live process holds the run directory's lock; the message names it."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class RunLock:
    """The lock of `run_dir`, held between `__enter__` and `__exit__`.

    Raises (on enter):
        RunDirectoryInUseError: a live process (or one on another host) holds it.
    """

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK_FILE
        self.host, self.pid = socket.gethostname(), os.getpid()

    def holder(self) -> dict | None:
        """The current holder's {"host", "pid"}, None when unlocked; an unreadable lock file reads as {}."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            holder = json.loads(text)
            return holder if isinstance(holder, dict) else {}
        except json.JSONDecodeError:
            return {}

    def stale(self, holder: dict) -> bool:
        """Whether `holder` is a process of this host that no longer runs (an unreadable lock is not stale)."""
        pid = holder.get("pid")
        return holder.get("host") == self.host and isinstance(pid, int) and pid != self.pid and not _alive(pid)

    def check(self) -> None:
        """Raises RunDirectoryInUseError unless the lock is free or stale."""
        holder = self.holder()
        if holder is None or self.stale(holder):
            return
        who = f"pid {holder.get('pid')} on host {holder.get('host')}" if holder else "an unreadable lock file"
        raise RunDirectoryInUseError(
            f"run directory '{self.path.parent}' is in use by {who} (lock file '{self.path}'); "
            "wait for that run to end, or delete the lock file if it no longer runs"
        )

    def __enter__(self) -> RunLock:
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                self.check()
                holder = self.holder()
                if holder is not None:
                    log.warning("taking over the lock '%s' of pid %s, which no longer runs", self.path, holder["pid"])
                    self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as file:
                json.dump({"host": self.host, "pid": self.pid}, file)
            return self
        self.check()  # another writer took it between our attempts
        raise RunDirectoryInUseError(f"could not take the lock '{self.path}'")

    def __exit__(self, *exc) -> None:
        if self.holder() == {"host": self.host, "pid": self.pid}:
            self.path.unlink(missing_ok=True)


def check_fresh(run_dir: Path) -> None:
    """Raises FileExistsError when `run_dir` holds another run's results (checkpoints or metrics).

    An empty `metrics.jsonl` (a run that stopped before its first epoch) is no result.
    """
    checkpoints = Path(run_dir) / CHECKPOINT_DIR
    if checkpoints.is_dir() and any(p.name.isdigit() for p in checkpoints.iterdir()):
        raise FileExistsError(
            f"run directory '{run_dir}' already holds checkpoints; continue it with resume={run_dir} "
            "or train into a new directory"
        )
    if read_records(Path(run_dir)):
        raise FileExistsError(
            f"run directory '{run_dir}' already holds the metrics.jsonl of another run (and no checkpoint "
            "to resume); train into a new directory, or delete it"
        )
