"""Who may write a run directory: one writer at a time (a lock file), and never over another run's results.

`RunLock` holds `<run_dir>/run.lock` (JSON: the holder's host and pid) for the
life of a training run, touching it every `HEARTBEAT_S` seconds. A second
writer is refused while the holder lives. A lock is stale, and taken over with
a warning, when its process is gone (checked on the same host) or when it has
not been touched for `STALE_AFTER_S` seconds (a holder on another host that
was killed, e.g. at a SLURM time limit).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from pathlib import Path

from shac.run.checkpoint import CHECKPOINT_DIR
from shac.run.tracking import read_records

LOCK_FILE = "run.lock"
HEARTBEAT_S = 30.0
"""How often the holder touches its lock."""
STALE_AFTER_S = 600.0
"""A lock untouched this long belongs to a holder that no longer runs, wherever it ran."""

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

    def age(self) -> float:
        """Seconds since the holder last touched the lock."""
        try:
            return time.time() - self.path.stat().st_mtime
        except FileNotFoundError:
            return 0.0

    def stale(self, holder: dict) -> bool:
        """Whether `holder` no longer runs: a process of this host that is gone, or a lock untouched too long."""
        pid = holder.get("pid")
        gone = holder.get("host") == self.host and isinstance(pid, int) and pid != self.pid and not _alive(pid)
        return gone or self.age() > STALE_AFTER_S

    def check(self) -> None:
        """Raises RunDirectoryInUseError unless the lock is free or stale."""
        holder = self.holder()
        if holder is None or self.stale(holder):
            return
        who = f"pid {holder.get('pid')} on host {holder.get('host')}" if holder else "an unreadable lock file"
        raise RunDirectoryInUseError(
            f"run directory '{self.path.parent}' is in use by {who} (lock file '{self.path}', touched "
            f"{self.age():.0f} s ago); wait for that run to end, or delete the lock file if it no longer runs"
        )

    def __enter__(self) -> RunLock:
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                self.check()
                holder = self.holder()
                if holder is not None:
                    log.warning(
                        "taking over the lock '%s' of pid %s on host %s, which no longer runs",
                        self.path,
                        holder.get("pid"),
                        holder.get("host"),
                    )
                    self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as file:
                json.dump({"host": self.host, "pid": self.pid}, file)
            self._stop = threading.Event()
            self._heartbeat = threading.Thread(target=self._touch, name="run-lock-heartbeat", daemon=True)
            self._heartbeat.start()
            return self
        self.check()  # another writer took it between our attempts
        raise RunDirectoryInUseError(f"could not take the lock '{self.path}'")

    def _touch(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:  # deleted by hand: nothing to keep fresh
                return

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._heartbeat.join()
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
