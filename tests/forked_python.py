"""Runs the tests' Python commands in processes forked from one that has imported their libraries.

A command-line test starts `python launch/<script>.py ...`; a fresh interpreter spends about
4.5 s of a 2-core CPU importing jax, MuJoCo, MJX, Hydra, W&B and orbax before the script does
anything, and about 2 s more tearing its modules down at exit. `start_python` and `run_python`
instead ask a server (`python -m tests.forked_python`, one per pytest worker, started on first
use) that imported them once, without starting JAX's backend, to fork: the child takes the
command's environment and output files and runs the script as `__main__` (or the module, for
`-m`) in the repository's root, a process of its own that signals reach as any other, then exits
as Python does (atexit handlers, non-daemon threads, the exit code of `sys.exit`).

A command falls back to a fresh interpreter when its environment differs from the server's in a
variable the preloaded libraries read at import (`READ_AT_IMPORT`); `XLA_FLAGS` is read when the
backend starts, which only the child does. Every command does outside Linux, and with
`SHAC_TESTS_FORK=0` (to check that the launch scripts run in fresh interpreters). The tests that
must see a fresh interpreter (the import layers, the compile-flag benchmark, the compilation
cache's logging) start one themselves.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import pkgutil
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]

READ_AT_IMPORT = ("JAX_", "XLA_", "TF_", "MUJOCO_", "WARP_", "PYTHON", "OMP_", "OPENBLAS_", "CUDA", "LD_")
"""Prefixes of the variables the preloaded libraries may read when imported; `XLA_FLAGS` is exempt."""

NOT_PRELOADED = {"shac.run.export"}
"""Modules left to the child: onnxruntime starts a thread when imported, which a fork does not copy."""

LIBRARIES = ["hydra", "wandb", "orbax.checkpoint", "mujoco_playground", "matplotlib.pyplot", "imageio"]
"""Third-party modules the launch scripts import late, preloaded beside every module of shac and envs."""


def preload() -> None:
    """Imports the launch scripts' libraries and shac's and envs' modules; fails if JAX's backend started."""
    from launch.runtime import headless_rendering

    headless_rendering()  # before MuJoCo is imported, as every launch script does
    import envs
    import shac

    names = [m.name for pkg in (shac, envs) for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
    for name in ["launch.cli", "launch.preflight", *LIBRARIES, *names]:
        if name not in NOT_PRELOADED:
            importlib.import_module(name)
    from jax._src import xla_bridge

    if xla_bridge._backends or threading.active_count() != 1:
        raise RuntimeError("preloading started JAX's backend or a Python thread, which a forked child would lack")


def serve() -> dict:
    """Says `ready`, then forks a child per request line on stdin (`started <pid>`) and reports each exit
    (`exited <pid> <code>`) as it happens; several children may run at once.

    Returns the request in the child only; the server exits when stdin closes.
    """
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that a child's exit wakes the select below
    received = b""
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([sys.stdin.fileno(), wake_read], [], [])
        if wake_read in readable:
            os.read(wake_read, 4096)
        report_exits()
        if sys.stdin.fileno() not in readable:
            continue
        chunk = os.read(sys.stdin.fileno(), 65536)
        if not chunk:
            sys.exit(0)
        received += chunk
        while b"\n" in received:
            line, received = received.split(b"\n", 1)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_read)
                os.close(wake_write)
                return json.loads(line)
            print(f"started {pid}", flush=True)


def report_exits() -> None:
    """Reaps the children that have exited, printing `exited <pid> <code>` for each (code as Popen's)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        print(f"exited {pid} {os.waitstatus_to_exitcode(status)}", flush=True)


def run(request: dict) -> NoReturn:
    """In the forked child: the request's environment and files, then its command as `__main__`.

    Exits as Python does (the exit code or message of `sys.exit`, a traceback and 1 for an uncaught
    exception, non-daemon threads joined, atexit handlers run, output flushed), except that the
    modules are not torn down: with the preloaded libraries that takes about 2 s and writes nothing.
    """
    os.chdir(ROOT)
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(file, fd)
        os.close(file)
    sys.stdin = open(os.devnull)  # noqa: SIM115 (the server's stdin carries requests; a command gets none)
    args = request["args"]
    code = 0
    try:
        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(args)
            sys.path[0] = str(Path(args[0]).resolve().parent)
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # what the interpreter's exit does first: join the non-daemon threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if not stream.closed:
            stream.flush()
    os._exit(code)


class Server:
    """The forking server of this process: starts children and collects their exit codes."""

    def __init__(self):
        self.env = dict(os.environ)
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (the server's stderr, as long as it lives)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.forked_python"],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        self.received = b""
        self.exit_codes: dict[int, int] = {}
        if self.read_line(timeout=300) != "ready":
            raise RuntimeError("the forking server did not start")

    def serves(self, env: dict) -> bool:
        """Whether a command with `env` would import the preloaded libraries as the server did."""
        changed = {k for k in self.env.keys() | env.keys() if self.env.get(k) != env.get(k)}
        read_at_import = any(k.startswith(READ_AT_IMPORT) and k != "XLA_FLAGS" for k in changed)
        return not read_at_import

    def read_line(self, timeout: float | None) -> str:
        """The server's next line (read unbuffered, so that a line already sent is never waited for)."""
        while b"\n" not in self.received:
            ready, _, _ = select.select([self.process.stdout], [], [], timeout)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.process.stdout.fileno(), 4096)
            if not chunk:
                self.log.seek(0)
                log = self.log.read().decode(errors="replace")[-3000:]
                raise RuntimeError(f"the forking server exited with {self.process.wait()}:\n{log}")
            self.received += chunk
        line, self.received = self.received.split(b"\n", 1)
        return line.decode()

    def next_event(self, timeout: float | None) -> int | None:
        """Reads one line: a started child's pid, or None after noting an exit code."""
        kind, pid, *code = self.read_line(timeout).split()
        if kind == "started":
            return int(pid)
        self.exit_codes[int(pid)] = int(code[0])
        return None

    def start(self, args: list[str], env: dict) -> ForkedProcess:
        process = ForkedProcess(self, args)
        request = {"args": args, "env": env, "stdout": str(process.stdout_path), "stderr": str(process.stderr_path)}
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        while (pid := self.next_event(timeout=60)) is None:
            pass
        process.pid = pid
        return process


class ForkedProcess:
    """A command forked by the server, with the part of `subprocess.Popen`'s interface the tests use."""

    def __init__(self, server: Server, args: list[str]):
        self.server, self.args = server, [sys.executable, *args]
        self.pid: int = -1
        self.returncode: int | None = None
        self.files = tempfile.TemporaryDirectory(prefix="forked_python_")
        self.stdout_path = Path(self.files.name) / "stdout"
        self.stderr_path = Path(self.files.name) / "stderr"

    def poll(self) -> int | None:
        try:
            return self.wait(timeout=0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.pid not in self.server.exit_codes:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                self.server.next_event(left)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
        self.returncode = self.server.exit_codes[self.pid]
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Waits for the exit; (stdout, stderr) as text."""
        self.wait(timeout)
        return self.stdout_path.read_text(), self.stderr_path.read_text()

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_server: Server | None = None


def start_python(*args: str, env: dict | None = None) -> ForkedProcess | subprocess.Popen:
    """`subprocess.Popen([sys.executable, *args], stdout=PIPE, stderr=PIPE, text=True)` in the repository's
    root, forked from the server.

    `args`: a script and its arguments, or `-m`, a module and its arguments. `env`: the child's whole
    environment (default: this process's).
    """
    global _server
    env = dict(os.environ if env is None else env)
    if forking():
        if _server is None or _server.process.poll() is not None:
            _server = Server()
        if _server.serves(env):
            return _server.start(list(args), env)
    command = [sys.executable, *args]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def forking() -> bool:
    """Whether commands are forked: on Linux, unless `SHAC_TESTS_FORK=0` asks for fresh interpreters.

    Elsewhere a fork of a process that has imported these libraries is not safe (macOS's system
    frameworks) or not possible (Windows), so every command gets a fresh interpreter.
    """
    return sys.platform == "linux" and os.environ.get("SHAC_TESTS_FORK", "1") != "0"


def run_python(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout)`, forked."""
    process = start_python(*args, env=env)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


if __name__ == "__main__":
    preload()
    run(serve())
