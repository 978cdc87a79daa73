"""Install and run the peer servers of ``bench.peers``: redis-server and nats-server.

Each server is started by the benchmark itself, never the system service:

* on ``127.0.0.1`` only, on a free ephemeral port (asked of the kernel by binding port 0,
  then handed to the server; a start that loses the race is retried on a new port);
* with a fresh data directory under the benchmark's scratch directory (deleted afterwards);
* ``redis-server --bind 127.0.0.1 --port N --dir D --save '' --appendonly yes|no
  --appendfsync always|everysec`` (no RDB snapshots, so only the AOF setting decides what
  reaches the disk); ``nats-server -js -a 127.0.0.1 -p N -sd D``, plus a config file for
  settings that have no flag;
* ready when it answers: Redis a ``PING`` with ``+PONG``, NATS its ``INFO`` greeting on a
  fresh connection (JetStream's API is then probed by the client, which retries);
* stopped with SIGTERM (then SIGKILL after a deadline) when the ``with`` block ends.

Missing binaries are installed from Debian (``apt-get install -y --no-install-recommends``,
running ``apt-get update`` first if the package is unknown). When that is impossible (no
apt, not root, package not found) :func:`ensure_binary` returns ``None`` and a reason, and the
benchmark reports the peer as skipped instead of failing the whole run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

__all__ = [
    "NatsServer",
    "PeerServer",
    "RedisServer",
    "ServerError",
    "ensure_binary",
    "free_port",
]

LOOPBACK = "127.0.0.1"
_START_TIMEOUT_S = 20.0
_STOP_TIMEOUT_S = 20.0
_APT_TIMEOUT_S = 600.0

Say = Callable[[str], None]


class ServerError(RuntimeError):
    """A peer server did not start or answer."""


def ensure_binary(binary: str, package: str, say: Say) -> tuple[str | None, str]:
    """The path of ``binary``, installing Debian ``package`` if needed.

    Returns ``(path, note)``; ``path`` is ``None`` when the binary cannot be had, and ``note``
    says why (it is shown in the benchmark's table).
    """
    found = shutil.which(binary) or _sbin(binary)
    if found:
        return found, ""
    apt = shutil.which("apt-get")
    if apt is None:
        return None, f"{binary} not installed and no apt-get here"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return None, f"{binary} not installed; apt-get needs root (apt-get install {package})"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = [apt, "install", "-y", "--no-install-recommends", package]
    say(f"installing {package} (apt-get)")
    done = _run(install, env)
    if done.returncode != 0:
        say(f"apt-get install {package} failed; running apt-get update and retrying")
        update = _run([apt, "update"], env)
        if update.returncode == 0:
            done = _run(install, env)
    found = shutil.which(binary) or _sbin(binary)
    if done.returncode != 0 or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"apt-get install {package} failed: {tail[0]}"
    return found, ""


def _sbin(binary: str) -> str | None:
    for directory in ("/usr/sbin", "/usr/bin", "/sbin"):
        path = Path(directory) / binary
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def _run(command: Sequence[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command,
            env=env,
            capture_output=True,
            text=True,
            timeout=_APT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(command), 1, "", str(exc))


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


class PeerServer(ABC):
    """A server process on ``127.0.0.1:port`` with its own data directory; a context manager."""

    name = "server"

    def __init__(self, binary: str, data_dir: Path) -> None:
        self.binary = binary
        self.data_dir = Path(data_dir)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log_path = self.data_dir / f"{self.name}.log"

    @abstractmethod
    def command(self, port: int) -> list[str]:
        """The command line that serves on ``port``."""

    @abstractmethod
    def answers(self) -> bool:
        """True once the server answers its protocol on ``self.port``."""

    def start(self) -> PeerServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        last_error = ""
        for _attempt in range(3):
            self.port = free_port()
            with open(self._log_path, "ab") as log:
                self.process = subprocess.Popen(
                    self.command(self.port),
                    cwd=self.data_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a Ctrl-C to the benchmark is not sent here
                )
            deadline = time.monotonic() + _START_TIMEOUT_S
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break
                if self.answers():
                    return self
                time.sleep(0.02)  # polling a condition with a deadline
            last_error = self._log_tail()
            self.stop()
        raise ServerError(f"{self.name} did not start: {last_error}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _log_tail(self) -> str:
        try:
            lines = self._log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return " | ".join(lines[-3:]) or "no output"

    def __enter__(self) -> PeerServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _connect(self) -> socket.socket | None:
        try:
            return socket.create_connection((LOOPBACK, self.port), timeout=1.0)
        except OSError:
            return None


class RedisServer(PeerServer):
    """``redis-server`` with AOF off, or on with ``appendfsync`` ``everysec`` or ``always``."""

    name = "redis"

    def __init__(self, binary: str, data_dir: Path, *, appendfsync: str | None) -> None:
        if appendfsync not in (None, "everysec", "always", "no"):
            raise ValueError(f"appendfsync {appendfsync!r}")
        super().__init__(binary, data_dir)
        self.appendfsync = appendfsync

    def command(self, port: int) -> list[str]:
        aof = ["--appendonly", "no"]
        if self.appendfsync is not None:
            aof = ["--appendonly", "yes", "--appendfsync", self.appendfsync]
        return [
            self.binary,
            "--bind", LOOPBACK,
            "--port", str(port),
            "--dir", str(self.data_dir),
            "--save", "",
            *aof,
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--logfile", "",
        ]  # fmt: skip

    def answers(self) -> bool:
        sock = self._connect()
        if sock is None:
            return False
        with sock:
            try:
                sock.sendall(b"*1\r\n$4\r\nPING\r\n")
                return sock.recv(64).startswith(b"+PONG")
            except OSError:
                return False


class NatsServer(PeerServer):
    """``nats-server -js`` with a file store under ``data_dir``.

    ``sync_interval`` (``"always"`` or a duration such as ``"2m"``) is written to the
    config file's ``jetstream`` block when given; nats-server 2.9 (Debian 12) has no such
    setting and refuses the file, so leave it ``None`` there: 2.9's file store then fsyncs
    only on its own timer, never before it acknowledges a publish.
    """

    name = "nats"

    def __init__(self, binary: str, data_dir: Path, *, sync_interval: str | None = None) -> None:
        super().__init__(binary, data_dir)
        self.sync_interval = sync_interval

    def command(self, port: int) -> list[str]:
        store = self.data_dir / "jetstream"
        command = [self.binary, "-js", "-a", LOOPBACK, "-p", str(port), "-sd", str(store)]
        if self.sync_interval is not None:
            config = self.data_dir / "nats.conf"
            config.write_text(f"jetstream {{\n  sync_interval: {self.sync_interval}\n}}\n")
            command[1:1] = ["-c", str(config)]
        return command

    def answers(self) -> bool:
        sock = self._connect()
        if sock is None:
            return False
        with sock:
            try:
                return sock.recv(8).startswith(b"INFO")
            except OSError:
                return False

    def version(self) -> str:
        done = subprocess.run([self.binary, "--version"], capture_output=True, text=True)
        return done.stdout.strip() or done.stderr.strip()
