"""Run a real ``odradek serve`` process for tests: loopback, ephemeral port, temp log dirs.

The broker logs JSON to stderr; :class:`BrokerProcess` reads it on a thread, finds the
``broker started`` event (which carries the bound port) and keeps every line for assertions.
No sleeps: start-up waits on that event, shutdown on the process exit.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.ports import reserve_port

REPO = Path(__file__).resolve().parent.parent


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll ``condition`` (every 20 ms) until it holds or ``timeout_s`` passed; whether it
    held. For state the broker reaches on its own time (a file closed, a socket gone)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def peer_of(sock: socket.socket) -> str:
    """The ``peer`` the broker logs for the connection of ``sock`` (its local address)."""
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


class BrokerProcess:
    def __init__(
        self,
        log_dirs: Sequence[Path],
        *,
        overrides: Sequence[str] = (),
        backend: str = "asyncio",
        port: int = 0,
        listeners: Sequence[str] = ("PLAINTEXT",),
        env: dict[str, str] | None = None,
        rlimits: dict[int, tuple[int, int]] | None = None,
        program: Sequence[str] = (sys.executable, "-m", "odradek.cli.main"),
        cwd: Path = REPO,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.overrides = list(overrides)
        self.backend = backend
        # Ports not given are reserved here, out of the kernel's ephemeral range, so that a
        # restart can bind them again (tests/ports.py).
        self.requested_port = port or reserve_port()
        # listener name -> port: the first listener takes ``port``, the others reserved ones
        self.requested_ports = {
            name: self.requested_port if i == 0 else reserve_port()
            for i, name in enumerate(listeners)
        }
        self.requested_metrics_port = reserve_port()
        self.env = env
        self.rlimits = dict(rlimits or {})  # resource.RLIMIT_* -> (soft, hard) for the child
        self.program = list(program)  # the `odradek` command: this checkout's, or an installed one
        self.cwd = cwd
        self.port: int | None = None  # the first listener's
        self.ports: dict[str, int] = {}  # every listener's, by name
        self.metrics_port: int | None = None  # the metrics endpoint's (none if turned off)
        self.lines: list[dict[str, Any]] = []
        self.raw_lines: list[str] = []
        self.process: subprocess.Popen[str] | None = None
        self._up: subprocess.Popen[str] | None = None  # the process that logged "broker started"
        self._reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        first = next(iter(self.requested_ports))
        self.requested_ports[first] = self.requested_port
        listener = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.requested_ports.items())
        args = [
            *self.program,
            "serve",
            "--config",
            str(REPO / "config" / "server.properties"),
            "--backend",
            self.backend,
            "--log-format",
            "json",
            "--override",
            f"listeners={listener}",
            "--override",
            "log.dirs=" + ",".join(str(d) for d in self.log_dirs),
            "--override",  # the shipped config's fixed port would collide between brokers
            f"metrics.listener=http://127.0.0.1:{self.requested_metrics_port}",
        ]
        for item in self.overrides:
            args += ["--override", item]
        return args

    def start(self, timeout_s: float = 30.0) -> BrokerProcess:
        started = threading.Event()  # this process's own: a former reader cannot set it
        env = dict(os.environ)
        env.update(self.env or {})
        self.process = subprocess.Popen(
            self.command(),
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=self._apply_rlimits if self.rlimits else None,
        )
        self._reader = threading.Thread(
            target=self._read_stderr, args=(self.process, started), daemon=True
        )
        self._reader.start()
        if not started.wait(timeout_s) or self._up is not self.process:
            self.kill()
            raise RuntimeError("broker did not start:\n" + "\n".join(self.raw_lines[-30:]))
        return self

    def _apply_rlimits(self) -> None:  # runs in the child, before exec
        import resource

        for which, limits in self.rlimits.items():
            resource.setrlimit(which, limits)

    def _read_stderr(self, process: subprocess.Popen[str], started: threading.Event) -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            self.raw_lines.append(raw.rstrip("\n"))
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            self.lines.append(event)
            if event.get("event") == "broker started":
                self.port = int(event["port"])
                self.ports = {name: int(port) for name, port in event["listeners"].items()}
                self.requested_ports.update(self.ports)  # a restart binds the same ports
                self.metrics_port = event.get("metrics_port")
                self.requested_port = self.port  # a restart binds the same port
                self.requested_metrics_port = self.metrics_port or 0
                self._up = process
                started.set()
        started.set()  # the process ended: wake a waiting start()

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.lines if e.get("event") == name]

    def wait_for_events(
        self,
        name: str,
        *,
        count: int = 1,
        since_line: int = 0,
        timeout_s: float = 5.0,
        where: Callable[[dict[str, Any]], bool] = lambda event: True,
    ) -> list[dict[str, Any]]:
        """The log lines named ``name`` (and for which ``where`` holds) from line
        ``since_line`` on, waiting up to ``timeout_s`` for ``count`` of them: a line the broker
        wrote just before closing a socket may not have been parsed yet. Returns what there is
        when the time is up."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = [e for e in self.lines[since_line:] if e.get("event") == name and where(e)]
            if len(found) >= count or time.monotonic() >= deadline:
                return found
            time.sleep(0.01)  # the stderr reader thread parses lines as they come

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM (a clean shutdown) and wait; returns the exit status."""
        return self._signal_and_wait(signal.SIGTERM, timeout_s)

    def kill(self) -> int:
        """SIGKILL: no shutdown at all, as a crash or ``kill -9``."""
        return self._signal_and_wait(signal.SIGKILL, 30.0)

    def _signal_and_wait(self, signum: int, timeout_s: float) -> int:
        process = self.process
        if process is None:
            return 0
        if process.poll() is None:
            process.send_signal(signum)
        try:
            status = process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            status = process.wait()
        if self._reader is not None:
            self._reader.join(5)
        return status

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.stop()
